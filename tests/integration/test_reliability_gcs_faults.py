"""Staging and export end as they would without faults, whatever happens to their Cloud Storage calls.

``aip-local serve --fault-admin`` puts a fault-injecting proxy in front of fake-gcs-server
(airflow_aip.local.storage.gcs_proxy); the code under test talks to the proxy, the assertions read
fake-gcs-server directly. Each test aims one fault (429/500/503/drop/reset, before the emulator
sees the call or after it applied it) at one call staging or export makes: the outcome is one
staged object holding our bytes, or an export whose objects and manifest are complete, the
manifest written last; never a duplicate, a leftover or a half-written state.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NamedTuple

import httpx
import pytest

from airflow_aip.local.storage.gcs import FakeGcsServer
from tests.fixtures.local_service import (
    LocalService,
    StagedTrainer,
    own_service,
    storage_client,
    wait_for_state,
)
from tests.fixtures.soak import soak_beyond

pytestmark = pytest.mark.integration
PROJECT = "gcs-faults-project"
KINDS = soak_beyond([429, 500, 503, "drop", "reset"], keep=[503, "drop"])  # all of them in soak
WHEN = ["before", "after"]
MODEL_FILES = {"model/weights.bin": 300_000, "model/config.json": 200, "metrics.json": 50}


# Cloud Storage through its fault proxy (see ``proxied``), no fault until asked.
faulty_service = own_service("faulty_service", ["--fault-admin"])


@pytest.fixture
def proxied(
    faulty_service: LocalService, fake_gcs: FakeGcsServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[LocalService]:
    """Our hooks talk to the proxy; every test starts and ends with no rule pending."""
    assert faulty_service.storage_url != fake_gcs.url  # the proxy, not the emulator
    assert faulty_service.storage_url.startswith("http://127.0.0.1:")  # on loopback, as serve is
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", faulty_service.storage_url)
    faulty_service.admin("_faults", method="DELETE")
    yield faulty_service
    faulty_service.admin("_faults", method="DELETE")


@pytest.fixture
def bucket(fake_gcs: FakeGcsServer) -> Any:
    """A fresh bucket, read directly on fake-gcs-server (never through the faults)."""
    return storage_client(fake_gcs.url).create_bucket(f"aip-gcsf-{uuid.uuid4().hex[:12]}")


def aim(service: LocalService, method: str, when: str, kind: int | str, skip: int = 0) -> dict[str, Any]:
    """One fault on the next (after ``skip``) call of ``method``; the stats to compare with afterwards."""
    before: dict[str, Any] = service.admin("_stats")
    rule = {"method": method, "when": when, "kind": kind, "skip": skip}
    service.admin("_faults", rule, "POST")
    return before


def injected(service: LocalService, before: dict[str, Any], method: str) -> int:
    stats = service.admin("_stats")
    assert stats["rules"] == [], "the aimed call was never made"
    now, then = stats["faults"].get(method, {}), before["faults"].get(method, {})
    return int(sum(now.values()) - sum(then.values()))


def contents(bucket: Any, prefix: str = "") -> dict[str, Any]:
    return {blob.name: blob for blob in bucket.client.list_blobs(bucket.name, prefix=prefix)}


# -- staging -------------------------------------------------------------------------------------


def stage(bucket: Any, tmp_path: Path, size: int) -> tuple[list[str], bytes]:
    from airflow_aip.operators.staging import StagePackagesOperator

    data = os.urandom(size)
    package = tmp_path / "trainer-0.1.tar.gz"
    package.write_bytes(data)
    operator = StagePackagesOperator(
        task_id="stage", packages=[str(package)], staging_uri=f"gs://{bucket.name}/staging"
    )
    uris: list[str] = operator.execute({})
    return uris, data


def assert_staged_once(bucket: Any, uris: list[str], data: bytes) -> None:
    sha = hashlib.sha256(data).hexdigest()
    assert uris == [f"gs://{bucket.name}/staging/{sha}/trainer-0.1.tar.gz"]
    listed = contents(bucket)
    assert list(listed) == [f"staging/{sha}/trainer-0.1.tar.gz"]  # one object, nothing else
    blob = next(iter(listed.values()))
    assert blob.download_as_bytes() == data
    assert blob.md5_hash == base64.b64encode(hashlib.md5(data).digest()).decode()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("when", WHEN)
@pytest.mark.parametrize("method", ["storage.objects.get", "storage.objects.insert"])
def test_staging_a_small_package_through_a_fault(
    proxied: LocalService, bucket: Any, tmp_path: Path, method: str, when: str, kind: int | str
) -> None:
    before = aim(proxied, method, when, kind)
    uris, data = stage(bucket, tmp_path, 100_000)  # one multipart upload
    assert injected(proxied, before, method) == 1
    assert_staged_once(bucket, uris, data)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("when", WHEN)
@pytest.mark.parametrize("call", [0, 1, 2], ids=["initiate", "first-chunk", "last-chunk"])
def test_staging_a_large_package_through_a_fault(
    proxied: LocalService, bucket: Any, tmp_path: Path, call: int, when: str, kind: int | str
) -> None:
    before = aim(proxied, "storage.objects.insert", when, kind, skip=call)
    uris, data = stage(bucket, tmp_path, 9 * 1024 * 1024)  # resumable: initiate, then two 8 MiB chunks
    assert injected(proxied, before, "storage.objects.insert") == 1
    assert_staged_once(bucket, uris, data)


# -- export --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def finished_job(faulty_service: LocalService, staged_trainer: StagedTrainer, fake_gcs: FakeGcsServer) -> str:
    """A SUCCEEDED job whose output (its report.json and a model written here) is to be exported."""
    job_id = f"gcs_faults_{uuid.uuid4().hex[:8]}"
    body = {"jobId": job_id, "trainingInput": staged_trainer.training_input("succeed")}
    ml = faulty_service.ml()
    ml.projects().jobs().create(parent=f"projects/{PROJECT}", body=body).execute()
    job = wait_for_state(ml, f"projects/{PROJECT}/jobs/{job_id}", {"SUCCEEDED", "FAILED", "CANCELLED"})
    assert job["state"] == "SUCCEEDED"
    prefix = job["trainingInput"]["jobDir"][len(f"gs://{staged_trainer.bucket}/") :]
    bucket = storage_client(fake_gcs.url).bucket(staged_trainer.bucket)
    for name, size in MODEL_FILES.items():
        bucket.blob(f"{prefix}/{name}").upload_from_string(os.urandom(size))
    return job_id


def export(service: LocalService, job_id: str, destination: str) -> dict[str, Any]:
    from airflow_aip.operators import ExportArtifactsOperator

    operator = ExportArtifactsOperator(
        task_id="export",
        project_id=PROJECT,
        job_id=job_id,
        destination_uri=destination,
        api_endpoint=service.url,
        gcp_conn_id="aip_no_such_conn",
        backend="ai_platform",  # the export's storage side is the same on both backends
    )
    ti = SimpleNamespace(dag_id="gcs_faults", task_id="export", run_id="manual__1", try_number=1)
    result: dict[str, Any] = operator.execute({"ti": ti})  # type: ignore[typeddict-item]
    return result


def assert_exported_once(bucket: Any, result: dict[str, Any], source: dict[str, Any]) -> dict[str, Any]:
    """Every source object, with its bytes, and the manifest describing them, written last; nothing else."""
    names = sorted(source)
    prefix = result["destination"][len(f"gs://{bucket.name}/") :] + "/"
    landed = contents(bucket, prefix)
    assert sorted(landed) == sorted([prefix + name for name in names] + [prefix + "manifest.json"])
    for name in names:
        assert (landed[prefix + name].size, landed[prefix + name].crc32c) == (
            source[name].size,
            source[name].crc32c,
        )
    manifest_blob = landed.pop(prefix + "manifest.json")
    manifest: dict[str, Any] = json.loads(manifest_blob.download_as_bytes())
    described = [(o["name"], o["size"], o["crc32c"]) for o in manifest["objects"]]
    assert described == [(name, source[name].size, source[name].crc32c) for name in names]
    assert all(manifest_blob.generation > blob.generation for blob in landed.values())  # written last
    assert result["objects"] == len(names)
    return manifest


def source_objects(bucket: Any, service: LocalService, job_id: str) -> dict[str, Any]:
    job = service.ml().projects().jobs().get(name=f"projects/{PROJECT}/jobs/{job_id}").execute()
    prefix = job["trainingInput"]["jobDir"][len(f"gs://{bucket.name}/") :] + "/"
    return {name[len(prefix) :]: blob for name, blob in contents(bucket, prefix).items()}


EXPORT_CALLS = [
    "storage.objects.list",
    "storage.objects.get",
    "storage.objects.rewrite",
    "storage.objects.insert",
]


class Export(NamedTuple):
    """The finished job's export to a fresh destination: the bucket, read on fake-gcs-server
    itself, and the job's output objects by their names below its job dir."""

    job_id: str
    bucket: Any
    source: dict[str, Any]
    destination: str


@pytest.fixture
def to_export(
    proxied: LocalService, finished_job: str, staged_trainer: StagedTrainer, fake_gcs: FakeGcsServer
) -> Export:
    bucket = storage_client(fake_gcs.url).bucket(staged_trainer.bucket)
    source = source_objects(bucket, proxied, finished_job)
    return Export(finished_job, bucket, source, f"gs://{bucket.name}/models/{uuid.uuid4().hex[:8]}")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("when", WHEN)
@pytest.mark.parametrize("method", EXPORT_CALLS)
def test_export_through_a_fault(
    proxied: LocalService, to_export: Export, method: str, when: str, kind: int | str
) -> None:
    job_id, bucket, source, destination = to_export
    # The last object's copy and the manifest are the calls whose loss leaves the most behind.
    skip = len(source) - 1 if method == "storage.objects.rewrite" else 0
    before = aim(proxied, method, when, kind, skip=skip)
    result = export(proxied, job_id, destination)
    assert injected(proxied, before, method) == 1
    assert result["exported"] is True
    assert result["destination"] == f"{destination}/{job_id}"
    assert_exported_once(bucket, result, source)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("when", WHEN)
@pytest.mark.parametrize("method", ["storage.objects.get", "storage.objects.download"])
def test_export_rerun_through_a_fault_rewrites_nothing(
    proxied: LocalService, to_export: Export, method: str, when: str, kind: int | str
) -> None:
    job_id, bucket, source, destination = to_export
    first = assert_exported_once(bucket, export(proxied, job_id, destination), source)
    manifest_name = f"models/{destination.rsplit('/', 1)[1]}/{job_id}/manifest.json"
    generation = bucket.get_blob(manifest_name).generation

    before = aim(proxied, method, when, kind)
    again = export(proxied, job_id, destination)
    assert injected(proxied, before, method) == 1
    assert again["copied_bytes"] == 0
    assert assert_exported_once(bucket, again, source) == first
    assert bucket.get_blob(manifest_name).generation == generation


def test_the_proxy_streams_a_large_object_both_ways_unchanged(
    proxied: LocalService, bucket: Any, fake_gcs: FakeGcsServer
) -> None:
    """12 MiB in one request body each way: uploaded through the proxy, downloaded through it."""
    data = os.urandom(12 * 1024 * 1024)
    upload = f"{proxied.storage_url}/upload/storage/v1/b/{bucket.name}/o"
    answer = httpx.post(upload, params={"uploadType": "media", "name": "up.bin"}, content=data, timeout=120)
    assert answer.status_code == 200, answer.text
    assert bucket.blob("up.bin").download_as_bytes() == data  # read on fake-gcs-server itself

    bucket.blob("down.bin").upload_from_string(data[::-1])  # written on fake-gcs-server itself
    download = f"{proxied.storage_url}/download/storage/v1/b/{bucket.name}/o/down.bin"
    with httpx.stream("GET", download, params={"alt": "media"}, timeout=120) as response:
        assert response.status_code == 200
        received = b"".join(response.iter_raw())
    assert received == data[::-1]
    # And google-cloud-storage's own resumable upload and download, through the proxy.
    client = storage_client(proxied.storage_url)
    blob = client.bucket(bucket.name).blob("resumable.bin", chunk_size=8 * 1024 * 1024)
    blob.upload_from_string(data)
    assert client.bucket(bucket.name).blob("resumable.bin").download_as_bytes() == data
    assert bucket.blob("resumable.bin").download_as_bytes() == data


def test_without_fault_flags_clients_talk_to_fake_gcs_server_itself(
    local_service: LocalService, fake_gcs: FakeGcsServer
) -> None:
    assert local_service.storage_url == fake_gcs.url


def test_a_copy_whose_answer_was_lost_and_whose_retry_meets_412_is_recognised(
    proxied: LocalService, bucket: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Google answers the retry of a landed conditional copy with 412 (fake-gcs-server ignores the
    precondition on rewrites): the copy landed, its answer was lost, the retry is told 412."""
    import requests
    from google.auth.transport.requests import AuthorizedSession

    from airflow_aip.hooks.storage import StorageHook

    bucket.blob("src.bin").upload_from_string(os.urandom(1000))
    original: Any = AuthorizedSession.request
    attempts: list[str] = []

    def request(self: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if "/rewriteTo/" not in url:
            return original(self, method, url, *args, **kwargs)
        attempts.append(url)
        if len(attempts) == 1:
            original(self, method, url, *args, **kwargs)  # applied...
            raise requests.ConnectionError("connection reset by peer")  # ...and its answer lost
        assert "ifGenerationMatch=0" in url
        answer = requests.Response()
        answer.status_code, answer._content = 412, b'{"error": {"code": 412, "message": "Precondition"}}'
        answer.headers["Content-Type"] = "application/json"
        answer.request = requests.Request(method, url).prepare()
        return answer

    monkeypatch.setattr(AuthorizedSession, "request", request)
    src, dst = f"gs://{bucket.name}/src.bin", f"gs://{bucket.name}/dst.bin"
    landed = StorageHook("aip_no_such_conn").copy(src, dst, if_generation_match=0)
    assert len(attempts) == 2
    assert (landed.uri, landed.size) == (dst, 1000)
    assert bucket.blob("dst.bin").download_as_bytes() == bucket.blob("src.bin").download_as_bytes()

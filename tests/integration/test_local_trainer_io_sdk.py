"""A trainer's own Google I/O on the local service, as on Vertex AI: driven by Google's Vertex AI SDK.

Inside the job, Google's libraries do what a trainer does: ``google.auth.default()`` finds the
job's project, service account and a token at its metadata server; google-cloud-storage writes
with those credentials to the emulator; Google's Vertex AI SDK, with no endpoint of its own,
reaches the local service. A trainer that names Google's hosts itself (TensorFlow's ``gs://``,
curl) reaches the emulator through the job's proxy, and Google's other hosts not at all. And a
``/gcs/`` mount that fails fails the job instead of letting the trainer write to this machine's
disk.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_aip.local.egress.passthrough import TEST_UPSTREAM, TEST_UPSTREAM_CA
from airflow_aip.local.executor.gcs_mount import mount_unavailable
from airflow_aip.local.storage.gcs import FakeGcsServer
from tests.fixtures.google_standin import DEVELOPER_TOKEN, GoogleStandIn
from tests.fixtures.local_service import (
    LocalService,
    Restarts,
    StagedTrainer,
    log_entries,
    own_service,
    serving,
)
from tests.fixtures.tools import GCS_MOUNT, GCS_MOUNT_INSTALL, missing, need_module
from tests.fixtures.vertex import sdk_pools, vertex_sdk

pytestmark = pytest.mark.integration
aiplatform = need_module("google.cloud.aiplatform")

# The host runtime runs a package on the service's own Python, where Google's Vertex AI SDK is
# installed: a trainer there can call it (in the isolated runtime only an image that ships it could).
host_service = own_service("host_service", ["--runtime", "host"])


@pytest.fixture
def host_sdk(
    host_service: LocalService, staged_trainer: StagedTrainer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Any]:
    with vertex_sdk(
        host_service.url, f"io-{uuid.uuid4().hex[:8]}", staged_trainer.bucket, monkeypatch
    ) as client:
        yield client


def _run_probe(client: Any, trainer: StagedTrainer, **job: Any) -> tuple[Any, dict[str, Any]]:
    base = f"gs://{trainer.bucket}/io/{uuid.uuid4().hex[:8]}"
    custom = client.CustomJob(
        display_name="adc-probe",
        worker_pool_specs=sdk_pools(trainer, "adc_probe", [f"--job-dir={base}"]),
        base_output_dir=base,
        **job,
    )
    custom.run(sync=True)
    return custom, trainer.read_json(f"{base}/adc.json")


def test_a_trainers_adc_are_the_jobs_from_its_metadata_server(
    sdk: Any, staged_trainer: StagedTrainer
) -> None:
    job, report = _run_probe(sdk, staged_trainer)
    assert job.state.name == "JOB_STATE_SUCCEEDED"
    project = job.project  # the SDK's project, as the test's init() named it
    number = job.resource_name.split("/")[1]
    assert report["credentials"] == "google.auth.compute_engine.credentials.Credentials"
    assert report["project"] == project
    assert report["service_account"] == f"service-{number}@gcp-sa-aiplatform-cc.iam.gserviceaccount.com"
    assert report["token"].startswith("ya29.aip-local.")
    assert report["variables"]["GOOGLE_APPLICATION_CREDENTIALS"] is None


def test_a_jobs_service_account_is_the_trainers(sdk: Any, staged_trainer: StagedTrainer) -> None:
    account = "trainer@example-project.iam.gserviceaccount.com"
    _, report = _run_probe(sdk, staged_trainer, labels={"suite": "io"})
    assert report["service_account"] != account
    base = f"gs://{staged_trainer.bucket}/io/{uuid.uuid4().hex[:8]}"
    job = sdk.CustomJob(
        display_name="adc-probe-sa",
        worker_pool_specs=sdk_pools(staged_trainer, "adc_probe", [f"--job-dir={base}"]),
        base_output_dir=base,
    )
    job.run(sync=True, service_account=account)
    assert staged_trainer.read_json(f"{base}/adc.json")["service_account"] == account


def test_the_vertex_sdk_inside_a_trainer_reaches_the_local_service(
    host_sdk: Any, host_service: LocalService, staged_trainer: StagedTrainer
) -> None:
    job, report = _run_probe(host_sdk, staged_trainer)
    assert job.state.name == "JOB_STATE_SUCCEEDED"
    assert report["vertex_sdk"] == {
        "api_endpoint": host_service.url.rstrip("/"),
        "api_transport": "rest",
        "project": job.project,
        "location": "us-central1",
        "models": 0,
    }


def test_google_storage_and_vertex_by_name_reach_the_emulator_and_the_service_and_others_are_refused(
    sdk: Any, local_service: LocalService, staged_trainer: StagedTrainer
) -> None:
    base = f"gs://{staged_trainer.bucket}/egress/{uuid.uuid4().hex[:8]}"
    job = sdk.CustomJob(
        display_name="egress-probe",
        worker_pool_specs=sdk_pools(staged_trainer, "egress_probe", [f"--job-dir={base}"]),
        base_output_dir=base,
    )
    job.run(sync=True)
    report = staged_trainer.read_json(f"{base}/egress.json")
    # The upload by Google's name landed in the emulator, and both clients read it back there.
    assert report["upload"]["code"] == 0, report["upload"]
    assert json.loads(report["upload"]["out"])["bucket"] == staged_trainer.bucket
    assert staged_trainer.read_text(f"{base}/by-name.txt") == "by name"
    assert report["curl_read"] == {"code": 0, "out": "by name", "err": ""}
    assert report["urllib_read"] == {"status": 200, "body": "by name"}
    # Vertex AI by its name: the service itself (REST here; gRPC: test_local_trainer_grpc.py).
    assert report["urllib_vertex"]["status"] == 200
    assert json.loads(report["urllib_vertex"]["body"])["name"] == job.resource_name
    # Google's other hosts: refused at the proxy, with the reason in what the client shows.
    assert "CONNECT tunnel failed, response 403" in report["curl_oauth"]["err"]
    job_id = job.resource_name.rsplit("/", 1)[-1]
    warnings = [
        e["textPayload"]
        for e in log_entries(local_service.url, job.project, job_id)
        if e["severity"] == "WARNING" and "refused" in e["textPayload"]
    ]
    assert [w.split("refuses ")[1].split(":")[0] for w in warnings] == [
        "oauth2.googleapis.com",
        "bigquery.googleapis.com",
    ]
    # Another Google API's refusal names the flag that would pass it.
    assert "aip-local serve --pass-through-host bigquery.googleapis.com" in warnings[1]
    assert "CONNECT tunnel failed, response 403" in report["curl_bigquery"]["err"]


def test_a_passed_host_reaches_google_with_the_developers_credentials_and_the_log_names_each_call(
    fake_gcs: FakeGcsServer,
    staged_trainer: StagedTrainer,
    restarts: Restarts,
    google_standin: GoogleStandIn,
    developer_adc: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Google is out of reach here: the service sends the passed host to a stand-in (TEST_UPSTREAM),
    over TLS, as it would send it to Google."""
    monkeypatch.setenv(TEST_UPSTREAM, google_standin.url)
    monkeypatch.setenv(TEST_UPSTREAM_CA, str(google_standin.ca_file))
    flags = ["--runtime", "host", "--pass-through-host", "bigquery.googleapis.com"]
    service = restarts.start(tmp_path / "data", fake_gcs.url, extra_args=flags)
    base = f"gs://{staged_trainer.bucket}/pass/{uuid.uuid4().hex[:8]}"
    with vertex_sdk(service.url, f"pass-{uuid.uuid4().hex[:8]}", staged_trainer.bucket, monkeypatch) as sdk:
        job = sdk.CustomJob(
            display_name="pass-through",
            worker_pool_specs=sdk_pools(staged_trainer, "egress_probe", [f"--job-dir={base}"]),
            base_output_dir=base,
        )
        job.run(sync=True)
    report = staged_trainer.read_json(f"{base}/egress.json")
    assert report["curl_bigquery"]["code"] == 0, report["curl_bigquery"]
    number = job.resource_name.split("/")[1]
    datasets = f"/bigquery/v2/projects/{number}/datasets"
    assert json.loads(report["curl_bigquery"]["out"]) == {"ok": True, "path": datasets}
    [seen] = google_standin.seen
    assert seen.headers["authorization"] == f"Bearer {DEVELOPER_TOKEN}"  # never the job's ya29.aip-local.
    assert seen.headers["host"] == "bigquery.googleapis.com"
    lines = [
        e["textPayload"] for e in log_entries(service.url, job.project, job.resource_name.rsplit("/", 1)[-1])
    ]
    passed = [line for line in lines if line.startswith("Passed to Google")]
    assert passed == [
        "Passed to Google with the developer's credentials (not the job's service account): "
        f"GET bigquery.googleapis.com{datasets}"
    ]


def test_a_failed_gcs_mount_fails_the_job_and_the_trainer_never_runs(
    fake_gcs: FakeGcsServer,
    staged_trainer: StagedTrainer,
    tmp_path_factory: pytest.TempPathFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if reason := mount_unavailable():
        missing(GCS_MOUNT, GCS_MOUNT_INSTALL, reason)
    # An rclone that cannot mount, first on the service's PATH (where it finds the one replicas mount with).
    tools = tmp_path / "bin"
    tools.mkdir()
    rclone = tools / "rclone"
    rclone.write_text(
        '#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = --log-file ] && log=$2; shift; done\n'
        'echo "CRITICAL: Fatal error: failed to mount FUSE fs: on purpose" >> "$log"; exit 1\n'
    )
    rclone.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    prefix = f"unmounted/{uuid.uuid4().hex[:8]}"
    local_copy = Path("/gcs") / staged_trainer.bucket / prefix
    args = [f"--write=/gcs/{staged_trainer.bucket}/{prefix}/report.json"]
    with (
        serving(fake_gcs, tmp_path_factory, "aip-no-mount", []) as service,
        vertex_sdk(service.url, "io-mount", staged_trainer.bucket, monkeypatch) as client,
    ):
        job = client.CustomJob(
            display_name="unmounted", worker_pool_specs=sdk_pools(staged_trainer, "runtime_probe", args)
        )
        with pytest.raises(RuntimeError, match="Cloud Storage could not be mounted at /gcs/"):
            job.run(sync=True)
        assert job.state.name == "JOB_STATE_FAILED"
        assert "failed to mount FUSE fs: on purpose" in job.error.message
    assert not local_copy.exists()  # the trainer never ran: nothing landed on this machine's disk

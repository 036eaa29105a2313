"""Staging against fake-gcs-server: content-addressed, idempotent, safe under concurrency.

The only interference is at the HTTP boundary (``AuthorizedSession.request``): counting requests,
holding two uploads at a barrier so they truly race, flipping bytes on the wire, and one rewrite
response the emulator never sends (a partial rewrite with a continuation token).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests
from google.auth.transport.requests import AuthorizedSession

from airflow_aip.exceptions import PreconditionFailedError, StagingError, ValidationError
from airflow_aip.hooks.storage import StorageHook
from airflow_aip.operators.staging import StagePackagesOperator
from airflow_aip.packaging import build_sdist, sha256_file

pytestmark = pytest.mark.integration

Intercept = Callable[[Any, str, str, Any, dict[str, Any]], Any]


@pytest.fixture
def http(monkeypatch: pytest.MonkeyPatch) -> Callable[[Intercept | None], list[tuple[str, str]]]:
    """Record every storage request; optionally pass it through an interceptor first."""
    original: Callable[..., Any] = AuthorizedSession.request
    seen: list[tuple[str, str]] = []

    def install(intercept: Intercept | None = None) -> list[tuple[str, str]]:
        def request(self: Any, method: str, url: str, data: Any = None, **kwargs: Any) -> Any:
            seen.append((method, url))
            if intercept is not None:
                return intercept(
                    lambda d=data: original(self, method, url, data=d, **kwargs), method, url, data, kwargs
                )
            return original(self, method, url, data=data, **kwargs)

        monkeypatch.setattr(AuthorizedSession, "request", request)
        return seen

    return install


def json_response(method: str, url: str, status: int, body: dict[str, Any]) -> requests.Response:
    """An HTTP answer as GCS would send it, for the branches the emulator cannot produce."""
    response = requests.Response()
    response.status_code = status
    response._content = json.dumps(body).encode()
    response.headers["Content-Type"] = "application/json"
    response.request = requests.Request(method, url).prepare()
    return response


def make_trainer(root: Path) -> Path:
    package = root / "app" / "trainer"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "task.py").write_text("print('train')\n")
    return package


def payload(path: Path, size: int) -> Path:
    """A file of distinctive bytes ('payload-' repeated) that a test can find and flip on the wire."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes((b"payload-" * (size // 8 + 1))[:size])
    return path


def objects(bucket: Any) -> dict[str, bytes]:
    return {blob.name: blob.download_as_bytes() for blob in bucket.client.list_blobs(bucket.name)}


def logs(capfd: pytest.CaptureFixture[str]) -> str:
    """Airflow 3 task loggers are structlog printers, so log lines arrive on stdout/stderr."""
    out, err = capfd.readouterr()
    return out + err


def stage(packages: Any, staging_uri: str) -> list[str]:
    operator = StagePackagesOperator(task_id="stage", packages=packages, staging_uri=staging_uri)
    return operator.execute({})


# -- first upload, then a free re-run -----------------------------------------------------------


def test_first_upload_then_skip_on_rerun(
    bucket: Any, tmp_path: Path, http: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    built = build_sdist(make_trainer(tmp_path), tmp_path / "dist")
    dep = payload(tmp_path / "deps" / "dep1-0.1.tar.gz", 2000)
    staging = f"gs://{bucket.name}/staging"
    expected = [
        f"{staging}/{built.sha256}/trainer-0.0.0.tar.gz",
        f"{staging}/{sha256_file(dep)}/dep1-0.1.tar.gz",
    ]
    assert stage([built.to_dict(), str(dep)], staging) == expected
    assert objects(bucket) == {
        uri.removeprefix(f"gs://{bucket.name}/"): path.read_bytes()
        for uri, path in zip(expected, [built.path, dep], strict=True)
    }
    assert f"uploaded 2, skipped 0 (already there), {built.size + 2000} bytes uploaded" in logs(capfd)

    requests_seen = http()
    assert stage([built.to_dict(), str(dep)], staging) == expected
    # One metadata GET per file and nothing else: zero bytes uploaded.
    assert [method for method, _ in requests_seen] == ["GET", "GET"]
    assert "uploaded 0, skipped 2 (already there), 0 bytes uploaded" in logs(capfd)


def test_hook_reports_upload_and_skip(bucket: Any, tmp_path: Path) -> None:
    file = payload(tmp_path / "x.whl", 100)
    hook = StorageHook()
    first = hook.stage_file(file, f"gs://{bucket.name}/a/x.whl")
    again = hook.stage_file(file, f"gs://{bucket.name}/a/x.whl")
    assert (first.uploaded, first.bytes) == (True, 100)
    assert (again.uploaded, again.bytes) == (False, 0)
    assert type(hook.client._credentials).__name__ == "AnonymousCredentials"


def test_large_upload_logs_progress_in_bytes_and_percent(
    bucket: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    big = payload(tmp_path / "big-1.0-py3-none-any.whl", 9 * 1024 * 1024)  # resumable: > 8 MiB
    staged = StorageHook().stage_file(big, f"gs://{bucket.name}/big.whl")
    assert staged.bytes == big.stat().st_size
    text = logs(capfd)
    assert f"{big.stat().st_size} / {big.stat().st_size} bytes (100%)" in text
    assert f"8388608 / {big.stat().st_size} bytes (88%)" in text
    assert bucket.blob("big.whl").download_as_bytes() == big.read_bytes()


# -- concurrency --------------------------------------------------------------------------------


def race(http: Any, *jobs: Callable[[], Any]) -> list[Any]:
    """Run jobs in threads whose uploads are held until all are in flight (past their exists-check)."""
    barrier = threading.Barrier(len(jobs), timeout=30)

    def hold_uploads(send: Callable[[], Any], method: str, url: str, data: Any, kwargs: Any) -> Any:
        if "/upload/" in url and method == "POST":
            barrier.wait()
        return send()

    http(hold_uploads)
    results: list[Any] = [None] * len(jobs)

    def run(index: int) -> None:
        try:
            results[index] = jobs[index]()
        except Exception as err:  # handed back to the test
            results[index] = err

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


def test_two_concurrent_stagers_of_one_package(bucket: Any, tmp_path: Path, http: Any) -> None:
    built = build_sdist(make_trainer(tmp_path), tmp_path / "dist")
    staging = f"gs://{bucket.name}/staging"
    results = race(
        http,
        lambda: StorageHook().stage_file(built.path, f"{staging}/{built.sha256}/{built.path.name}"),
        lambda: StorageHook().stage_file(built.path, f"{staging}/{built.sha256}/{built.path.name}"),
    )
    assert sorted(r.uploaded for r in results) == [False, True], results
    assert objects(bucket) == {f"staging/{built.sha256}/{built.path.name}": built.path.read_bytes()}


def test_concurrent_stagers_of_different_bytes_never_overwrite(
    bucket: Any, tmp_path: Path, http: Any
) -> None:
    ours, theirs = payload(tmp_path / "a" / "p.whl", 300), payload(tmp_path / "b" / "p.whl", 301)
    uri = f"gs://{bucket.name}/p.whl"
    results = race(
        http, lambda: StorageHook().stage_file(ours, uri), lambda: StorageHook().stage_file(theirs, uri)
    )
    winners = [r for r in results if not isinstance(r, Exception)]
    losers = [r for r in results if isinstance(r, StagingError)]
    assert len(winners) == 1, results
    assert len(losers) == 1, results
    assert "already exists with different content" in str(losers[0])
    landed = bucket.blob("p.whl").download_as_bytes()
    assert landed in (ours.read_bytes(), theirs.read_bytes())


def test_existing_object_with_other_content_is_not_overwritten(bucket: Any, tmp_path: Path) -> None:
    file = payload(tmp_path / "p.whl", 50)
    bucket.blob("p.whl").upload_from_string(b"someone else's bytes")
    with pytest.raises(StagingError, match="different content"):
        StorageHook().stage_file(file, f"gs://{bucket.name}/p.whl")
    assert bucket.blob("p.whl").download_as_bytes() == b"someone else's bytes"


# -- corruption on the wire ---------------------------------------------------------------------


@pytest.mark.parametrize("size", [4096, 9 * 1024 * 1024], ids=["multipart", "resumable"])
def test_checksum_mismatch_is_detected_and_removed(bucket: Any, tmp_path: Path, http: Any, size: int) -> None:
    file = payload(tmp_path / "dep.tar.gz", size)

    def flip_a_byte(send: Callable[[Any], Any], method: str, url: str, data: Any, kwargs: Any) -> Any:
        if "/upload/" in url and isinstance(data, bytes) and b"payload-" in data:
            data = data.replace(b"payload-", b"PAYLOAD-", 1)
        return send(data)

    http(flip_a_byte)
    with pytest.raises(StagingError, match=r"what landed is not what was sent.*deleted"):
        StorageHook().stage_file(file, f"gs://{bucket.name}/s/dep.tar.gz")
    assert objects(bucket) == {}


def test_declared_checksums_travel_with_the_upload(bucket: Any, tmp_path: Path, http: Any) -> None:
    """Real GCS verifies declared md5/crc32c server-side; the emulator ignores them, so check the wire."""
    from airflow_aip.hooks.storage import file_checksums

    file = payload(tmp_path / "dep.tar.gz", 1000)
    bodies: list[bytes] = []

    def keep(send: Callable[[], Any], method: str, url: str, data: Any, kwargs: Any) -> Any:
        if "/upload/" in url and isinstance(data, bytes):
            bodies.append(data)
        return send()

    http(keep)
    StorageHook().stage_file(file, f"gs://{bucket.name}/dep.tar.gz")
    sums = file_checksums(file)
    assert len(bodies) == 1
    assert f'"md5Hash": "{sums.md5_hash}"'.encode() in bodies[0]
    assert f'"crc32c": "{sums.crc32c}"'.encode() in bodies[0]


def test_upload_rejected_by_gcs_is_a_staging_error(bucket: Any, tmp_path: Path, http: Any) -> None:
    """GCS answers 400 when the bytes do not match the declared checksums; the emulator never does."""
    file = payload(tmp_path / "dep.tar.gz", 1000)

    def reject(send: Callable[[], Any], method: str, url: str, data: Any, kwargs: Any) -> Any:
        if "/upload/" in url:
            return json_response(
                method, url, 400, {"error": {"code": 400, "message": "Provided MD5 hash does not match"}}
            )
        return send()

    http(reject)
    with pytest.raises(StagingError, match=r"HTTP 400: .*Provided MD5 hash does not match"):
        StorageHook().stage_file(file, f"gs://{bucket.name}/dep.tar.gz")
    assert objects(bucket) == {}


# -- several packages, bad input ----------------------------------------------------------------


def test_extra_whl_and_tar_gz_packages_in_input_order(bucket: Any, tmp_path: Path) -> None:
    built = build_sdist(make_trainer(tmp_path), tmp_path / "dist")
    whl = payload(tmp_path / "deps" / "dep2-1.0-py3-none-any.whl", 700)
    sdist = payload(tmp_path / "deps" / "dep1-0.1.tar.gz", 500)
    already = "gs://elsewhere-bucket/deps/dep3-2.0.tar.gz"
    uris = stage([str(whl), built.to_dict(), already, str(sdist)], f"gs://{bucket.name}/s/")
    assert uris == [
        f"gs://{bucket.name}/s/{sha256_file(whl)}/{whl.name}",
        f"gs://{bucket.name}/s/{built.sha256}/{built.path.name}",
        already,
        f"gs://{bucket.name}/s/{sha256_file(sdist)}/{sdist.name}",
    ]
    assert sorted(objects(bucket).values()) == sorted(p.read_bytes() for p in (whl, built.path, sdist))


@pytest.mark.parametrize(
    ("staging_uri", "extra", "field"),
    [
        ("s3://bucket/staging", None, "staging_uri"),
        ("gs://Not_A_Valid_Bucket/x", None, "staging_uri"),
        ("gs://{bucket}/../x", None, "staging_uri"),
        ("gs://{bucket}/s", "missing.whl", "packages[1]"),
        ("gs://{bucket}/s", "same-name", "packages[1]"),
    ],
)
def test_bad_input_raises_before_anything_is_created(
    bucket: Any, tmp_path: Path, http: Any, staging_uri: str, extra: str | None, field: str
) -> None:
    good = payload(tmp_path / "dep1-0.1.tar.gz", 100)
    packages = [str(good)]
    if extra == "missing.whl":
        packages.append(str(tmp_path / "missing.whl"))
    elif extra == "same-name":
        packages.append(str(payload(tmp_path / "other" / "dep1-0.1.tar.gz", 50)))
    seen = http()
    with pytest.raises(ValidationError) as err:
        stage(packages, staging_uri.format(bucket=bucket.name))
    assert err.value.field == field
    assert seen == [], "no request may reach Cloud Storage for bad input"
    assert objects(bucket) == {}


def test_more_than_100_packages_is_refused_before_upload(bucket: Any, tmp_path: Path, http: Any) -> None:
    packages = [str(payload(tmp_path / f"dep{i}-1.0.tar.gz", 10 + i)) for i in range(101)]
    seen = http()
    with pytest.raises(ValidationError, match="at most 100"):
        stage(packages, f"gs://{bucket.name}/s")
    assert seen == []


# -- generic helpers for the export operator ----------------------------------------------------


def test_generic_helpers(bucket: Any) -> None:
    hook = StorageHook()
    base = f"gs://{bucket.name}/models"
    assert hook.get_metadata(f"{base}/a.txt") is None
    assert not hook.exists(f"{base}/a.txt")
    created = hook.write_bytes(f"{base}/a.txt", b"alpha", if_generation_match=0)
    assert (created.size, created.uri) == (5, f"{base}/a.txt")
    with pytest.raises(PreconditionFailedError):
        hook.write_bytes(f"{base}/a.txt", b"beta", if_generation_match=0)
    replaced = hook.write_bytes(f"{base}/a.txt", b"gamma", if_generation_match=created.generation)
    assert hook.read_bytes(f"{base}/a.txt") == b"gamma"
    assert hook.get_metadata(f"{base}/a.txt") == replaced
    copied = hook.copy(f"{base}/a.txt", f"{base}/v1/a.txt")
    assert copied.crc32c == replaced.crc32c
    assert [o.uri for o in hook.list(f"{base}/")] == [f"{base}/a.txt", f"{base}/v1/a.txt"]
    assert [o.uri for o in hook.list(f"{base}/v1")] == [f"{base}/v1/a.txt"]
    assert hook.delete(f"{base}/a.txt") is True
    assert hook.delete(f"{base}/a.txt") is False
    with pytest.raises(FileNotFoundError):
        hook.read_bytes(f"{base}/a.txt")
    with pytest.raises(FileNotFoundError):
        hook.copy(f"{base}/a.txt", f"{base}/v2/a.txt")
    with pytest.raises(ValidationError):
        hook.read_bytes(f"gs://{bucket.name}")


def test_copy_follows_rewrite_tokens(bucket: Any, http: Any) -> None:
    """GCS may answer a large rewrite in several calls; the emulator never does, so one is faked."""
    hook = StorageHook()
    src = hook.write_bytes(f"gs://{bucket.name}/src.bin", b"x" * 1000)

    def partial_first(send: Callable[[], Any], method: str, url: str, data: Any, kwargs: Any) -> Any:
        if "/rewriteTo/" in url and "rewriteToken=" not in url:
            partial = {
                "totalBytesRewritten": "500",
                "objectSize": "1000",
                "done": False,
                "rewriteToken": "tok-1",
            }
            return json_response(method, url, 200, {"kind": "storage#rewriteResponse", **partial})
        return send()

    seen = http(partial_first)
    copied = hook.copy(src.uri, f"gs://{bucket.name}/dst.bin")
    rewrites = [url for _, url in seen if "/rewriteTo/" in url]
    assert len(rewrites) == 2
    assert "rewriteToken=tok-1" in rewrites[1]
    assert copied.md5_hash == src.md5_hash
    assert bucket.blob("dst.bin").download_as_bytes() == b"x" * 1000


# -- in a DAG ----------------------------------------------------------------------------------

DAG_FILE = """\
from datetime import datetime

from airflow.sdk import DAG

from airflow_aip.operators.package import BuildTrainerPackageOperator
from airflow_aip.operators.staging import StagePackagesOperator

with DAG("aip_build_and_stage_test", schedule=None, start_date=datetime(2024, 1, 1)) as dag:
    build = BuildTrainerPackageOperator(task_id="build", package_path={package!r}, output_dir={dist!r})
    StagePackagesOperator(task_id="stage", packages=[build.output, {dep!r}], staging_uri={staging!r})
"""


def test_build_then_stage_in_a_dag(bucket: Any, tmp_path: Path, load_test_dag: Any) -> None:
    """The built package's dict travels by XCom into the staging task's templated ``packages``."""
    dep = payload(tmp_path / "deps" / "dep2-1.0-py3-none-any.whl", 300)
    source = DAG_FILE.format(
        package=str(make_trainer(tmp_path)),
        dist=str(tmp_path / "dist"),
        dep=str(dep),
        staging=f"gs://{bucket.name}/staging",
    )
    run = load_test_dag("aip_build_and_stage_test", source).test()
    assert str(run.state) == "success"
    built = next((tmp_path / "dist").glob("*.tar.gz"))
    assert objects(bucket) == {
        f"staging/{sha256_file(built)}/trainer-0.0.0.tar.gz": built.read_bytes(),
        f"staging/{sha256_file(dep)}/{dep.name}": dep.read_bytes(),
    }


# -- build and stage on machines that share no disk ---------------------------------------------


def test_stage_on_another_machine_rebuilds_and_stages_the_build_tasks_bytes(
    bucket: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The build task's file is gone (another worker built it): the same bytes are staged."""
    built = build_sdist(make_trainer(tmp_path), tmp_path / "builder-tmp")
    original = built.path.read_bytes()
    built.path.unlink()
    staging = f"gs://{bucket.name}/staging"
    assert stage([built.to_dict()], staging) == [f"{staging}/{built.sha256}/trainer-0.0.0.tar.gz"]
    assert objects(bucket) == {f"staging/{built.sha256}/trainer-0.0.0.tar.gz": original}
    assert f"rebuilt trainer-0.0.0.tar.gz from its source, same sha256 {built.sha256}" in logs(capfd)


def test_stage_on_another_machine_refuses_a_changed_source(bucket: Any, tmp_path: Path) -> None:
    built = build_sdist(make_trainer(tmp_path), tmp_path / "builder-tmp")
    built.path.unlink()
    (built.source / "task.py").write_text("print('edited after the build')\n")
    with pytest.raises(ValidationError, match=r"packages\[0\].*not the build task's"):
        stage([built.to_dict()], f"gs://{bucket.name}/staging")
    assert objects(bucket) == {}


def test_build_stages_in_the_same_task_with_staging_uri(bucket: Any, tmp_path: Path) -> None:
    from airflow_aip.operators.package import BuildTrainerPackageOperator

    staging = f"gs://{bucket.name}/staging"
    build = BuildTrainerPackageOperator(
        task_id="build", package_path=str(make_trainer(tmp_path)), staging_uri=staging
    )
    result = build.execute({})
    assert result["uri"] == f"{staging}/{result['sha256']}/trainer-0.0.0.tar.gz"
    assert objects(bucket) == {
        result["uri"].removeprefix(f"gs://{bucket.name}/"): Path(result["path"]).read_bytes()
    }
    Path(result["path"]).unlink()  # the next task, elsewhere, takes the staged URI as it is
    assert stage([result], f"gs://{bucket.name}/other") == [result["uri"]]


def test_build_with_a_bad_staging_uri_builds_nothing(tmp_path: Path) -> None:
    from airflow_aip.operators.package import BuildTrainerPackageOperator

    build = BuildTrainerPackageOperator(
        task_id="build",
        package_path=str(make_trainer(tmp_path)),
        output_dir=str(tmp_path / "out"),
        staging_uri="s3://bucket/staging",
    )
    with pytest.raises(ValidationError) as err:
        build.execute({})
    assert err.value.field == "staging_uri"
    assert not (tmp_path / "out").exists()

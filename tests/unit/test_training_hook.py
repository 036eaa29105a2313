"""TrainingJobHook against fakes at the HTTP boundary: endpoints, credentials, retries, typed errors."""

from __future__ import annotations

import asyncio
import json
import socket
from contextlib import nullcontext
from typing import Any

import httpx
import pytest
from google.auth.credentials import Credentials

from airflow_aip.exceptions import ApiError, JobAlreadyExistsError, JobNotFoundError, ValidationError
from airflow_aip.hooks.http_shared import clear_shared_auth
from airflow_aip.hooks.training import (
    ENDPOINT_ENV,
    TrainingJobHook,
    error_message,
    is_loopback,
    is_transient,
)
from tests.unit.ml_fake import FakeMlApi, Scripted, sync_client

LOCAL = "http://127.0.0.1:8089/"
TRAINING_INPUT = {
    "packageUris": ["gs://bucket/trainer.tar.gz"],
    "pythonModule": "trainer.task",
    "region": "us-central1",
}


def error(status: int, message: str) -> tuple[int, Any]:
    return status, {"error": {"code": status, "message": message}}


def ok(payload: dict[str, Any]) -> tuple[int, Any]:
    return 200, payload


def make_hook(api: Any, **kwargs: Any) -> TrainingJobHook:
    """A hook whose sync client is served by ``api`` (a FakeMlApi, a Scripted, a FlakyApi)."""
    hook = TrainingJobHook(
        "aip_missing_conn", project_id="proj", api_endpoint=LOCAL, retry_max_wait=0.001, **kwargs
    )
    client = sync_client(api)
    hook._sync_client = lambda: client  # type: ignore[method-assign]
    return hook


@pytest.fixture
def api() -> FakeMlApi:
    return FakeMlApi()


@pytest.fixture(autouse=True)
def _fresh_shared_auth() -> Any:
    clear_shared_auth()
    yield
    clear_shared_auth()


# -- endpoint and credentials ----------------------------------------------------------------


def test_endpoint_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENDPOINT_ENV, "http://127.0.0.1:1111")
    monkeypatch.setenv(
        "AIRFLOW_CONN_AIP_EXTRA",
        json.dumps(
            {"conn_type": "google_cloud_platform", "extra": {"api_endpoint": "http://127.0.0.1:2222/"}}
        ),
    )
    assert TrainingJobHook("aip_missing_conn").endpoint == "http://127.0.0.1:1111/"
    assert TrainingJobHook("aip_extra").endpoint == "http://127.0.0.1:2222/"
    assert (
        TrainingJobHook("aip_extra", api_endpoint="http://localhost:3333/").endpoint
        == "http://localhost:3333/"
    )
    monkeypatch.delenv(ENDPOINT_ENV)
    assert TrainingJobHook("aip_missing_conn").endpoint is None
    hook = TrainingJobHook("aip_missing_conn")
    hook.__dict__["credentials_and_project"] = (FakeCredentials(), None)
    assert hook.root_url == "https://ml.googleapis.com/"


def test_google_endpoint_follows_the_credentials_universe() -> None:
    hook = TrainingJobHook("aip_missing_conn")
    hook.__dict__["credentials_and_project"] = (FakeCredentials(universe="example-universe.goog"), None)
    assert hook.root_url == "https://ml.example-universe.goog/"


def test_bad_endpoint_is_a_validation_error() -> None:
    with pytest.raises(ValidationError) as err:
        _ = TrainingJobHook("aip_missing_conn", api_endpoint="127.0.0.1:8080").endpoint
    assert err.value.field == "api_endpoint"


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://127.0.0.1:8080/", True),
        ("http://127.3.4.5/", True),
        ("http://localhost:1/", True),
        ("http://[::1]:9/", True),
        ("https://ml.googleapis.com/", False),
        ("https://us-central1-ml.googleapis.com/", False),
        ("http://10.0.0.1/", False),
    ],
)
def test_is_loopback(url: str, local: bool) -> None:
    assert is_loopback(url) is local


@pytest.mark.parametrize(
    ("url", "anonymous"),
    [
        ("http://127.0.0.1:8080/", True),
        ("http://aip-local:8765/", True),  # a compose service: plain http is never Google
        ("https://ml.googleapis.com/", False),
        ("https://10.0.0.1/", False),
    ],
)
def test_emulators_are_loopback_or_plain_http(url: str, anonymous: bool) -> None:
    assert TrainingJobHook("aip_missing_conn", api_endpoint=url).is_local is anonymous


def test_local_endpoint_uses_anonymous_credentials_and_needs_a_project() -> None:
    from google.auth.credentials import AnonymousCredentials

    hook = TrainingJobHook("aip_missing_conn", api_endpoint=LOCAL)
    assert hook.is_local
    creds, project = hook.credentials_and_project
    assert isinstance(creds, AnonymousCredentials)
    assert project is None
    with pytest.raises(ValidationError) as err:
        _ = hook.project_id
    assert err.value.field == "project_id"


def test_project_from_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_AIP_PROJ",
        json.dumps(
            {"conn_type": "google_cloud_platform", "extra": {"project": "conn-proj", "api_endpoint": LOCAL}}
        ),
    )
    assert TrainingJobHook("aip_proj").project_id == "conn-proj"
    assert TrainingJobHook("aip_proj", project_id="arg-proj").project_id == "arg-proj"


# -- sync: requests, retries, typed errors ---------------------------------------------------


def test_get_goes_to_the_endpoint_root() -> None:
    http = Scripted([ok({"jobId": "j1", "state": "RUNNING"})])
    assert make_hook(http).get_job("j1")["state"] == "RUNNING"
    assert http.request_sequence[0][0].startswith(LOCAL + "v1/projects/proj/jobs/j1")


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_transient_statuses_are_retried(status: int) -> None:
    http = Scripted([error(status, "try later"), ok({"jobId": "j1", "state": "QUEUED"})])
    assert make_hook(http).get_job("j1")["state"] == "QUEUED"
    assert len(http.request_sequence) == 2


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, ApiError),
        (401, ApiError),
        (403, ApiError),
        (404, JobNotFoundError),
        (409, JobAlreadyExistsError),
    ],
)
def test_other_4xx_fail_at_once_with_the_api_message(status: int, kind: type[ApiError]) -> None:
    http = Scripted([error(status, f"the API says {status}"), ok({})])
    with pytest.raises(kind) as err:
        make_hook(http).get_job("j1")
    assert type(err.value) is kind
    assert err.value.status == status
    assert err.value.message == f"the API says {status}"
    assert err.value.method == "jobs.get"
    assert len(http.request_sequence) == 1


def test_retries_are_bounded() -> None:
    http = Scripted([error(503, "down")] * 3 + [ok({"jobId": "j1"})])
    with pytest.raises(ApiError) as err:
        make_hook(http, retry_attempts=3).get_job("j1")
    assert err.value.status == 503
    assert len(http.request_sequence) == 3


class FlakyApi:
    """Refuses the first connections, then serves ``api``."""

    def __init__(self, api: FakeMlApi, failures: int) -> None:
        self.inner = api
        self.failures = failures

    def handle(self, method: str, url: str, body: Any) -> tuple[int, Any]:
        if self.failures:
            self.failures -= 1
            raise httpx.ConnectError("refused")
        return self.inner.handle(method, url, body)


def test_connection_errors_are_retried(api: FakeMlApi) -> None:
    api.add_job("proj", "j1", "RUNNING")
    http = FlakyApi(api, failures=2)
    assert make_hook(http).get_job("j1")["state"] == "RUNNING"
    assert http.failures == 0


def test_create_validates_before_sending(api: FakeMlApi) -> None:
    hook = make_hook(api)
    with pytest.raises(ValidationError) as err:
        hook.create_job({"jobId": "j1", "trainingInput": {**TRAINING_INPUT, "scaleTier": "HUGE"}})
    assert err.value.field == "trainingInput.scaleTier"
    assert api.requests == []


def test_create_then_conflict(api: FakeMlApi) -> None:
    hook = make_hook(api)
    created = hook.create_job({"jobId": "j1", "trainingInput": TRAINING_INPUT, "labels": {"a": "b"}})
    assert created["state"] == "QUEUED"
    assert api.calls("POST", "/v1/projects/proj/jobs")[0][2]["labels"] == {"a": "b"}
    with pytest.raises(JobAlreadyExistsError):
        hook.create_job({"jobId": "j1", "trainingInput": TRAINING_INPUT})


def test_cancel(api: FakeMlApi) -> None:
    api.add_job("proj", "running", "RUNNING")
    api.add_job("proj", "done", "SUCCEEDED")
    hook = make_hook(api)
    assert hook.cancel_job("running") is True
    assert api.jobs[("proj", "running")]["state"] == "CANCELLING"
    assert hook.cancel_job("done") is False
    with pytest.raises(JobNotFoundError):
        hook.cancel_job("missing")


def test_cancel_400_on_a_live_job_is_raised(api: FakeMlApi) -> None:
    api.add_job("proj", "j1", "RUNNING")
    api.errors.append((400, "bad request"))
    with pytest.raises(ApiError, match="bad request"):
        make_hook(api).cancel_job("j1")


def test_list_follows_pages(api: FakeMlApi) -> None:
    for i in range(5):
        api.add_job("proj", f"j{i}", "SUCCEEDED")
    api.add_job("other", "x", "SUCCEEDED")
    jobs = make_hook(api).list_jobs(page_size=2)
    assert [j["jobId"] for j in jobs] == ["j0", "j1", "j2", "j3", "j4"]
    assert len(api.calls("GET", "/jobs")) == 3


def test_error_message_parsing() -> None:
    assert error_message(b'{"error": {"message": "nope"}}', "fb") == "nope"
    assert error_message(b"<html>bad gateway</html>", "fb") == "<html>bad gateway</html>"
    assert error_message(b"", "fb") == "fb"


def test_is_transient() -> None:
    assert is_transient(ApiError(503, "x"))
    assert is_transient(ApiError(429, "x"))
    assert not is_transient(ApiError(400, "x"))
    assert not is_transient(ApiError(501, "x"))  # UNIMPLEMENTED: no second try serves it
    assert not is_transient(JobNotFoundError(404, "x"))
    assert is_transient(ConnectionResetError())
    assert is_transient(TimeoutError())
    assert is_transient(httpx.ConnectError("refused"))
    assert is_transient(httpx.ReadTimeout("slow"))
    assert not is_transient(ValueError("bug"))
    # An OSError that is not the network (a missing key file, a bad path) is not an outage.
    assert not is_transient(FileNotFoundError(2, "No such file", "/keys/sa.json"))
    assert not is_transient(PermissionError(13, "Permission denied"))
    assert is_transient(ConnectionAbortedError())
    assert is_transient(socket.gaierror(-2, "Name or service not known"))  # DNS, mid-outage


# -- async path ------------------------------------------------------------------------------


class FakeCredentials(Credentials):
    """google-auth credentials with no token until refreshed; counts refreshes (no token server)."""

    def __init__(self, universe: str = "googleapis.com") -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self._universe_domain = universe
        self.refreshes = 0

    def refresh(self, request: Any) -> None:
        self.refreshes += 1
        self.token = f"token-{self.refreshes}"


def async_hook(api: FakeMlApi, endpoint: str = LOCAL, **kwargs: Any) -> TrainingJobHook:
    hook = TrainingJobHook(
        "aip_missing_conn", project_id="proj", api_endpoint=endpoint, retry_max_wait=0.001, **kwargs
    )
    client = httpx.AsyncClient(transport=api.httpx_transport())
    hook._client_slot = lambda: nullcontext(client)  # type: ignore[method-assign]
    return hook


async def test_aget_job_retries_and_types_errors(api: FakeMlApi) -> None:
    api.add_job("proj", "j1", "PREPARING")
    api.errors.extend([(500, "oops"), (429, "slow down")])
    hook = async_hook(api)
    assert (await hook.aget_job("j1"))["state"] == "PREPARING"
    assert len(api.requests) == 3
    with pytest.raises(JobNotFoundError, match="not found"):
        await hook.aget_job("missing")
    api.errors.append((403, "Permission denied on project"))
    with pytest.raises(ApiError, match="Permission denied") as err:
        await hook.aget_job("j1")
    assert err.value.status == 403


async def test_async_bearer_token_refreshed_off_loop(api: FakeMlApi) -> None:
    api.add_job("proj", "j1", "RUNNING")
    seen: list[str | None] = []
    transport = api.httpx_transport()

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        response = transport.handler(request)  # FakeMlApi's handler is synchronous
        assert isinstance(response, httpx.Response)
        return response

    hook = TrainingJobHook("aip_missing_conn", project_id="proj", api_endpoint="https://ml.example.com/")
    creds = FakeCredentials()
    hook.__dict__["credentials_and_project"] = (creds, "proj")
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    hook._client_slot = lambda: nullcontext(client)  # type: ignore[method-assign]
    await hook.aget_job("j1")
    await hook.aget_job("j1")
    assert seen == ["Bearer token-1", "Bearer token-1"]
    assert creds.refreshes == 1


async def test_acancel(api: FakeMlApi) -> None:
    api.add_job("proj", "live", "RUNNING")
    api.add_job("proj", "ended", "FAILED")
    hook = async_hook(api)
    assert await hook.acancel_job("live") is True
    assert await hook.acancel_job("ended") is False
    assert api.cancels == ["live", "ended"]


async def test_async_connection_read_without_blocking(
    monkeypatch: pytest.MonkeyPatch, api: FakeMlApi
) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_AIP_ASYNC",
        json.dumps({"conn_type": "google_cloud_platform", "extra": {"project": "cp", "api_endpoint": LOCAL}}),
    )
    api.add_job("cp", "j1", "RUNNING")
    hook = TrainingJobHook("aip_async", retry_max_wait=0.001)
    client = httpx.AsyncClient(transport=api.httpx_transport())
    hook._client_slot = lambda: nullcontext(client)  # type: ignore[method-assign]
    assert (await hook.aget_job("j1"))["jobId"] == "j1"
    assert hook.settings.project_id == "cp"


async def test_triggers_of_one_connection_share_one_load(
    monkeypatch: pytest.MonkeyPatch, api: FakeMlApi
) -> None:
    from airflow.sdk import BaseHook

    reads: list[str] = []
    real = BaseHook.aget_connection.__func__  # type: ignore[attr-defined]

    async def counting(cls: Any, conn_id: str) -> Any:
        reads.append(conn_id)
        return await real(cls, conn_id)

    monkeypatch.setattr(BaseHook, "aget_connection", classmethod(counting))
    api.add_job("proj", "j1", "RUNNING")
    first, second = async_hook(api), async_hook(api)
    await first.aget_job("j1")
    await second.aget_job("j1")
    assert reads == ["aip_missing_conn"]
    assert second.credentials_and_project is first.credentials_and_project


async def test_client_pool_caps_and_reuses_clients() -> None:
    from airflow_aip.hooks import http_shared

    release = asyncio.Event()
    lent: list[httpx.AsyncClient] = []
    waiting = http_shared.MAX_CONCURRENT_REQUESTS + 5

    async def borrower() -> None:
        async with http_shared.borrow_client(5.0) as client:
            lent.append(client)
            await release.wait()

    async with http_shared.borrow_client(5.0):
        pass  # the first borrow loads TLS settings in a thread
    tasks = [asyncio.ensure_future(borrower()) for _ in range(waiting)]
    while len(lent) < http_shared.MAX_CONCURRENT_REQUESTS:
        await asyncio.sleep(0)
    for _ in range(50):
        await asyncio.sleep(0)
    assert len(lent) == http_shared.MAX_CONCURRENT_REQUESTS  # the rest wait for a client
    release.set()
    await asyncio.gather(*tasks)
    assert len(lent) == waiting
    assert len({id(c) for c in lent}) == http_shared.MAX_CONCURRENT_REQUESTS  # reused, not recreated
    for client in set(lent):
        await client.aclose()

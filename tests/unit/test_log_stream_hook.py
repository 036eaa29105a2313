"""JobLogsHook against a fake logging v2 API at the HTTP boundary (httpx, sync and async).

The fake filters with the local service's own filter parser, so ``timestamp>=`` cursors behave
as on the server; it adds what no server produces on demand: errors, page caps, late entries.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_aip.exceptions import ApiError, ValidationError
from airflow_aip.hooks.http_shared import clear_shared_auth
from airflow_aip.hooks.logs import LOGGING_ENDPOINT_ENV, JobLogsHook
from airflow_aip.hooks.training import ENDPOINT_ENV
from airflow_aip.jobs.logs import LogStream
from tests.fixtures.logging_api import FakeLoggingApi, RecordingLog, async_hook
from tests.unit.ml_fake import sync_client

LOCAL = "http://127.0.0.1:8089/"


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(LOGGING_ENDPOINT_ENV, raising=False)
    monkeypatch.delenv(ENDPOINT_ENV, raising=False)
    clear_shared_auth()
    yield
    clear_shared_auth()


def sync_hook(api: FakeLoggingApi, **kwargs: Any) -> JobLogsHook:
    args: dict[str, Any] = {"project_id": "proj", "api_endpoint": LOCAL, "retry_max_wait": 0.001, **kwargs}
    hook = JobLogsHook("aip_missing_conn", **args)
    client = sync_client(api)
    hook._sync_client = lambda: client  # type: ignore[method-assign]
    return hook


def numbers(count: int, start: int = 0) -> list[str]:
    return [str(n) for n in range(start, start + count)]


# -- endpoint --------------------------------------------------------------------------------


def test_endpoint_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = {"conn_type": "google_cloud_platform", "extra": {"logging_api_endpoint": "http://127.0.0.1:2222"}}
    monkeypatch.setenv("AIRFLOW_CONN_AIP_LOGS", json.dumps(extra))
    assert JobLogsHook("aip_logs", api_endpoint="http://localhost:1111").endpoint == "http://localhost:1111/"
    assert JobLogsHook("aip_logs").endpoint == "http://127.0.0.1:2222/"
    monkeypatch.setenv(LOGGING_ENDPOINT_ENV, "http://127.0.0.1:3333/")
    assert JobLogsHook("aip_missing_conn", ml_api_endpoint=LOCAL).endpoint == "http://127.0.0.1:3333/"
    monkeypatch.delenv(LOGGING_ENDPOINT_ENV)
    # No logging override: the local training service serves both APIs on its ml URL.
    local = JobLogsHook("aip_missing_conn", ml_api_endpoint=LOCAL)
    assert local.endpoint == LOCAL
    assert local.is_local
    monkeypatch.setenv(ENDPOINT_ENV, "http://aip-local:8080")  # plain http on a compose network
    assert JobLogsHook("aip_missing_conn").endpoint == "http://aip-local:8080/"
    # A real (https) ml endpoint, e.g. a regional one, says nothing about logging: Google's.
    google = JobLogsHook("aip_missing_conn", ml_api_endpoint="https://us-central1-ml.googleapis.com/")
    assert google.endpoint is None
    from google.auth.credentials import AnonymousCredentials

    google.__dict__["credentials_and_project"] = (AnonymousCredentials(), None)  # no ADC lookup
    assert google.root_url == "https://logging.googleapis.com/"
    assert not google.is_local


def test_bad_endpoint_names_the_extra() -> None:
    with pytest.raises(ValidationError) as err:
        _ = JobLogsHook("aip_missing_conn", api_endpoint="127.0.0.1:8080").endpoint
    assert err.value.field == "logging_api_endpoint"


# -- sync ------------------------------------------------------------------------------------


def test_follow_pages_up_to_the_cap_then_resumes_from_the_cursor() -> None:
    api = FakeLoggingApi()
    api.add(25)
    hook, log, stream = sync_hook(api, page_size=10, max_pages=2), RecordingLog(), LogStream("j1")
    first = hook.follow(stream, log)
    assert (first.new, first.more, first.failed) == (20, True, False)
    assert log.lines() == numbers(20)
    assert api.bodies[0] == {
        "resourceNames": ["projects/proj"],
        "filter": 'resource.type="ml_job" AND resource.labels.job_id="j1"',
        "orderBy": "timestamp asc",
        "pageSize": 10,
    }
    assert api.bodies[1]["pageToken"] == "10"
    second = hook.follow(stream, log)
    assert (second.new, second.more) == (5, False)
    assert 'timestamp>="2024-05-01T12:00:19.000000000Z"' in api.bodies[2]["filter"]
    assert log.lines() == numbers(25)


def test_a_failing_poll_warns_once_raises_nothing_and_loses_nothing() -> None:
    api = FakeLoggingApi()
    api.add(3)
    hook, log, stream = sync_hook(api, retry_attempts=2), RecordingLog(), LogStream("j1")
    api.errors.extend([503, 503, 403])  # a transient error twice (one retry), then a permanent one
    assert hook.follow(stream, log).failed
    assert hook.follow(stream, log).failed
    assert len(api.bodies) == 3  # 503 retried once, 403 not at all
    (warning,) = log.warnings()
    assert "Could not read the logs of training job j1" in warning
    assert "injected 503" in warning
    assert hook.follow(stream, log).new == 3
    assert log.lines() == numbers(3)
    assert ("info", "Reading the logs of training job j1 again") in log.records


def test_drain_polls_until_an_empty_poll_after_the_settle_time() -> None:
    api = FakeLoggingApi()
    api.add(2)
    clock = [1000.0]
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock[0] += seconds

    # A line ingested late, while the drain runs (Cloud Logging's delay).
    api.on_request = lambda n: api.add(1, start=2) if n == 2 else None
    hook, log = sync_hook(api), RecordingLog()
    hook.drain(LogStream("j1"), log, interval=5.0, sleep=sleep, clock=lambda: clock[0])
    assert log.lines() == numbers(3)
    assert len(api.bodies) == 3  # 2 lines, then the late one, then nothing 10 s after the end
    assert sleeps == [5.0, 5.0]


def test_drain_reads_a_page_capped_backlog_without_sleeping() -> None:
    api = FakeLoggingApi()
    api.add(5)
    sleeps: list[float] = []
    hook, log = sync_hook(api, page_size=1, max_pages=2), RecordingLog()
    clock = iter(range(1000, 2000))
    hook.drain(LogStream("j1"), log, interval=5.0, sleep=sleeps.append, clock=lambda: float(next(clock)))
    assert log.lines() == numbers(5)
    assert sleeps == [5.0]  # only after the first poll that did not hit the cap


# -- Cloud Logging's read quota (429) --------------------------------------------------------


def test_a_429_is_not_retried_and_pauses_the_streams_reads_until_it_passes() -> None:
    """A worker's wait backs off on the project's quota instead of spending it again."""
    api = FakeLoggingApi()
    api.add(3)
    now = [1000.0]
    hook, log, stream = sync_hook(api, retry_attempts=3), RecordingLog(), LogStream("j1")

    def follow() -> Any:
        return hook.follow(stream, log, clock=lambda: now[0])

    api.errors.append(429)
    assert follow().failed
    assert len(api.bodies) == 1  # not retried
    (warning,) = log.warnings()
    assert "HTTP 429" in warning
    assert "retrying in 10s (Cloud Logging's read quota is spent)" in warning
    now[0] += 9
    assert follow().failed
    assert len(api.bodies) == 1  # paused: nothing sent
    now[0] += 1
    api.errors.append(429)
    assert follow().failed
    assert len(api.bodies) == 2
    now[0] += 19
    follow()
    assert len(api.bodies) == 2  # the second pause is twice as long
    now[0] += 1
    assert follow().new == 3
    assert log.lines() == numbers(3)
    assert ("info", "Reading the logs of training job j1 again") in log.records
    assert stream.may_read(now[0])


async def test_async_429_is_not_retried_either() -> None:
    """The triggerer's log poller reads through alist_entries: a 429 reaches its budget at once."""
    api = FakeLoggingApi()
    api.errors.append(429)
    body = {"resourceNames": ["projects/proj"], "filter": LogStream("j1").filter}
    with pytest.raises(ApiError) as raised:
        await async_hook(api, retry_attempts=3).alist_entries(body)
    assert raised.value.status == 429
    assert len(api.bodies) == 1

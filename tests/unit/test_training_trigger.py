"""TrainingJobTrigger: serialize round-trip, one event per outcome, on_kill, and event decoding."""

from __future__ import annotations

import asyncio
import importlib
import time
from typing import Any

import httpx
import pytest

from airflow_aip.exceptions import AipError, JobFailedError, JobWaitTimeoutError
from airflow_aip.jobs.mlv1.view import view_from_ml
from airflow_aip.triggers.training import TrainingJobTrigger, job_event, summary_from_event
from tests.fixtures.logging_api import FakeLoggingApi, RecordingLog, async_hook
from tests.fixtures.trigger import events_of, make_trigger
from tests.unit.ml_fake import FakeMlApi

LOCAL = "http://127.0.0.1:8089/"


def test_serialize_round_trip() -> None:
    trigger = TrainingJobTrigger(
        job_id="j1",
        project_id="proj",
        gcp_conn_id="my_conn",
        api_endpoint=LOCAL,
        impersonation_chain=["a@p.iam.gserviceaccount.com", "b@p.iam.gserviceaccount.com"],
        poll_interval=12.5,
        end_time=1_700_000_000.0,
        cancel_on_kill=False,
        stream_logs=True,
        log_cursor={"timestamp": "2024-05-01T12:00:00.000000000Z", "insert_ids": ["a"]},
        max_log_lines_per_minute=50,
        masked_values=("s3cr3t-value",),
        queued_limit=900.0,
        release_at=1_690_000_030.0,
        budget={"amount": 12.5, "currency": "USD"},
        spent_before=3.25,
    )
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_aip.triggers.training.TrainingJobTrigger"
    module, name = classpath.rsplit(".", 1)
    rebuilt = getattr(importlib.import_module(module), name)(**kwargs)
    assert rebuilt.serialize() == (classpath, kwargs)
    assert kwargs == {
        "job_id": "j1",
        "project_id": "proj",
        "job_name": "projects/proj/jobs/j1",  # a trigger serialized before job_name existed reads the same
        "backend": "ai_platform",
        "region": None,
        "gcp_conn_id": "my_conn",
        "api_endpoint": LOCAL,
        "impersonation_chain": ["a@p.iam.gserviceaccount.com", "b@p.iam.gserviceaccount.com"],
        "poll_interval": 12.5,
        "end_time": 1_700_000_000.0,
        "cancel_on_kill": False,
        "stream_logs": True,
        "log_cursor": {"timestamp": "2024-05-01T12:00:00.000000000Z", "insert_ids": ["a"]},
        "max_log_lines_per_minute": 50,
        "masked_values": ["s3cr3t-value"],
        "queued_limit": 900.0,
        "release_at": 1_690_000_030.0,
        "budget": {"amount": 12.5, "currency": "USD"},
        "spent_before": 3.25,
    }


def test_repr_never_shows_the_masked_values() -> None:
    trigger = TrainingJobTrigger(job_id="j1", project_id="proj", masked_values=["s3cr3t-value"])
    assert "s3cr3t-value" not in repr(trigger)
    assert "masked_values=['***']" in repr(trigger)
    assert "job_id=j1" in repr(trigger)


async def test_success_after_every_waiting_state(api: FakeMlApi) -> None:
    api.add_job("proj", "j1", "QUEUED", trainingInput={"jobDir": "gs://b/out"})
    api.play("j1", ["QUEUED", "PREPARING", "RUNNING", "CANCELLING", "RUNNING", "SUCCEEDED"])
    events = await events_of(make_trigger(api))
    assert len(events) == 1
    event = events[0]
    assert event["status"] == "success"
    assert event["job_id"] == "j1"
    assert event["state"] == "SUCCEEDED"
    assert event["summary"]["output_dir"] == "gs://b/out"
    assert len(api.calls("GET")) == 6


@pytest.mark.parametrize(("state", "status"), [("FAILED", "failed"), ("CANCELLED", "cancelled")])
async def test_failure_events_carry_the_error_message(api: FakeMlApi, state: str, status: str) -> None:
    api.add_job("proj", "j1", state, errorMessage="The replica master 0 exited with a non-zero status of 1.")
    (event,) = await events_of(make_trigger(api))
    assert event["status"] == status
    assert "non-zero status" in event["message"]
    assert event["summary"]["error_message"].startswith("The replica master 0")


async def test_pending_job_yields_nothing(api: FakeMlApi) -> None:
    api.add_job("proj", "j1", "QUEUED")
    first_poll = asyncio.Event()
    api.on_request = lambda method, path: first_poll.set()
    task = asyncio.ensure_future(events_of(make_trigger(api, poll_interval=3600)))
    await first_poll.wait()
    for _ in range(10):
        await asyncio.sleep(0)
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert api.cancels == []  # a cancelled (redistributed) trigger never cancels the job


async def test_api_error_becomes_an_error_event(api: FakeMlApi) -> None:
    """A refused list is not the end (the poller reads the job with a get); a refused get is."""
    api.add_job("proj", "j1", "RUNNING")
    api.errors.extend([(403, "Permission 'ml.jobs.list' denied"), (403, "Permission 'ml.jobs.get' denied")])
    (event,) = await events_of(make_trigger(api))
    assert event["status"] == "error"
    assert "ml.jobs.get" in event["message"]
    assert event["job_id"] == "j1"
    paths = [path for _, path, _ in api.calls("GET")]
    assert paths == ["/v1/projects/proj/jobs", "/v1/projects/proj/jobs/j1"]
    assert api.cancels == []


@pytest.fixture
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Backoff in milliseconds, so an outage of a few reads takes no time."""
    monkeypatch.setattr("airflow_aip.jobs.waiting.BACKOFF_INITIAL", 0.001)
    monkeypatch.setattr("airflow_aip.jobs.waiting.BACKOFF_CAP", 0.001)


@pytest.mark.usefixtures("quick_backoff")
async def test_an_outage_is_ridden_out_and_logged_once_when_it_starts_and_once_when_it_ends(
    api: FakeMlApi,
) -> None:
    api.add_job("proj", "j1", "RUNNING")
    api.play("j1", ["RUNNING", "SUCCEEDED"])
    api.errors.extend([(503, "unavailable")] * 3 + [(429, "slow down")] * 3)
    trigger, log = streaming_trigger(api, FakeLoggingApi(), stream_logs=False)
    (event,) = await events_of(trigger)
    assert event["status"] == "success"
    assert len(api.calls("GET")) == 8  # six failed reads, then RUNNING, SUCCEEDED
    assert api.cancels == []
    outage = [text for _, text in log.records if "outage" in text]
    assert len(outage) == 2
    assert outage[0].startswith("Cannot read training job j1 (ApiError: jobs.list: HTTP 503")
    assert "6 failed reads" in outage[1]


@pytest.mark.usefixtures("quick_backoff")
async def test_a_connection_error_is_transient_too(api: FakeMlApi) -> None:
    api.add_job("proj", "j1", "SUCCEEDED")
    failures = iter(range(2))

    def refuse(method: str, path: str) -> None:
        if next(failures, None) is not None:
            raise httpx.ConnectError("connection refused")

    api.on_request = refuse
    (event,) = await events_of(make_trigger(api))
    assert event["status"] == "success"
    assert api.cancels == []


async def test_an_outage_past_the_deadline_times_out(api: FakeMlApi) -> None:
    api.add_job("proj", "j1", "RUNNING")
    api.errors.extend([(503, "unavailable")] * 3)
    (event,) = await events_of(make_trigger(api, end_time=time.time() - 1))
    assert event["status"] == "timeout"
    assert len(api.calls("GET")) == 1  # past the deadline: no backoff, no second read
    assert api.cancels == []  # the task decides (execute_complete); the trigger never cancels


async def test_exception_becomes_an_error_event(api: FakeMlApi) -> None:
    def explode(method: str, path: str) -> None:
        raise RuntimeError("transport exploded")

    api.on_request = explode
    (event,) = await events_of(make_trigger(api))
    assert event["status"] == "error"
    assert "transport exploded" in event["message"]


async def test_missing_job_is_an_error_event(api: FakeMlApi) -> None:
    (event,) = await events_of(make_trigger(api))
    assert event["status"] == "error"
    assert "JobNotFoundError" in event["message"]


async def test_deadline_yields_timeout(api: FakeMlApi) -> None:
    api.add_job("proj", "j1", "RUNNING")
    (event,) = await events_of(make_trigger(api, end_time=time.time() - 1))
    assert event["status"] == "timeout"
    assert event["state"] == "RUNNING"
    assert len(api.calls("GET")) == 1


async def test_terminal_state_wins_over_deadline(api: FakeMlApi) -> None:
    api.add_job("proj", "j1", "SUCCEEDED")
    (event,) = await events_of(make_trigger(api, end_time=time.time() - 1))
    assert event["status"] == "success"


async def test_on_kill_cancels_when_asked(api: FakeMlApi) -> None:
    api.add_job("proj", "j1", "RUNNING")
    await make_trigger(api, cancel_on_kill=True).on_kill()
    assert api.cancels == ["j1"]
    await make_trigger(api, cancel_on_kill=False).on_kill()
    assert api.cancels == ["j1"]


def test_summary_from_event() -> None:
    ok = job_event(view_from_ml({"jobId": "j1", "state": "SUCCEEDED"}, "proj"), "proj")
    assert summary_from_event(ok)["job_id"] == "j1"
    failed = job_event(
        view_from_ml({"jobId": "j1", "state": "FAILED", "errorMessage": "boom"}, "proj"), "proj"
    )
    with pytest.raises(JobFailedError, match="boom") as err:
        summary_from_event(failed)
    assert err.value.state == "FAILED"
    with pytest.raises(JobFailedError) as err:
        summary_from_event(job_event(view_from_ml({"jobId": "j1", "state": "CANCELLED"}, "proj"), "proj"))
    assert err.value.state == "CANCELLED"
    with pytest.raises(JobWaitTimeoutError):
        summary_from_event({"status": "timeout", "job_id": "j1", "state": "RUNNING", "waited_seconds": 5.0})
    with pytest.raises(AipError, match="kaput"):
        summary_from_event({"status": "error", "job_id": "j1", "message": "kaput"})


# -- log streaming ---------------------------------------------------------------------------


def streaming_trigger(
    api: FakeMlApi, logs: FakeLoggingApi, **kwargs: Any
) -> tuple[TrainingJobTrigger, RecordingLog]:
    trigger = make_trigger(api, **{"stream_logs": True, **kwargs})
    trigger.__dict__["poll_logs_hook"] = async_hook(logs)
    log = RecordingLog()
    trigger.__dict__["_log"] = log  # LoggingMixin.log reads _log
    return trigger, log


async def test_streaming_logs_lines_then_yields_one_event(api: FakeMlApi) -> None:
    logs = FakeLoggingApi()
    api.add_job("proj", "j1", "QUEUED")
    api.play("j1", ["RUNNING", "RUNNING", "FAILED"])
    logs.add(2)
    # A line arrives before each request's answer, the drain's first poll included.
    logs.on_request = lambda n: logs.add(1, start=n + 1) if n < 4 else None
    trigger, log = streaming_trigger(api, logs)
    events = await events_of(trigger)
    assert [e["status"] for e in events] == ["failed"]  # one event; log lines are never events
    assert log.lines() == ["0", "1", "2", "3", "4"]  # each once, in order, the drain's included
    texts = [text for _level, text in log.records]
    assert texts[0] == "Streaming logs of training job j1 from 2024-01-01T00:00:00.000000000Z"
    # The log poller reads on its own rounds, so lines and states interleave while the job
    # runs; but the job's last lines, drained after it ended, come before the state that ends it.
    assert texts.index("Training job j1 is FAILED") > texts.index("[master-replica-0] line 4")


async def test_streaming_resumes_from_the_serialized_cursor(api: FakeMlApi) -> None:
    logs = FakeLoggingApi()
    api.add_job("proj", "j1", "SUCCEEDED")
    logs.add(4)
    cursor = {"timestamp": "2024-05-01T12:00:01.000000000Z", "insert_ids": ["id0001"]}
    trigger, log = streaming_trigger(api, logs, log_cursor=cursor)
    (event,) = await events_of(trigger)
    assert event["status"] == "success"
    assert log.lines() == ["2", "3"]  # what the task showed before deferring is not shown again


async def test_unreadable_logs_still_end_in_the_job_event(api: FakeMlApi) -> None:
    logs = FakeLoggingApi()
    api.add_job("proj", "j1", "RUNNING")
    api.play("j1", ["RUNNING", "SUCCEEDED"])
    logs.errors.extend([403] * 5)
    trigger, log = streaming_trigger(api, logs)
    (event,) = await events_of(trigger)
    assert event["status"] == "success"
    assert log.warnings()

"""The one wait step: every decision, outage bookkeeping, backoff and the events a wait ends with."""

from __future__ import annotations

from typing import Any, get_args

import pytest

from airflow_aip.exceptions import AipError, ApiError, JobFailedError, JobWaitTimeoutError
from airflow_aip.jobs import JobState
from airflow_aip.jobs.mlv1.view import view_from_ml
from airflow_aip.jobs.waiting import (
    BACKOFF_CAP,
    Action,
    Outage,
    Seen,
    Step,
    WaitState,
    backoff,
    step,
    step_event,
    summary_from_event,
)

T0 = 1_700_000_000.0
START = WaitState.begin("j1", T0)
UNAVAILABLE = Seen.failure(ApiError(503, "unavailable", method="jobs.get"), transient=True)
DENIED = Seen.failure(ApiError(403, "denied", method="jobs.get"), transient=False)


def job(state: str, **fields: Any) -> Seen:
    return Seen(view_from_ml({"jobId": "j1", "state": state, **fields}, "proj"))


def decide(state: WaitState, seen: Seen, now: float = T0, deadline: float | None = None, **kw: Any) -> Step:
    return step(state, seen, now=now, deadline=deadline, poll_interval=kw.pop("poll_interval", 30.0), **kw)


def test_a_running_job_waits_one_poll_interval_and_logs_its_state_when_it_changes() -> None:
    first = decide(START, job("QUEUED"))
    assert (first.action, first.seconds) == ("wait", 30.0)
    assert first.logs == (("info", "Training job j1 is QUEUED"),)
    same = decide(first.state, job("QUEUED"), T0 + 30)
    assert same.logs == ()
    running = decide(same.state, job("RUNNING"), T0 + 60)
    assert running.logs == (("info", "Training job j1 is RUNNING"),)
    assert running.state.state is JobState.RUNNING


@pytest.mark.parametrize(
    "state", ["QUEUED", "PREPARING", "RUNNING", "CANCELLING", "STATE_UNSPECIFIED", "NEW"]
)
def test_every_state_but_the_terminal_ones_keeps_waiting(state: str) -> None:
    assert decide(START, job(state)).action == "wait"


@pytest.mark.parametrize("state", ["SUCCEEDED", "FAILED", "CANCELLED"])
def test_a_terminal_state_ends_the_wait_even_past_the_deadline(state: str) -> None:
    ended = decide(START, job(state), T0 + 100, deadline=T0)
    assert ended.action == "ended"
    assert ended.done
    assert ended.job is not None
    assert (ended.job["job_id"], ended.job["state"]) == ("j1", state)


def test_the_wait_is_bounded_by_the_deadline() -> None:
    assert decide(START, job("RUNNING"), T0, deadline=T0 + 10).seconds == 10
    timed_out = decide(START, job("RUNNING"), T0 + 10, deadline=T0 + 10)
    assert timed_out.action == "timed_out"
    assert timed_out.state.state is JobState.RUNNING


def test_an_outage_is_logged_once_when_it_starts_and_once_when_it_ends() -> None:
    running = decide(START, job("RUNNING"))
    first = decide(running.state, UNAVAILABLE, T0 + 30)
    assert first.action == "wait"
    ((level, message),) = first.logs
    assert level == "warning"
    assert message.startswith("Cannot read training job j1 (ApiError: jobs.get: HTTP 503: unavailable)")
    assert "the job is left alone" in message
    assert first.state.outage == Outage(T0 + 30, 1, "ApiError: jobs.get: HTTP 503: unavailable")
    second = decide(first.state, UNAVAILABLE, T0 + 31)
    third = decide(second.state, UNAVAILABLE, T0 + 33)
    assert second.logs == third.logs == ()
    assert third.state.outage is not None
    assert third.state.outage.failures == 3
    back = decide(third.state, job("RUNNING"), T0 + 95)
    assert back.logs == (
        (
            "info",
            "Training job j1 can be read again: the API outage lasted 65s (3 failed reads); "
            "the job was left alone",
        ),
    )
    assert back.state.outage is None
    assert back.state.state is JobState.RUNNING
    assert (back.action, back.seconds) == ("wait", 30.0)


def test_an_outage_that_ends_with_the_job_ended_logs_both() -> None:
    during = decide(decide(START, job("RUNNING")).state, UNAVAILABLE, T0 + 1)
    ended = decide(during.state, job("SUCCEEDED"), T0 + 5)
    assert ended.action == "ended"
    assert [message.split(":")[0] for _, message in ended.logs] == [
        "Training job j1 can be read again",
        "Training job j1 is SUCCEEDED",
    ]


def test_outage_reads_back_off_exponentially_with_jitter_up_to_the_cap() -> None:
    state, waits = START, []
    for n in range(10):
        decided = decide(state, UNAVAILABLE, T0 + n, jitter=0.999999)
        state = decided.state
        waits.append(round(decided.seconds, 3))
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0, 30.0, 30.0]
    low = decide(START, UNAVAILABLE, T0, jitter=0.0)
    assert low.seconds == 0.5  # equal jitter: half of the backoff at least
    assert backoff(40, poll_interval=300.0, jitter=1.0) == 300.0  # never more often than polling
    assert backoff(40, poll_interval=2.0, jitter=1.0) == BACKOFF_CAP


def test_outage_backoff_is_bounded_by_the_deadline_then_times_out() -> None:
    state = decide(START, job("RUNNING")).state
    for _ in range(5):
        state = decide(state, UNAVAILABLE).state
    assert decide(state, UNAVAILABLE, T0, deadline=T0 + 3, jitter=0.99).seconds == 3
    timed_out = decide(state, UNAVAILABLE, T0 + 3, deadline=T0 + 3)
    assert timed_out.action == "timed_out"
    assert timed_out.state.state is JobState.RUNNING  # the last state seen
    assert "still cannot be read after 3s (6 failed reads" in timed_out.logs[-1][1]


def test_a_non_transient_error_fails_the_wait_and_says_the_job_is_left_alone() -> None:
    failed = decide(START, DENIED)
    assert failed.action == "failed"
    assert failed.error == "ApiError: jobs.get: HTTP 403: denied"
    assert "not transient: the task fails, the job is left alone" in failed.logs[0][1]
    # during an outage too: a 403 is not part of it
    during = decide(START, UNAVAILABLE)
    assert decide(during.state, DENIED).action == "failed"


def test_no_decision_is_a_cancel() -> None:
    # cancelling is not a step's: "outwaited" (a ladder rung's queued_limit) and "over_budget" (the
    # budget guard's, never step()'s) leave it to the adapter
    assert set(get_args(Action)) == {"wait", "ended", "timed_out", "failed", "outwaited", "over_budget"}
    for seen in (job("RUNNING"), UNAVAILABLE, DENIED, job("SUCCEEDED")):
        for deadline in (None, T0 - 1):
            assert decide(START, seen, deadline=deadline).action in {"wait", "ended", "timed_out", "failed"}


# -- events ---------------------------------------------------------------------------------


def test_events_of_each_ending() -> None:
    ended = decide(START, job("FAILED", errorMessage="OOM"))
    event = step_event(ended, "proj", T0)
    assert (event["status"], event["state"], event["message"]) == (
        "failed",
        "FAILED",
        "Training job j1 ended FAILED: OOM",
    )
    with pytest.raises(JobFailedError, match="OOM"):
        summary_from_event(event)

    timed_out = decide(decide(START, job("RUNNING")).state, job("RUNNING"), T0 + 60, deadline=T0 + 60)
    event = step_event(timed_out, "proj", T0 + 61)
    assert (event["status"], event["state"], event["waited_seconds"]) == ("timeout", "RUNNING", 61.0)
    with pytest.raises(JobWaitTimeoutError):
        summary_from_event(event)

    event = step_event(decide(START, DENIED), "proj", T0)
    assert (event["status"], event["job_id"], event["project_id"]) == ("error", "j1", "proj")
    with pytest.raises(AipError, match="HTTP 403"):
        summary_from_event(event)

    success = step_event(decide(START, job("SUCCEEDED")), "proj", T0)
    assert summary_from_event(success)["state"] == "SUCCEEDED"

    with pytest.raises(ValueError, match="does not end a wait"):
        step_event(decide(START, job("RUNNING")), "proj", T0)


# -- what is waited for ---------------------------------------------------------------------


def test_an_operation_waits_as_a_job_under_its_own_name() -> None:
    """A Model Registry upload's operation, read as RUNNING until done, takes the same decisions."""
    start = WaitState.begin("op7", T0, what="model upload")
    running = decide(start, Seen({"state": "RUNNING"}))
    assert (running.action, running.logs) == ("wait", (("info", "Model upload op7 is RUNNING"),))
    outage = decide(running.state, UNAVAILABLE, T0 + 30)
    assert outage.logs[0][1].startswith("Cannot read model upload op7 (ApiError")
    assert outage.logs[0][1].endswith("the upload is left alone")
    back = decide(outage.state, Seen({"state": "SUCCEEDED"}), T0 + 40)
    assert back.action == "ended"
    assert [message for _, message in back.logs] == [
        "Model upload op7 can be read again: the API outage lasted 10s (1 failed reads); "
        "the upload was left alone",
        "Model upload op7 is SUCCEEDED",
    ]
    denied = decide(start, DENIED)
    assert denied.logs[0][1].endswith("not transient: the task fails, the upload is left alone")

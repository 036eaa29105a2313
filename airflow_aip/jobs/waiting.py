"""The one wait step: given what the last read of a job showed, what a waiting task does next.

The operator in the worker, the trigger in the triggerer and the sensor in each of its modes all
wait the same way, because they all take their decisions here; so does a wait for a Model
Registry upload's long-running operation, read as a job whose state is RUNNING until it is done
(``WaitState.what`` names the thing waited for in the lines logged). Their runners
(``airflow_aip.hooks.waiting``) only read the job, sleep and log what the step says. Three loops
written apart once drifted: one turned a minute of 503s into an ``error`` event that cancelled a
healthy job. The rules, in one place:

- Waiting is observation only. Nothing decided here cancels a job: an error never does. Only the
  task's own deadline (``timed_out``) may lead its adapter to cancel, as a kill or a cancel
  operator may.
- A transient error (429, 5xx, dropped connection, timeout; the caller says which) starts or
  continues an *outage*: it is ridden out with exponential backoff (equal jitter), bounded by the
  deadline, and logged once when it starts and once when it ends, with its duration.
- Any other error fails the wait (``failed``) and leaves the job alone.
- A job in a terminal state ends the wait, whatever the deadline; past the deadline a job still
  running (or still unreadable) ends it as ``timed_out``.

Pure: time, randomness and the read's outcome come in as arguments, so every decision is a unit
test. The events a wait for a job ends with (one per wait, the trigger's protocol) are built
here too; an operation's wait ends with its own (``airflow_aip.triggers.model_operation``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from airflow_aip.exceptions import AipError, BudgetExceededError, JobFailedError, JobWaitTimeoutError
from airflow_aip.jobs.backends import backend_of
from airflow_aip.jobs.states import JobState
from airflow_aip.jobs.summary import summarize_job
from airflow_aip.jobs.times import queued_seconds

# Backoff while the API cannot be read: 1 s, 2 s, 4 s ... up to BACKOFF_CAP (or the poll
# interval, if longer: an outage never makes a waiter ask more often than it normally does once
# the backoff has grown). Each wait is drawn in [half, all] of that (equal jitter), so 1,000
# triggers that met the same outage do not come back in step.
BACKOFF_INITIAL = 1.0
BACKOFF_CAP = 30.0
# Airflow's own deferral timeout trails the trigger's deadline: the trigger's timeout event
# (which lets the operator cancel the job it gave up on) should win the race.
DEFERRAL_TIMEOUT_MARGIN = 120.0

# A Vertex AI job QUEUED longer than a moment waits for quota: the task log says for which, once
# it has waited QUEUED_NOTE_AFTER (or its rung's queued_limit, if shorter), and again this often.
QUEUED_NOTE_AFTER = 30.0
QUEUED_NOTE_INTERVAL = 600.0

Action = Literal["wait", "ended", "timed_out", "failed", "outwaited", "over_budget"]
Level = Literal["info", "warning"]
_STATUS = {JobState.SUCCEEDED: "success", JobState.FAILED: "failed", JobState.CANCELLED: "cancelled"}


@dataclass(frozen=True)
class Outage:
    """Reads failing transiently since ``started`` (UNIX time): ``failures`` in a row so far."""

    started: float
    failures: int
    error: str


@dataclass(frozen=True)
class WaitState:
    """What one wait remembers between two reads (a runner keeps it; a fresh process starts anew).

    ``what`` is what is waited for, as the lines logged name it: ``training job`` (read as "the
    job" after its name), or ``model upload`` (an operation: "the upload").
    """

    job_id: str
    started: float
    state: JobState = JobState.STATE_UNSPECIFIED
    outage: Outage | None = None
    queued_noted: float | None = None  # when the last "QUEUED for quota ..." line was logged
    what: str = "training job"

    @classmethod
    def begin(cls, job_id: str, now: float, what: str = "training job") -> WaitState:
        return cls(job_id, now, what=what)

    @property
    def named(self) -> str:
        """``Training job j1``: the start of a line about it."""
        return f"{self.what[:1].upper()}{self.what[1:]} {self.job_id}"

    @property
    def short(self) -> str:
        """``job``: the last word of ``what``, as a line names it again."""
        return self.what.rsplit(" ", 1)[-1]


@dataclass(frozen=True)
class Seen:
    """The outcome of one read: the job, or the error it raised and whether that is transient."""

    job: Mapping[str, Any] | None = None
    error: str = ""
    transient: bool = False

    @classmethod
    def failure(cls, err: BaseException, *, transient: bool) -> Seen:
        return cls(None, f"{type(err).__name__}: {err}", transient)


@dataclass(frozen=True)
class Step:
    """The decision: ``wait`` ``seconds`` then read again, or stop (``ended``, ``timed_out``,
    ``failed``, ``outwaited``: QUEUED past the capacity ladder rung's ``queued_limit``, or
    ``over_budget``: the budget guard's, :func:`over_budget`).

    ``logs`` are the lines to log now, ``(level, message)``; ``state`` is what to remember.
    ``job`` is the job that ended (``ended``); ``error`` why the wait failed (``failed``).
    """

    action: Action
    state: WaitState
    seconds: float = 0.0
    logs: tuple[tuple[Level, str], ...] = ()
    job: Mapping[str, Any] | None = None
    error: str = ""

    @property
    def done(self) -> bool:
        return self.action != "wait"


def backoff(failures: int, poll_interval: float, jitter: float) -> float:
    """Seconds before read number ``failures + 1`` of an outage; ``jitter`` is uniform in [0, 1)."""
    cap = max(poll_interval, BACKOFF_CAP)
    full = min(cap, BACKOFF_INITIAL * 2.0 ** min(failures - 1, 32))
    return full * (0.5 + jitter / 2)


def _until(deadline: float | None, now: float, seconds: float) -> float:
    return max(0.0, seconds if deadline is None else min(seconds, deadline - now))


def step(
    state: WaitState,
    seen: Seen,
    *,
    now: float,
    deadline: float | None,
    poll_interval: float,
    jitter: float = 0.5,
    queued_limit: float | None = None,
) -> Step:
    """The next move of a wait after one read (see the module docstring for the rules).

    ``queued_limit``: seconds a job may stay QUEUED before the wait ends ``outwaited`` (a
    capacity ladder's rung; the adapter then cancels the job and tries the next rung).
    """
    if seen.job is None:
        return _after_error(
            state, seen, now=now, deadline=deadline, poll_interval=poll_interval, jitter=jitter
        )
    logs: list[tuple[Level, str]] = []
    observed = JobState.parse(seen.job.get("state"))
    if state.outage is not None:
        lasted = now - state.outage.started
        logs.append(
            (
                "info",
                f"{state.named} can be read again: the API outage lasted {lasted:.0f}s "
                f"({state.outage.failures} failed reads); the {state.short} was left alone",
            )
        )
    remembered = replace(state, state=observed, outage=None)
    queued = observed is JobState.QUEUED and backend_of(seen.job).schedules_capacity
    if queued:
        remembered, waited = _queued(state, seen.job, remembered, logs, now, queued_limit)
        if queued_limit is not None and waited >= queued_limit:
            return Step("outwaited", remembered, logs=tuple(logs), job=seen.job)
    elif observed is not state.state:
        logs.append(("info", f"{state.named} is {observed.value}"))
    if observed.is_terminal:
        return Step("ended", remembered, logs=tuple(logs), job=seen.job)
    if deadline is not None and now >= deadline:
        return Step("timed_out", remembered, logs=tuple(logs), job=seen.job)
    return Step("wait", remembered, _until(deadline, now, poll_interval), tuple(logs))


def _queued(
    state: WaitState,
    job: Mapping[str, Any],
    remembered: WaitState,
    logs: list[tuple[Level, str]],
    now: float,
    queued_limit: float | None,
) -> tuple[WaitState, float]:
    """A QUEUED Vertex AI job: after a moment, say what quota it waits for (and again now and then)."""
    waited = queued_seconds(job, now) or 0.0
    if waited < min(QUEUED_NOTE_AFTER, queued_limit or QUEUED_NOTE_AFTER):
        if state.state is not JobState.QUEUED:  # every job starts QUEUED: a moment there is no news
            logs.append(("info", f"{state.named} is QUEUED"))
    elif state.queued_noted is None or now - state.queued_noted >= QUEUED_NOTE_INTERVAL:
        reason = backend_of(job).why_waiting(job) or "QUEUED"
        logs.append(("info", f"{state.named} is {reason}, {waited / 60:.0f} min"))
        remembered = replace(remembered, queued_noted=now)
    return remembered, waited


def _after_error(
    state: WaitState, seen: Seen, now: float, deadline: float | None, poll_interval: float, jitter: float
) -> Step:
    it, the = f"{state.what} {state.job_id}", f"the {state.short}"
    if not seen.transient:
        message = f"Cannot read {it} ({seen.error}); not transient: the task fails, {the} is left alone"
        return Step("failed", state, logs=(("warning", message),), error=seen.error)
    outage = state.outage
    logs: tuple[tuple[Level, str], ...] = ()
    if outage is None:
        message = (
            f"Cannot read {it} ({seen.error}): an API outage; reading again until "
            f"it ends or the task's deadline, {the} is left alone"
        )
        logs = (("warning", message),)
        outage = Outage(now, 0, seen.error)
    outage = replace(outage, failures=outage.failures + 1, error=seen.error)
    remembered = replace(state, outage=outage)
    if deadline is not None and now >= deadline:
        message = (
            f"{state.named} still cannot be read after {now - outage.started:.0f}s "
            f"({outage.failures} failed reads; last: {seen.error})"
        )
        return Step("timed_out", remembered, logs=(*logs, ("warning", message)))
    seconds = _until(deadline, now, backoff(outage.failures, poll_interval, jitter))
    return Step("wait", remembered, seconds, logs)


def over_budget(decided: Step, job: Mapping[str, Any], line: str) -> Step:
    """The step the budget guard (:mod:`airflow_aip.jobs.budget`) turns a read into past the budget:
    the wait ends, and its adapter cancels the job once and fails the task with ``line``."""
    return Step("over_budget", decided.state, logs=(*decided.logs, ("warning", line)), job=job, error=line)


# -- the one event a wait ends with (the trigger yields it; the operator and sensor decode it) ----


def job_event(job: Mapping[str, Any], project_id: str) -> dict[str, Any]:
    """The event for a job that ended (``job``: the neutral view, see ``airflow_aip.jobs.view``)."""
    summary = summarize_job(job)
    state = JobState.parse(summary["state"])
    message = f"Training job {summary['job_id']} ended {state.value}"
    if summary["error_message"]:
        message += f": {summary['error_message']}"
    return {
        "status": _STATUS.get(state, "failed" if state.is_failure else "error"),
        "message": message,
        "job_id": summary["job_id"],
        "job_name": summary["name"],
        "project_id": project_id,
        "state": state.value,
        "summary": summary,
    }


def step_event(decided: Step, project_id: str, now: float, job_name: str = "") -> dict[str, Any]:
    """The event for a step that ended the wait (``ended``, ``timed_out`` or ``failed``) at ``now``."""
    if decided.action == "ended" and decided.job is not None:
        return job_event(decided.job, project_id)
    state = decided.state
    base = {
        "job_id": state.job_id,
        "job_name": job_name,
        "project_id": project_id,
        "state": state.state.value,
        "summary": None,
    }
    if decided.action == "timed_out":
        message = f"Stopped waiting for training job {state.job_id}: still {state.state.value}"
        waited = round(max(0.0, now - state.started), 3)
        # the job as the last read saw it: what the UI shows of a wait that gave up
        last = summarize_job(decided.job) if decided.job is not None else None
        return {"status": "timeout", "message": message, "waited_seconds": waited, **base, "summary": last}
    if decided.action == "failed":
        return {"status": "error", "message": decided.error, **base}
    if decided.action == "over_budget":
        last = summarize_job(decided.job, now) if decided.job is not None else None
        return {"status": "over_budget", "message": decided.error, **base, "summary": last}
    if decided.action == "outwaited":
        waited = queued_seconds(decided.job or {}, now) or 0.0
        message = (
            f"Training job {state.job_id} stayed QUEUED {waited / 60:.0f} min, past its rung's queued_limit"
        )
        return {"status": "queued", "message": message, "waited_seconds": round(waited, 3), **base}
    raise ValueError(f"a {decided.action!r} step does not end a wait")


def summary_from_event(event: Mapping[str, Any]) -> dict[str, Any]:
    """The summary of a success event; every other event raised as the typed error it stands for."""
    status = event.get("status")
    job_id = str(event.get("job_id", ""))
    summary = event.get("summary")
    if status == "success" and isinstance(summary, dict):
        return summary
    state = str(event.get("state") or JobState.STATE_UNSPECIFIED.value)
    if status in ("failed", "cancelled"):
        error = (summary or {}).get("error_message") if isinstance(summary, dict) else None
        raise JobFailedError(job_id, state, str(error or ""))
    if status == "timeout":
        raise JobWaitTimeoutError(job_id, state, event.get("waited_seconds"))
    if status == "over_budget":
        raise BudgetExceededError(str(event.get("message")))
    raise AipError(f"Waiting for training job {job_id} failed: {event.get('message') or event!r}")

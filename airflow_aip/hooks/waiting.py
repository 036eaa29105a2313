"""The runners of the one wait step: read the job, apply the step, sleep, stream its logs.

The decisions are the pure step's (``airflow_aip.jobs.waiting``); what is left is I/O, once for
each world: :class:`SyncWait` (the operator in the worker, the sensor's poke and reschedule
modes) sleeps with ``time.sleep`` and calls the sync hooks; the trigger's runner
(:class:`airflow_aip.triggers.watching.TriggerWait`) takes its reads and log lines from the
triggerer's shared pollers. :class:`WaitRunner` is what both share.

Why here, beside the hooks: a runner calls the hooks, so it cannot live in the pure model
(``jobs/``), and the operator, the sensor and the trigger all use it, so it belongs to none of
their folders (a sensor importing from ``operators/`` would be a sideways dependency). It
imports nothing of Airflow: like the hooks, it is below the adapters.

Log streaming is the adapters' own (``stream_for`` builds the stream from the first job read:
the trigger starts at its serialized cursor, the sensor keeps the stream to hand it over); the
runners follow it after each read of a running job and, once the job ended, drain it before
the event, as each adapter did before it used a runner. Reads that failed stream nothing.

What is waited for is a job, or anything read as one: a Model Registry upload's operation is
read as ``{name, state, operation}`` (``hooks.registry.operation_view``), named ``what="model
upload"`` in the lines logged, and ends with its own event (``event_of``).

The hook given should try each request once (``JobHooksMixin.wait_hook``): the step owns the
outage policy (backoff up to the deadline, one log line when an outage starts and one when it
ends); a hook retrying on its own would log every retry and could outlast the deadline.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from airflow_aip.hooks.http_shared import is_transient
from airflow_aip.jobs.logs import DRAIN_INTERVAL, LogStream
from airflow_aip.jobs.trials import best_trial_report
from airflow_aip.jobs.waiting import (
    Level,
    Seen,
    Step,
    WaitState,
    over_budget,
    step,
    step_event,
    summary_from_event,
)

if TYPE_CHECKING:
    from airflow_aip.jobs.budget import Guard

if TYPE_CHECKING:
    from airflow_aip.hooks.logs import JobLogsHook

StreamFor = Callable[[Mapping[str, Any]], LogStream]
EventOf = Callable[[Step], dict[str, Any]]


class Reader(Protocol):
    """What a worker's wait reads through: a job client, or the Model Registry's operations."""

    def read(self, name: str) -> Mapping[str, Any]: ...


def finished(event: Mapping[str, Any], log: Any) -> dict[str, Any]:
    """The summary a wait's event stands for (else its typed error); a tuning job's winner logged last.

    The operator and the sensor end every wait here, in the worker and after a deferral alike.
    """
    summary = summary_from_event(event)
    report = best_trial_report(summary)
    if report:
        log.info("%s", report)
    return summary


class WaitRunner:
    """What both runners share: the step's state, its log lines, the log stream."""

    def __init__(
        self,
        hook: Reader | None,
        logs_hook: JobLogsHook | None,
        job_id: str,
        project_id: str,
        *,
        job_name: str,
        poll_interval: float,
        deadline: float | None,
        log: Any,
        stream_for: StreamFor | None = None,
        follow_while_running: bool = True,
        jitter: Callable[[], float] | None = None,
        queued_limit: float | None = None,
        what: str = "training job",
        event_of: EventOf | None = None,
        guard: Guard | None = None,
    ) -> None:
        self.hook = hook
        self.logs_hook = logs_hook
        self.job_id = job_id
        self.job_name = job_name
        self.project_id = project_id
        self.poll_interval = poll_interval
        self.deadline = deadline
        self.log = log
        self.stream_for = stream_for
        self.follow_while_running = follow_while_running
        self.jitter = jitter or random.random
        self.queued_limit = queued_limit  # a capacity ladder rung's limit on QUEUED (see jobs.waiting)
        self.event_of = event_of  # the event a wait ends with; None: a job's (``step_event``)
        self.guard = guard  # the cost lines and the budget (airflow_aip.jobs.budget); None: neither
        self.state = WaitState.begin(job_id, time.time(), what)
        self.stream: LogStream | None = None
        self.last_job: Mapping[str, Any] = {}  # the job's view as the last successful read showed it

    @staticmethod
    def failed_read(err: Exception) -> Seen:
        return Seen.failure(err, transient=is_transient(err))

    def decide(self, seen: Seen) -> Step:
        """Apply the step to one read and remember its state; :meth:`report` logs its lines."""
        if seen.job is not None:
            self.last_job = seen.job
        now = time.time()
        decided = step(
            self.state,
            seen,
            now=now,
            deadline=self.deadline,
            poll_interval=self.poll_interval,
            jitter=self.jitter(),
            queued_limit=self.queued_limit,
        )
        self.state = decided.state
        return self.guarded(decided, seen, now)

    def guarded(self, decided: Step, seen: Seen, now: float) -> Step:
        """The step, with the guard's word on the read: its cost lines, or ``over_budget``.

        Only a read that succeeded is judged (an outage never cancels for cost), and only while
        the wait goes on or as it ends (the cost at the end).
        """
        if self.guard is None or seen.job is None or decided.action not in ("wait", "ended"):
            return decided
        verdict = self.guard.observe(seen.job, now)
        if self.guard.check_at is not None:  # never read for the guard more often than the poll
            self.guard.check_at = max(self.guard.check_at, now + self.poll_interval)
        lines: tuple[tuple[Level, str], ...] = tuple(("info", line) for line in verdict.logs)
        if verdict.over and decided.action == "wait":
            return over_budget(replace(decided, logs=decided.logs + lines), seen.job, verdict.line)
        return replace(decided, logs=decided.logs + lines) if lines else decided

    def report(self, decided: Step) -> Step:
        """Log the step's lines, after the job's own lines up to that read: states stay in order."""
        for level, message in decided.logs:
            getattr(self.log, level)("%s", message)
        return decided

    def event(self, decided: Step) -> dict[str, Any]:
        if self.event_of is not None:
            return self.event_of(decided)
        return step_event(decided, self.project_id, time.time(), self.job_name)

    def stream_of(self, seen: Seen, decided: Step) -> LogStream | None:
        """The stream to follow (running) or drain (ended) after this read, if any."""
        if seen.job is None or self.stream_for is None:
            return None
        if self.stream is None:
            self.stream = self.stream_for(seen.job)
        if decided.action == "ended" or (not decided.done and self.follow_while_running):
            return self.stream
        return None

    @property
    def drain_interval(self) -> float:
        return min(self.poll_interval, DRAIN_INTERVAL)


class SyncWait(WaitRunner):
    """Wait in a worker process."""

    def observe(self, job: Mapping[str, Any] | None = None) -> Step:
        """One read (or ``job``, as submitting read it), decided and logged; logs streamed."""
        if job is not None:
            seen = Seen(job)
        else:
            try:
                assert self.hook is not None  # a worker's wait always reads through its hook
                seen = Seen(self.hook.read(self.job_name))
            except Exception as err:
                seen = self.failed_read(err)
        decided = self.decide(seen)
        stream = self.stream_of(seen, decided)
        logs = self.logs_hook
        if stream is None or logs is None:
            pass
        elif decided.action == "ended":
            logs.drain(
                stream,
                self.log,
                self.project_id,
                interval=self.drain_interval,
                sleep=time.sleep,
                clock=time.monotonic,
            )
        elif job is None:  # a job just created or adopted: nothing to show yet
            logs.follow(stream, self.log, self.project_id, time.monotonic)
        return self.report(decided)

    def run(self, job: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Until the step stops: the one event the wait ends with."""
        decided = self.observe(job)
        while not decided.done:
            time.sleep(decided.seconds)
            decided = self.observe()
        return self.event(decided)

    def run_for(self, seconds: float, job: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
        """As :meth:`run`, for at most ``seconds``: None when the wait goes on past them.

        Reads 1, 2, 4, 8 s... apart (never further than the wait's own interval): a job of a few
        seconds is seen ending within about its own length again, in a few reads.
        """
        until, apart = time.monotonic() + seconds, 1.0
        decided = self.observe(job)
        while not decided.done:
            left = until - time.monotonic()
            if left <= 0:
                return None
            time.sleep(min(decided.seconds, apart, left))
            apart *= 2
            decided = self.observe()
        return self.event(decided)

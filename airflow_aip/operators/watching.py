"""Watching one training job from a task: announce it, wait for it in the worker or deferred, end the wait.

The submit operator (for each rung of its ladder) and the sensor do these steps the same way, here:

- **announce**: the job's ID, how to reach it (the UI's live tab reads
  :meth:`~airflow_aip.hooks.job_reference.JobApi.for_job`) and its page go to XCom before any wait;
- **defer** to :class:`~airflow_aip.triggers.training.TrainingJobTrigger`, whose deadline is the
  wait's; Airflow's own deferral timeout trails it by ``DEFERRAL_TIMEOUT_MARGIN``, so the
  trigger's timeout event (which lets the task cancel the job it gave up on) wins the race; the
  trigger holds an early event until ``[aip] deferral_hold`` after the deferral
  (:mod:`airflow_aip.triggers.hold`), so Airflow's executor-event race cannot fail the task;
- **wait in the worker**: the one wait step's sync runner (:class:`~airflow_aip.hooks.waiting.SyncWait`),
  copying the job's log lines into the task log (``LogStream.for_job``) within the budget;
- **end**: giving up (``wait_timeout``) cancels the job when ``cancel_on_kill``, and an error
  reading it never does; how a wait that did not succeed ended is kept for the UI; then the
  summary, or the job's error.

:class:`WaitPolicy` is how a task waits, as one value: the operator's waiting arguments.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, NoReturn

from airflow_aip.compat import lacking_lines
from airflow_aip.exceptions import ValidationError
from airflow_aip.hooks.job_reference import cancel_quietly
from airflow_aip.hooks.waiting import SyncWait, finished
from airflow_aip.jobs.budget import Budget, Guard
from airflow_aip.jobs.experiments import run_job_ids, with_logged_runs
from airflow_aip.jobs.logs import DEFAULT_LINES_PER_MINUTE, LogStream, check_lines_per_minute
from airflow_aip.jobs.mlv1.view import ml_job_name
from airflow_aip.jobs.pricing import PriceTable
from airflow_aip.jobs.waiting import DEFERRAL_TIMEOUT_MARGIN
from airflow_aip.links import CONSOLE_URL_XCOM_KEY, JOB_API_XCOM_KEY, JOB_ID_XCOM_KEY, record_ending
from airflow_aip.triggers.hold import release_at
from airflow_aip.triggers.training import TrainingJobTrigger

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airflow.sdk import BaseOperator, Context
    from airflow.triggers.base import BaseTrigger

    from airflow_aip.hooks.job_client import JobClient
    from airflow_aip.hooks.job_reference import JobApi
    from airflow_aip.hooks.logs import JobLogsHook


CANCEL_POLL_SECONDS = 2.0  # how often a job being cancelled is read, at most
CANCEL_READS = 30  # how many such reads' time a task waits for a cancel to show


@dataclass(frozen=True)
class WaitPolicy:
    """How a task waits for its job: the submit operator's waiting arguments, as one value."""

    wait_for_completion: bool = True
    deferrable: bool = False
    defer_after: float = 0.0  # deferrable: seconds first waited in the worker (``[aip] defer_after``)
    poll_interval: float = 30.0
    wait_timeout: float | None = None
    cancel_on_kill: bool = True
    stream_logs: bool = True
    max_log_lines_per_minute: int = DEFAULT_LINES_PER_MINUTE
    budget: Budget | None = None  # checked by check_budget (airflow_aip.jobs.budget)
    refuse_over_budget: bool = False

    def guard(self, spent_before: float = 0.0) -> Guard:
        """A wait's guard: the cost lines, and the budget if any, counting ``spent_before``."""
        return Guard(PriceTable.load(), self.budget, spent_before)

    def checked(self) -> WaitPolicy:
        """This policy, every value checked (ValidationError naming the argument) before anything is sent."""
        for name in ("poll_interval", "wait_timeout"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int | float) or value <= 0):
                raise ValidationError(name, f"must be a positive number of seconds, got {value!r}")
        if not isinstance(self.defer_after, int | float) or self.defer_after < 0:
            raise ValidationError(
                "defer_after", f"must be a number of seconds, 0 or more, got {self.defer_after!r}"
            )
        check_lines_per_minute(self.max_log_lines_per_minute)
        return self


def defer_wait(
    task: BaseOperator,
    trigger: Callable[..., BaseTrigger],
    *,
    wait_timeout: float | None,
    clock: Callable[[], float] = time.time,
    **arguments: Any,
) -> NoReturn:
    """Hand a task's wait to ``trigger(**arguments)`` (raises TaskDeferred); resumed in ``execute_complete``.

    The one defer of a wait, a job's or an operation's: the trigger's deadline (``end_time``) is
    the wait's, ``wait_timeout`` from now; Airflow's own deferral timeout trails it by
    ``DEFERRAL_TIMEOUT_MARGIN``, so the trigger's timeout event wins the race; and the trigger holds
    an early event until ``release_at`` (:mod:`airflow_aip.triggers.hold`).
    """
    task.defer(
        trigger=trigger(
            end_time=clock() + wait_timeout if wait_timeout else None,
            release_at=release_at(clock),
            **arguments,
        ),
        method_name="execute_complete",
        timeout=timedelta(seconds=wait_timeout + DEFERRAL_TIMEOUT_MARGIN) if wait_timeout else None,
    )


class TaskWatch:
    """One task's watch over its job (or its ladder's jobs, one after another).

    ``task`` is the operator or sensor: it defers, logs, and hands the trigger its job API and
    its log settings (:meth:`TrainingJobTrigger.for_task`). ``clock`` is the task module's
    ``time.time``: the wait's deadline is read from it.
    """

    def __init__(
        self, task: Any, api: JobApi, policy: WaitPolicy, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.task = task
        self.api = api
        self.policy = policy
        self.clock = clock
        self.log = task.log
        self.watched: tuple[str, str] | None = None  # (job name, project) while waiting: on_kill cancels it
        self.stream: LogStream | None = None  # the last job's log lines shown (the sensor hands it on)
        self._hooks: dict[tuple[Any, ...], JobClient] = {}
        self._logs_hook: JobLogsHook | None = None

    def say_what_core_lacks(self) -> None:
        """At the task's start, one line per primitive this Airflow lacks that this task would use."""
        policy = self.policy
        for line in lacking_lines(deferrable=policy.deferrable, cancel_on_kill=policy.cancel_on_kill):
            self.log.warning(line)

    # -- hooks ------------------------------------------------------------------------------

    def hook(self, region: str | None = None, **retry: Any) -> JobClient:
        """The job hook of ``region`` (the task's own when None), built once per region and retry policy."""
        key = (region, tuple(sorted(retry.items())))
        if key not in self._hooks:
            api = replace(self.api, region=region) if region else self.api
            self._hooks[key] = api.job_hook(**retry)
        return self._hooks[key]

    @property
    def logs_hook(self) -> JobLogsHook:
        if self._logs_hook is None:
            self._logs_hook = self.api.logs_hook()
        return self._logs_hook

    # -- the five steps ---------------------------------------------------------------------

    def announce(self, context: Context, job_id: str, name: str, project: str, console_url: Any) -> None:
        """Push the job's ID, its API (the UI's live tab reads the job) and its page; watch it."""
        ti = context["ti"]
        ti.xcom_push(key=JOB_ID_XCOM_KEY, value=job_id)
        ti.xcom_push(key=JOB_API_XCOM_KEY, value=self.api.for_job(name, project))
        ti.xcom_push(key=CONSOLE_URL_XCOM_KEY, value=console_url)
        self.watched = (name, project)

    def deadline(self) -> float | None:
        """When a wait starting now gives up (``wait_timeout``), or None."""
        return self.clock() + self.policy.wait_timeout if self.policy.wait_timeout else None

    def defer(
        self,
        *,
        job_id: str,
        job_name: str,
        project_id: str,
        masked_values: Sequence[str],
        region: str | None = None,
        queued_limit: float | None = None,
        log_cursor: dict[str, Any] | None = None,
        spent_before: float = 0.0,
    ) -> NoReturn:
        """Hand the wait to the trigger (raises TaskDeferred); the task resumes in ``execute_complete``."""
        budget = self.policy.budget
        defer_wait(
            self.task,
            partial(TrainingJobTrigger.for_task, self.task),
            wait_timeout=self.policy.wait_timeout,
            clock=self.clock,
            job_id=job_id,
            job_name=job_name,
            project_id=project_id,
            poll_interval=self.policy.poll_interval,
            masked_values=masked_values,
            log_cursor=log_cursor,
            region=region,
            queued_limit=queued_limit,
            budget=budget.to_json() if budget is not None else None,
            spent_before=spent_before,
        )

    def wait(
        self,
        hook: JobClient,
        job_id: str,
        job_name: str,
        project_id: str,
        *,
        deadline: float | None,
        queued_limit: float | None = None,
        follow_while_running: bool = True,
        spent_before: float = 0.0,
    ) -> SyncWait:
        """The worker's wait on one job; with ``stream_logs``, its log lines go to the task log."""
        streaming = self.policy.stream_logs
        return SyncWait(
            hook,
            self.logs_hook if streaming else None,
            job_id,
            project_id,
            job_name=job_name,
            poll_interval=self.policy.poll_interval,
            deadline=deadline,
            log=self.log,
            stream_for=self.log_stream if streaming else None,
            follow_while_running=follow_while_running,
            queued_limit=queued_limit,
            guard=self.policy.guard(spent_before),
        )

    def log_stream(self, job: Mapping[str, Any]) -> LogStream:
        """The job's log lines, within ``max_log_lines_per_minute``: one stream per job, kept."""
        log_id = str(job["log_id"])
        if self.stream is None or self.stream.job_id != log_id:
            self.stream = LogStream.for_job(
                log_id, job.get("create_time"), lines_per_minute=self.policy.max_log_lines_per_minute
            )
        return self.stream

    def cursor(self) -> dict[str, Any] | None:
        """Where the log lines shown so far end, for a trigger to go on from."""
        return self.stream.cursor.to_json() if self.stream else None

    def finish(self, event: Mapping[str, Any], *, cancel_on_timeout: bool = True) -> dict[str, Any]:
        """The summary a wait's event stands for, or its error once kept for the UI.

        Giving up (``wait_timeout``) cancels the job, with ``cancel_on_kill``; an error reading
        it never does (the retry adopts it). Past the budget, the job is cancelled here, once (the
        wait's one event comes here once), and the task fails with the guard's line.
        """
        if event.get("status") == "over_budget":
            project = str(event.get("project_id"))
            name = event.get("job_name") or ml_job_name(project, str(event.get("job_id")))
            self.log.warning("%s", event.get("message"))
            self.cancel(str(name), project, reason="over budget")
        if cancel_on_timeout and event.get("status") == "timeout" and self.policy.cancel_on_kill:
            project = str(event.get("project_id"))
            name = event.get("job_name") or ml_job_name(project, str(event.get("job_id")))  # older events
            self.cancel(str(name), project, reason="timeout")
        self.watched = None
        record_ending(event, self.log)
        return self.with_logged_runs(finished(event, self.log))

    def with_logged_runs(self, summary: dict[str, Any]) -> dict[str, Any]:
        """The summary with the Experiments run each trial (or the job) logged to, read once here,
        in the worker, so the UI draws them from XCom (:mod:`airflow_aip.jobs.experiments`).

        A read that fails leaves the summary as it was: what the trainer logged is extra, never
        a reason to fail a job that succeeded.
        """
        job_ids = run_job_ids(summary)
        if not job_ids:
            return summary
        try:
            hook = self.hook(summary.get("region") or None)
            runs = hook.logged_runs(job_ids, summary.get("create_time"))
        except Exception as err:  # logged: the summary stands without them
            self.log.warning("Could not read the job's Vertex AI Experiments runs: %s", err)
            return summary
        if runs:
            self.log.info("Experiments runs logged by the job's trainer: %s", ", ".join(sorted(runs)))
        return with_logged_runs(summary, runs)

    def cancel(self, name: str, project: str | None, reason: str) -> None:
        """Cancel through the job's own region (a ladder's rung may have moved it); never raises."""
        api = self.api.addressing(name).arguments
        cancel_quietly(name, project_id=project, reason=reason, log=self.log, **api)

    def cancel_and_wait(self, job_id: str, name: str, project: str, *, region: str | None) -> None:
        """Cancel a job this task gives up (a ladder's rung QUEUED too long) and wait until it ended.

        The wait is the one wait step's (:class:`~airflow_aip.hooks.waiting.SyncWait`), reading
        every ``CANCEL_POLL_SECONDS`` at most, for ``CANCEL_READS`` reads' time at most: the
        rescan of the next climb must not adopt the job still QUEUED. A wait that timed out or
        could not read the job is not an error: the cancel was asked, and the rescan reads it anew.
        """
        self.hook(region).cancel(name)
        poll = min(self.policy.poll_interval, CANCEL_POLL_SECONDS)
        SyncWait(
            self.hook(region, retry_attempts=1),
            None,
            job_id,
            project,
            job_name=name,
            poll_interval=poll,
            deadline=self.clock() + CANCEL_READS * poll,
            log=self.log,
        ).run()

    def kill(self) -> None:
        """The task is being killed while it waits in the worker: cancel the job, with ``cancel_on_kill``."""
        if self.policy.cancel_on_kill and self.watched:
            watched, self.watched = self.watched, None
            self.cancel(*watched, reason="task killed")

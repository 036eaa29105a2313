"""Wait for a training job in the triggerer: async polling, one event, no worker slot held.

- ``run()`` drives the one wait step (``airflow_aip.jobs.waiting``) with the trigger's runner
  (:class:`~airflow_aip.triggers.watching.TriggerWait`), as the operator and the sensor drive
  it in the worker: the same decisions in every waiting mode. Its reads come from the
  triggerer's shared job poller (:mod:`airflow_aip.triggers.job_polling`: one list call per
  100 watched jobs a round), its log lines from the shared log poller
  (:mod:`airflow_aip.triggers.log_polling`: one ``entries.list`` per project and round,
  within ``[aip] log_reads_per_minute``). It never blocks the event loop.
- It yields exactly one event, ``{status, message, job_id, project_id, state, summary}``;
  status is ``success`` only for SUCCEEDED, ``failed``/``cancelled`` for the other ends,
  ``timeout`` past the deadline and ``error`` when the job cannot be read for a reason that is
  not transient (403, 404...). Waiting is observation only: transient errors (429, 5xx, dropped
  connections, timeouts) are ridden out with backoff until the deadline, logged once when the
  outage starts and once when it ends, and an ``error`` event never cancels the job.
- The deadline is an absolute UNIX time: a triggerer restart re-creates the trigger from
  ``serialize()`` and the deadline does not move.
- ``on_kill`` (Airflow calls it only when a user kills, clears or marks the deferred task;
  never on triggerer restarts, redistribution or timeouts) cancels the job when
  ``cancel_on_kill`` is set: a killed task never leaves its job running and billing.
- No side effects in ``run()``: a trigger may run more than once.
- ``stream_logs``: the job's new Cloud Logging lines are logged with ``self.log`` as the
  shared log poller reads them, and once the job ended the last ones are drained before the
  one event. They are
  log lines, never events. In Airflow 3 the triggerer writes each trigger's records (tagged
  with its trigger id) to ``<task log>.trigger.<triggerer id>.log`` beside the task's log,
  and the UI shows that file in the task try's log view: the lines appear under the task
  while it is deferred. The cursor starts at ``log_cursor`` (where the task left off before
  deferring, else the job's createTime); a restarted triggerer rebuilds the trigger from its
  kwargs, so it starts there again: nothing is lost, lines already shown may be shown again
  (after a "Streaming logs ... from" line that says where it restarted).
- ``release_at``: no event before this UNIX time, the deferral's plus ``[aip] deferral_hold``
  (:mod:`airflow_aip.triggers.hold`: Airflow's executor-event race, apache/airflow#67287).
- ``masked_values``: the secrets the task masked that occur in the job's request (see
  ``airflow_aip.masking``); registered with the triggerer's masker before any line is logged,
  so a job echoing its arguments is masked here as it is in the worker.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from airflow.triggers.base import TriggerEvent

from airflow_aip.jobs.budget import Budget, Guard
from airflow_aip.jobs.logs import DEFAULT_LINES_PER_MINUTE, LogCursor, LogStream
from airflow_aip.jobs.mlv1.view import ml_job_name
from airflow_aip.jobs.pricing import PriceTable
from airflow_aip.jobs.view import AI_PLATFORM
from airflow_aip.jobs.waiting import job_event, summary_from_event
from airflow_aip.masking import amask_values
from airflow_aip.triggers.connected import ConnectedTrigger
from airflow_aip.triggers.hold import hold_event

__all__ = ["CLASSPATH", "TrainingJobTrigger", "job_event", "summary_from_event", "trigger_event"]

CLASSPATH = "airflow_aip.triggers.training.TrainingJobTrigger"


def trigger_event(payload: dict[str, Any]) -> TriggerEvent:
    """A TriggerEvent (a typed wrapper: airflow.triggers.base is untyped)."""
    return TriggerEvent(payload)  # type: ignore[no-untyped-call]


class TrainingJobTrigger(ConnectedTrigger):
    """Poll one training job until it ends, the deadline passes, or it cannot be read (not transiently).

    :param job_id: the job to watch (our ID: messages and events name it).
    :param job_name: its resource name, which the backend reads it by.
    :param poll_interval: seconds between polls.
    :param end_time: UNIX time after which a ``timeout`` event is yielded (None: no deadline).
    :param cancel_on_kill: cancel the job when a user kills the deferred task.
    :param stream_logs: log the job's log lines while waiting (see the module docstring).
    :param log_cursor: where the log stream starts (``LogCursor.to_json()``; None: createTime).
    :param max_log_lines_per_minute: cap on those lines; the count of lines dropped is logged.
    :param masked_values: secrets to mask in everything this trigger logs.
    :param queued_limit: seconds the job may stay QUEUED before a ``queued`` event (a capacity
        ladder's rung: the task then cancels it and tries the next rung); None: no limit.
    :param release_at: UNIX time before which the event is held (None: at once); see
        :mod:`airflow_aip.triggers.hold`.
    :param budget: the task's budget (``Budget.to_json()``; None: costs are only logged): past
        it, an ``over_budget`` event, and the task cancels the job once
        (:mod:`airflow_aip.jobs.budget`).
    :param spent_before: what earlier tries of the same run spent (the task read it back from
        their jobs); it counts against the budget.

    The job's API, as the task's (:class:`~airflow_aip.hooks.job_reference.JobConnection`): its
    ``project_id`` is resolved by the task before deferring; its ``region`` is the job's (Vertex
    AI's endpoints are regional), None by default; its ``backend`` is "ai_platform" by default, for
    triggers serialized before Vertex AI was served (they always watched ml v1 jobs).
    """

    serialized_fields = (
        "job_id",
        "job_name",
        "poll_interval",
        "end_time",
        "cancel_on_kill",
        "stream_logs",
        "log_cursor",
        "max_log_lines_per_minute",
        "masked_values",
        "queued_limit",
        "release_at",
        "budget",
        "spent_before",
    )

    def __init__(
        self,
        *,
        job_id: str,
        job_name: str | None = None,
        poll_interval: float = 30.0,
        end_time: float | None = None,
        cancel_on_kill: bool = True,
        stream_logs: bool = True,
        log_cursor: dict[str, Any] | None = None,
        max_log_lines_per_minute: int = DEFAULT_LINES_PER_MINUTE,
        masked_values: Sequence[str] = (),
        queued_limit: float | None = None,
        release_at: float | None = None,
        budget: dict[str, Any] | None = None,
        spent_before: float = 0.0,
        **connection: Any,
    ) -> None:
        super().__init__(**connection)
        self.job_id = job_id
        self.job_name = job_name or ml_job_name(self.project_id, job_id)
        self.poll_interval = poll_interval
        self.end_time = end_time
        self.cancel_on_kill = cancel_on_kill
        self.stream_logs = stream_logs
        self.log_cursor = log_cursor
        self.max_log_lines_per_minute = max_log_lines_per_minute
        self.masked_values = list(masked_values)
        self.queued_limit = queued_limit
        self.release_at = release_at
        self.budget = budget
        self.spent_before = spent_before

    def default_backend(self) -> str:
        return AI_PLATFORM

    def default_region(self) -> str | None:
        return None

    @classmethod
    def for_task(
        cls,
        task: Any,
        *,
        job_id: str,
        job_name: str,
        project_id: str,
        poll_interval: float,
        end_time: float | None,
        masked_values: Sequence[str],
        log_cursor: dict[str, Any] | None = None,
        region: str | None = None,
        queued_limit: float | None = None,
        release_at: float | None = None,
        budget: dict[str, Any] | None = None,
        spent_before: float = 0.0,
    ) -> TrainingJobTrigger:
        """The trigger a waiting task defers to: its job API and its wait settings, handed on whole.

        ``region``: where the job is, when a capacity ladder's rung moved it from the task's.
        """
        api = {**task.job_api_arguments, **({"region": region} if region else {})}
        return cls(
            job_id=job_id,
            job_name=job_name,
            project_id=project_id,
            **api,
            queued_limit=queued_limit,
            poll_interval=poll_interval,
            end_time=end_time,
            cancel_on_kill=task.cancel_on_kill,
            stream_logs=task.stream_logs,
            log_cursor=log_cursor,
            max_log_lines_per_minute=task.max_log_lines_per_minute,
            masked_values=masked_values,
            release_at=release_at,
            budget=budget,
            spent_before=spent_before,
        )

    def __repr__(self) -> str:
        """BaseTrigger's repr shows every kwarg: the masked values are shown as what they are."""
        classpath, kwargs = self.serialize()
        return str(self.repr(classpath, {**kwargs, "masked_values": ["***"] * len(self.masked_values)}))

    async def run(self) -> AsyncIterator[TriggerEvent]:
        wait = self.waiting(
            self.job_id,
            self.job_name,
            lambda: self.wait_hook,
            logs_hook=self.poll_logs_hook if self.stream_logs else None,  # a hook per trigger costs memory
            stream_for=self._log_stream if self.stream_logs else None,
            queued_limit=self.queued_limit,
            guard=Guard(PriceTable.load(), Budget.from_json(self.budget), self.spent_before),
        )
        try:
            await amask_values(self.masked_values)
            event = await wait.run()
        except Exception as err:  # a bug of ours fails the task with its reason, not a traceback
            event = {
                "status": "error",
                "message": f"{type(err).__name__}: {err}",
                "job_id": self.job_id,
                "job_name": self.job_name,
                "project_id": self.project_id,
                "state": wait.state.state.value,
                "summary": None,
            }
        await hold_event(self.release_at, self.log, f"Training job {self.job_id}")
        yield trigger_event(event)

    def _log_stream(self, job: Mapping[str, Any]) -> LogStream:
        cursor = LogCursor.from_json(self.log_cursor)
        stream = LogStream.for_job(
            str(job["log_id"]), job.get("create_time"), cursor, lines_per_minute=self.max_log_lines_per_minute
        )
        start = stream.cursor.timestamp or "the start"
        self.log.info("Streaming logs of training job %s from %s", self.job_id, start)
        return stream

    async def on_kill(self) -> None:
        """The user killed the deferred task: cancel the job if asked to."""
        if not self.cancel_on_kill:
            return
        self.log.info("Deferred task killed: cancelling training job %s", self.job_id)
        await self.hook.acancel(self.job_name)

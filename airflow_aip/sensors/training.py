"""Wait for an existing training job: poke, reschedule or deferrable, same summary as the operator.

A FAILED or CANCELLED job never recovers, so the sensor fails without retries
(AirflowFailException: ``soft_fail`` turns it into a skip, as for any sensor). Deferrable mode
checks once, then hands the wait to the same TrainingJobTrigger the operator uses.

The sensor may watch a job it does not own (another DAG's, a person's), so it cancels the job
when it is killed only if ``cancel_on_kill=True``: in poke mode (``on_kill``), in deferrable
mode (the trigger's ``on_kill``) and in reschedule mode while a poke runs. Between two pokes of
reschedule mode no process exists to be killed: for that, add a teardown that cancels the job,
``CancelTrainingJobOperator(...).as_teardown(setups=submit)``; it runs when the sensor ends,
however it ended, and is a no-op for a job that already ended.

Waiting is observation only, as for the operator (``airflow_aip.jobs.waiting``): an API outage
(429, 5xx, dropped connections) never fails or cancels anything; any other error reading the
job fails the task and leaves the job alone. Its timeout (Airflow's ``timeout``) fails the
sensor without cancelling: the job may not be its own. How each mode waits:

- poke: the one poke is the whole wait, the sync runner of the wait step, as the operator
  waits in the worker (backoff during an outage, logged once when it starts and once when it
  ends, the deadline ``timeout``); Airflow's sensor machinery (soft_fail, never_fail) wraps it.
- deferrable: one check, then the same TrainingJobTrigger as the operator's (it rides out
  outages the same way; a check that met one defers all the same).
- reschedule: each poke is one read in a process of its own, which remembers nothing of the
  pokes before: a poke that meets a transient error logs it (once: it is that poke's only
  read) and returns not-done, leaving the job alone; Airflow pokes again after
  ``poke_interval`` (``exponential_backoff=True`` grows it). So an outage spanning k pokes is
  logged k times, once per poke, and its end is the next poke's usual state line: keeping
  outage bookkeeping across pokes would need state Airflow clears at every poke (XCom).

``stream_logs`` (default) copies the job's log lines into the task log: in poke mode at each
read (the cursor lives on the sensor, so each line is shown once), in deferrable mode by the
trigger from where the check before deferring left off. In reschedule mode each poke runs in a new process
that remembers nothing, so the lines are shown once, when the job has ended, rather than
repeated or skipped at every poke.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import cached_property
from typing import Any

from airflow.sdk import BaseSensorOperator, Context, PokeReturnValue

from airflow_aip import config
from airflow_aip.compat import AirflowFailException, AirflowSensorTimeout
from airflow_aip.exceptions import BudgetExceededError, JobFailedError, JobWaitTimeoutError
from airflow_aip.hooks.waiting import SyncWait
from airflow_aip.jobs.logs import check_lines_per_minute
from airflow_aip.links import TrainingJobConsoleLink
from airflow_aip.masking import masked_values_in
from airflow_aip.operators.connected import BudgetedJobOperator
from airflow_aip.operators.watching import TaskWatch, WaitPolicy


class TrainingJobSensor(BudgetedJobOperator, BaseSensorOperator):
    """Succeeds when the job is SUCCEEDED and returns its summary; fails when it ends otherwise.

    :param job_id: our job ID (on Vertex AI: looked up by its label and displayName) or the
        job's resource name (``projects/.../locations/.../hyperparameterTuningJobs/123``).
    :param backend: "vertex" (default ``[aip] backend``) or "ai_platform".
    :param region: the job's location on Vertex AI (default ``[aip] region``; a resource
        name carries its own).
    :param poke_interval: seconds between checks (default ``[aip] poll_interval``).
    :param stream_logs: copy the job's log lines (Cloud Logging) into the task log while waiting.
    :param max_log_lines_per_minute: cap on those lines; the count of lines dropped is logged.
    :param cancel_on_kill: cancel the job when a user kills this task (see the module docstring).
    :param budget: at most this much for the job, in the price table's currency: checked at each
        read (each poke, or in the triggerer); past it, the job is cancelled once and the sensor
        fails (no retry) with the estimate, the budget and the table's date. None: costs are
        logged only. ``budget_currency``: must be the table's (default: it).

    The connection's arguments: :class:`~airflow_aip.hooks.job_reference.JobConnection`.
    """

    template_fields: Sequence[str] = (
        "backend",
        "job_id",
        "project_id",
        "region",
        "gcp_conn_id",
        "api_endpoint",
        "impersonation_chain",
        "budget",
    )
    operator_extra_links = (TrainingJobConsoleLink(),)
    ui_color = "#d2e3fc"

    def __init__(
        self,
        *,
        job_id: str,
        deferrable: bool = config.default_deferrable(),
        poke_interval: float = config.poll_interval(),
        stream_logs: bool = True,
        max_log_lines_per_minute: int = config.max_log_lines_per_minute(),
        cancel_on_kill: bool = False,
        budget: float | str | None = None,
        budget_currency: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(poke_interval=poke_interval, **kwargs)
        self.budget = budget
        self.budget_currency = budget_currency
        self.refuse_over_budget = False
        self.job_id = job_id
        self.deferrable = deferrable
        self.stream_logs = stream_logs
        self.max_log_lines_per_minute = max_log_lines_per_minute
        self.cancel_on_kill = cancel_on_kill
        self._job_name: str | None = None

    @property
    def job_name(self) -> str:
        """The watched job's resource name (looked up once per process)."""
        if self._job_name is None:
            self._job_name = self.job_name_for(self.job_id)
        return self._job_name

    @cached_property
    def watch(self) -> TaskWatch:
        """The sensor's watch over the job, kept across pokes of one process (its log stream too)."""
        policy = WaitPolicy(
            deferrable=self.deferrable,
            poll_interval=float(self.poke_interval),
            wait_timeout=self.timeout,
            cancel_on_kill=self.cancel_on_kill,
            stream_logs=self.stream_logs,
            max_log_lines_per_minute=self.max_log_lines_per_minute,
            budget=self.checked_budget(),
        )
        return TaskWatch(self, self.job_api, policy, clock=time.time)

    def execute(self, context: Context) -> Any:
        check_lines_per_minute(self.max_log_lines_per_minute)
        self.checked_budget()  # a bad budget fails before anything is read
        self.watch.say_what_core_lacks()
        name = self.job_name
        project = self.hook.project_id
        self.watch.announce(context, self.job_id, name, project, self.console_url_for(name, self.job_id))
        if not self.deferrable:
            return super().execute(context)
        wait = self._wait(project, deadline=None)
        checked = wait.observe()
        if checked.done:
            return self._outcome(wait.event(checked))
        self.watch.defer(
            job_id=self.job_id,
            job_name=name,
            project_id=project,
            masked_values=masked_values_in(wait.last_job.get("spec")),
            log_cursor=self.watch.cursor(),
        )

    def poke(self, context: Context) -> PokeReturnValue:
        """Reschedule mode: one read. Poke mode: the whole wait (see the module docstring)."""
        project = self.hook.project_id
        if not self.reschedule:
            wait = self._wait(project, deadline=time.time() + self.timeout)
            return PokeReturnValue(is_done=True, xcom_value=self._outcome(wait.run()))
        wait = self._wait(project, deadline=None, follow_while_running=False)
        checked = wait.observe()
        if not checked.done:
            return PokeReturnValue(is_done=False)
        return PokeReturnValue(is_done=True, xcom_value=self._outcome(wait.event(checked)))

    def _wait(self, project: str, *, deadline: float | None, follow_while_running: bool = True) -> SyncWait:
        return self.watch.wait(
            self.wait_hook,
            self.job_id,
            self.job_name,
            project,
            deadline=deadline,
            follow_while_running=follow_while_running,
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        return self._outcome(event)

    def on_kill(self) -> None:
        """Killed while poking (deferred kills: the trigger's on_kill): cancel the job if asked to."""
        if self.cancel_on_kill:
            self.watch.cancel(self.job_name, self.project_id, reason="task killed")

    def _outcome(self, event: dict[str, Any]) -> dict[str, Any]:
        """The summary, or the job's ending as a sensor's: no retry, or a sensor timeout (never a cancel)."""
        try:
            return self.watch.finish(event, cancel_on_timeout=False)
        except JobFailedError as err:
            raise AirflowFailException(str(err)) from err
        except JobWaitTimeoutError as err:
            raise AirflowSensorTimeout(str(err)) from err
        except BudgetExceededError as err:
            raise AirflowFailException(str(err)) from err

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

``stream_logs`` (default) copies the job's log lines into the task log: in poke mode at each
poke (the cursor lives on the sensor, so each line is shown once), in deferrable mode by the
trigger from where the first poke left off. In reschedule mode each poke runs in a new process
that remembers nothing, so the lines are shown once, when the job has ended, rather than
repeated or skipped at every poke.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator, Context, PokeReturnValue, conf
from airflow.sdk.exceptions import AirflowFailException, AirflowSensorTimeout

from airflow_aip.exceptions import JobFailedError, JobWaitTimeoutError
from airflow_aip.hooks.base import DEFAULT_CONN_ID
from airflow_aip.hooks.job_reference import JobHooksMixin
from airflow_aip.hooks.training import cancel_quietly
from airflow_aip.jobs import JobState, console_url, validate_job_id
from airflow_aip.jobs.logs import DRAIN_INTERVAL, LogStream, check_lines_per_minute
from airflow_aip.links import CONSOLE_URL_XCOM_KEY, JOB_ID_XCOM_KEY, TrainingJobConsoleLink
from airflow_aip.masking import masked_values_in
from airflow_aip.triggers.training import TrainingJobTrigger, job_event, summary_from_event

DEFERRAL_TIMEOUT_MARGIN = 120.0


class TrainingJobSensor(JobHooksMixin, BaseSensorOperator):
    """Succeeds when the job is SUCCEEDED and returns its summary; fails when it ends otherwise.

    :param poke_interval: seconds between checks (default ``[aip] poll_interval``).
    :param stream_logs: copy the job's log lines (Cloud Logging) into the task log while waiting.
    :param max_log_lines_per_minute: cap on those lines; the count of lines dropped is logged.
    :param cancel_on_kill: cancel the job when a user kills this task (see the module docstring).
    """

    template_fields: Sequence[str] = ("job_id", "project_id", "gcp_conn_id", "api_endpoint")
    operator_extra_links = (TrainingJobConsoleLink(),)
    ui_color = "#d2e3fc"

    def __init__(
        self,
        *,
        job_id: str,
        project_id: str | None = None,
        gcp_conn_id: str = DEFAULT_CONN_ID,
        api_endpoint: str | None = None,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        poke_interval: float = conf.getint("aip", "poll_interval", fallback=30),
        stream_logs: bool = True,
        max_log_lines_per_minute: int = conf.getint("aip", "max_log_lines_per_minute", fallback=1000),
        cancel_on_kill: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(poke_interval=poke_interval, **kwargs)
        self.job_id = job_id
        self.project_id = project_id
        self.gcp_conn_id = gcp_conn_id
        self.api_endpoint = api_endpoint
        self.deferrable = deferrable
        self.stream_logs = stream_logs
        self.max_log_lines_per_minute = max_log_lines_per_minute
        self.cancel_on_kill = cancel_on_kill
        self._log_stream: LogStream | None = None  # across pokes of one process (poke mode)
        self._last_seen: dict[str, Any] = {}  # the job as the last poke read it

    def execute(self, context: Context) -> Any:
        job_id = validate_job_id(self.job_id)
        check_lines_per_minute(self.max_log_lines_per_minute)
        project = self.hook.project_id
        context["ti"].xcom_push(key=JOB_ID_XCOM_KEY, value=job_id)
        context["ti"].xcom_push(key=CONSOLE_URL_XCOM_KEY, value=console_url(project, job_id))
        if not self.deferrable:
            return super().execute(context)
        checked = self.poke(context)
        if checked:
            return checked.xcom_value
        self.defer(
            trigger=TrainingJobTrigger(
                job_id=job_id,
                project_id=project,
                gcp_conn_id=self.gcp_conn_id,
                api_endpoint=self.api_endpoint,
                poll_interval=self.poke_interval,
                end_time=time.time() + self.timeout,
                cancel_on_kill=self.cancel_on_kill,
                stream_logs=self.stream_logs,
                log_cursor=self._log_stream.cursor.to_json() if self._log_stream else None,
                max_log_lines_per_minute=self.max_log_lines_per_minute,
                masked_values=masked_values_in(self._last_seen.get("trainingInput")),
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout + DEFERRAL_TIMEOUT_MARGIN),
        )

    def poke(self, context: Context) -> PokeReturnValue:
        project = self.hook.project_id
        job = self._last_seen = self.hook.get_job(self.job_id, project)
        state = JobState.parse(job.get("state"))
        self.log.info("Training job %s is %s", self.job_id, state.value)
        if self.stream_logs and (state.is_terminal or not self.reschedule):
            self._show_logs(job, project, ended=state.is_terminal)
        if not state.is_terminal:
            return PokeReturnValue(is_done=False)
        return PokeReturnValue(is_done=True, xcom_value=self._outcome(job_event(job, project)))

    def _show_logs(self, job: dict[str, Any], project: str, *, ended: bool) -> None:
        stream = self._log_stream
        if stream is None:
            stream = self._log_stream = LogStream.for_job(
                self.job_id, job.get("createTime"), lines_per_minute=self.max_log_lines_per_minute
            )
        if not ended:
            self.logs_hook.follow(stream, self.log, project)
            return
        interval = min(float(self.poke_interval), DRAIN_INTERVAL)
        self.logs_hook.drain(stream, self.log, project, interval=interval)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        return self._outcome(event)

    def on_kill(self) -> None:
        """Killed while poking (deferred kills: the trigger's on_kill): cancel the job if asked to."""
        if not self.cancel_on_kill:
            return
        cancel_quietly(
            self.job_id,
            self.project_id,
            gcp_conn_id=self.gcp_conn_id,
            api_endpoint=self.api_endpoint,
            reason="task killed",
            log=self.log,
        )

    @staticmethod
    def _outcome(event: dict[str, Any]) -> dict[str, Any]:
        try:
            return summary_from_event(event)
        except JobFailedError as err:
            raise AirflowFailException(str(err)) from err
        except JobWaitTimeoutError as err:
            raise AirflowSensorTimeout(str(err)) from err

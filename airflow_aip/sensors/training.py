"""Wait for an existing training job: poke, reschedule or deferrable, same summary as the operator.

A FAILED or CANCELLED job never recovers, so the sensor fails without retries
(AirflowFailException: ``soft_fail`` turns it into a skip, as for any sensor). Deferrable mode
checks once, then hands the wait to the same TrainingJobTrigger the operator uses. The sensor
does not own the job, so it never cancels it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import timedelta
from functools import cached_property
from typing import Any

from airflow.sdk import BaseSensorOperator, Context, PokeReturnValue, conf
from airflow.sdk.exceptions import AirflowFailException, AirflowSensorTimeout

from airflow_aip.exceptions import JobFailedError, JobWaitTimeoutError
from airflow_aip.hooks.base import DEFAULT_CONN_ID
from airflow_aip.hooks.training import TrainingJobHook
from airflow_aip.jobs import JobState, console_url, validate_job_id
from airflow_aip.links import CONSOLE_URL_XCOM_KEY, JOB_ID_XCOM_KEY, TrainingJobConsoleLink
from airflow_aip.triggers.training import TrainingJobTrigger, job_event, summary_from_event

DEFERRAL_TIMEOUT_MARGIN = 120.0


class TrainingJobSensor(BaseSensorOperator):
    """Succeeds when the job is SUCCEEDED and returns its summary; fails when it ends otherwise.

    :param poke_interval: seconds between checks (default ``[aip] poll_interval``).
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
        **kwargs: Any,
    ) -> None:
        super().__init__(poke_interval=poke_interval, **kwargs)
        self.job_id = job_id
        self.project_id = project_id
        self.gcp_conn_id = gcp_conn_id
        self.api_endpoint = api_endpoint
        self.deferrable = deferrable

    @cached_property
    def hook(self) -> TrainingJobHook:
        return TrainingJobHook(self.gcp_conn_id, project_id=self.project_id, api_endpoint=self.api_endpoint)

    def execute(self, context: Context) -> Any:
        job_id = validate_job_id(self.job_id)
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
                cancel_on_kill=False,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout + DEFERRAL_TIMEOUT_MARGIN),
        )

    def poke(self, context: Context) -> PokeReturnValue:
        project = self.hook.project_id
        job = self.hook.get_job(self.job_id, project)
        state = JobState.parse(job.get("state"))
        self.log.info("Training job %s is %s", self.job_id, state.value)
        if not state.is_terminal:
            return PokeReturnValue(is_done=False)
        return PokeReturnValue(is_done=True, xcom_value=self._outcome(job_event(job, project)))

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        return self._outcome(event)

    @staticmethod
    def _outcome(event: dict[str, Any]) -> dict[str, Any]:
        try:
            return summary_from_event(event)
        except JobFailedError as err:
            raise AirflowFailException(str(err)) from err
        except JobWaitTimeoutError as err:
            raise AirflowSensorTimeout(str(err)) from err

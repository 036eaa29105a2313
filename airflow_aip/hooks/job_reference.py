"""The hooks of one job reference, for the operators, the sensor and the trigger that address a job.

Each of them is told a job by the same three arguments (connection, project, ml endpoint) and
builds the same two hooks from them, lazily (never at DAG parse) and once per task process or
trigger instance.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from airflow_aip.hooks.logs import JobLogsHook
from airflow_aip.hooks.training import TrainingJobHook


class JobHooksMixin:
    """``hook`` (ml v1) and ``logs_hook`` (Cloud Logging) of the job's connection, project, endpoint."""

    gcp_conn_id: str
    project_id: str | None
    api_endpoint: str | None
    impersonation_chain: str | list[str] | None = None

    @property
    def job_api_arguments(self) -> dict[str, Any]:
        """How this task reaches the job's API, as handed on to its trigger and to a cancel."""
        return {
            "gcp_conn_id": self.gcp_conn_id,
            "api_endpoint": self.api_endpoint,
            "impersonation_chain": self.impersonation_chain,
        }

    @cached_property
    def hook(self) -> TrainingJobHook:
        return self._training_hook()

    @cached_property
    def wait_hook(self) -> TrainingJobHook:
        """``hook`` trying each request once, for waiting: the wait step owns outage policy."""
        return self._training_hook(retry_attempts=1)

    def _training_hook(self, **retry: Any) -> TrainingJobHook:
        return TrainingJobHook(
            self.gcp_conn_id,
            project_id=self.project_id,
            api_endpoint=self.api_endpoint,
            impersonation_chain=self.impersonation_chain,
            **retry,
        )

    @cached_property
    def logs_hook(self) -> JobLogsHook:
        """The job's logs: from the ml endpoint when it is an emulator, else from Cloud Logging."""
        return JobLogsHook(
            self.gcp_conn_id,
            project_id=self.project_id,
            ml_api_endpoint=self.api_endpoint,
            impersonation_chain=self.impersonation_chain,
        )

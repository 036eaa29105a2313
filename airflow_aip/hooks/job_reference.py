"""The hooks of one job reference, for the operators, the sensor and the trigger that address a job.

Each of them is told a job by the same arguments (connection, project, endpoint, identity,
backend, region) and builds the same hooks from them, lazily (never at DAG parse) and once per
task process or trigger instance. The job hook is the backend's (:class:`TrainingJobHook` for
ml v1, :class:`VertexJobHook` for Vertex AI); both offer the same neutral methods (``find_job``,
``create``, ``read``/``aread``, ``cancel``/``acancel``, ``resolve``) and answer job views.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.hooks.logs import JobLogsHook
from airflow_aip.hooks.training import ENDPOINT_ENV as ML_ENDPOINT_ENV
from airflow_aip.hooks.training import TrainingJobHook
from airflow_aip.hooks.vertex import ENDPOINT_ENV as VERTEX_ENDPOINT_ENV
from airflow_aip.hooks.vertex import VertexJobHook
from airflow_aip.jobs.ids import validate_job_id
from airflow_aip.jobs.summary import google_console_url
from airflow_aip.jobs.vertex.view import parse_name
from airflow_aip.jobs.view import AI_PLATFORM, VERTEX, check_backend

JobHook = TrainingJobHook | VertexJobHook


def job_hook(
    backend: str,
    *,
    gcp_conn_id: str,
    project_id: str | None,
    api_endpoint: str | None,
    impersonation_chain: str | list[str] | None,
    region: str | None,
    **retry: Any,
) -> JobHook:
    """The backend's job hook."""
    common: dict[str, Any] = {
        "project_id": project_id,
        "api_endpoint": api_endpoint,
        "impersonation_chain": impersonation_chain,
        **retry,
    }
    if check_backend(backend) == AI_PLATFORM:
        return TrainingJobHook(gcp_conn_id, **common)
    if not region:
        raise ValidationError(
            "region", "is required on Vertex AI (its endpoints are regional), e.g. us-central1"
        )
    return VertexJobHook(gcp_conn_id, region=region, **common)


class JobHooksMixin:
    """``hook`` (the backend's jobs) and ``logs_hook`` (Cloud Logging) of one job reference."""

    gcp_conn_id: str
    project_id: str | None
    api_endpoint: str | None
    impersonation_chain: str | list[str] | None = None
    backend: str = VERTEX
    region: str | None = None

    @property
    def job_api_arguments(self) -> dict[str, Any]:
        """How this task reaches the job's API, as handed on to its trigger and to a cancel."""
        return {
            "gcp_conn_id": self.gcp_conn_id,
            "api_endpoint": self.api_endpoint,
            "impersonation_chain": self.impersonation_chain,
            "backend": self.backend,
            "region": self.region,
        }

    @property
    def poller_key(self) -> tuple[Any, ...]:
        """Who may share a job poller in a triggerer: one API, endpoint, identity, project, region."""
        chain = self.impersonation_chain
        chain_key = (chain,) if isinstance(chain, str) else tuple(chain or ())
        return (self.backend, self.gcp_conn_id, self.api_endpoint, chain_key, self.project_id, self.region)

    def job_name_for(self, reference: str) -> str:
        """The resource name of a job given by our job ID or by its resource name.

        A Vertex AI name carries its location, which becomes this task's ``region`` (before
        the hook is built: the endpoint is regional); our ID is looked up (label, displayName).
        """
        if not isinstance(reference, str) or not reference:
            raise ValidationError("job_id", f"must be a job ID or a resource name, got {reference!r}")
        if reference.startswith("projects/"):
            if self.backend == VERTEX:
                try:
                    self.region = parse_name(reference)[1]
                except ValueError as err:
                    raise ValidationError("job_id", str(err)) from None
                self.__dict__.pop("hook", None)
                self.__dict__.pop("wait_hook", None)
            return reference
        if self.backend == AI_PLATFORM:
            validate_job_id(reference)
        return self.hook.resolve(reference)

    def console_url_for(self, name: str, job_id: str) -> str | None:
        """The job's page without reading it: the local service's own page, or Google's console."""
        local = self.hook.local_page(name)
        if local:
            return local
        view = {"backend": self.backend, "name": name, "job_id": job_id, "region": self.region}
        return google_console_url({**view, "project_id": self.hook.project_id})

    @cached_property
    def hook(self) -> JobHook:
        return self._job_hook()

    @cached_property
    def wait_hook(self) -> JobHook:
        """``hook`` trying each request once, for waiting: the wait step owns outage policy."""
        return self._job_hook(retry_attempts=1)

    def _job_hook(self, **retry: Any) -> JobHook:
        return job_hook(
            self.backend,
            gcp_conn_id=self.gcp_conn_id,
            project_id=self.project_id,
            api_endpoint=self.api_endpoint,
            impersonation_chain=self.impersonation_chain,
            region=self.region,
            **retry,
        )

    @cached_property
    def logs_hook(self) -> JobLogsHook:
        """The job's logs: from the job API's endpoint when it is an emulator, else from Cloud Logging."""
        return self._logs_hook()

    @cached_property
    def poll_logs_hook(self) -> JobLogsHook:
        """``logs_hook`` trying each read once, for the triggerer's shared log poller: a failed
        read is made again next round, within the budget; retries inside a read would not be."""
        return self._logs_hook(retry_attempts=1)

    def _logs_hook(self, **retry: Any) -> JobLogsHook:
        return JobLogsHook(
            self.gcp_conn_id,
            project_id=self.project_id,
            ml_api_endpoint=self.api_endpoint,
            impersonation_chain=self.impersonation_chain,
            job_endpoint_env=ML_ENDPOINT_ENV if self.backend == AI_PLATFORM else VERTEX_ENDPOINT_ENV,
            **retry,
        )


def cancel_quietly(name: str, *, project_id: str | None, reason: str, log: Any, **api: Any) -> None:
    """Cancel a job for a task that is being killed or gives up: log, never raise.

    ``api`` is a task's ``job_api_arguments``. A fresh hook, because ``on_kill`` runs in a
    signal handler, maybe in the middle of a request on the task's own hook's client; never
    raising, because the kill must go on either way.
    """
    log.warning("Cancelling training job %s (%s)", name, reason)
    try:
        job_hook(project_id=project_id, **api).cancel(name)
    except Exception:
        log.exception("Could not cancel training job %s", name)

"""How a task reaches its job's API, as one immutable value, and the hooks built from it.

The operators, the sensor and the trigger address a job by the same arguments (connection,
endpoint, identity, backend, project, region). :class:`JobApi` holds them once per task process
or trigger instance, read when the task runs (never at DAG parse), with the region the job
really lives in: a Vertex AI resource name carries its location, and a submit's request its
region. The hooks are built from that value, lazily and once; the task's template fields are
never rewritten.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.hooks.logs import JobLogsHook
from airflow_aip.hooks.training import TrainingJobHook
from airflow_aip.hooks.vertex import VertexJobHook
from airflow_aip.jobs.backends import backend_named
from airflow_aip.jobs.summary import google_console_url
from airflow_aip.jobs.view import AI_PLATFORM, VERTEX

if TYPE_CHECKING:
    from airflow_aip.hooks.job_client import JobClient


def job_hook(
    backend: str,
    *,
    gcp_conn_id: str,
    project_id: str | None,
    api_endpoint: str | None,
    impersonation_chain: str | list[str] | None,
    region: str | None,
    **retry: Any,
) -> JobClient:
    """The backend's job hook."""
    common: dict[str, Any] = {
        "project_id": project_id,
        "api_endpoint": api_endpoint,
        "impersonation_chain": impersonation_chain,
        **retry,
    }
    if backend_named(backend).name == AI_PLATFORM:
        return TrainingJobHook(gcp_conn_id, **common)
    if not region:
        raise ValidationError(
            "region", "is required on Vertex AI (its endpoints are regional), e.g. us-central1"
        )
    return VertexJobHook(gcp_conn_id, region=region, **common)


#: A job API's fields, in the order :class:`JobApi` takes them.
API_FIELDS = ("backend", "gcp_conn_id", "api_endpoint", "impersonation_chain", "project_id", "region")


def chain_key(chain: str | Sequence[str] | None) -> tuple[str, ...]:
    """An impersonation chain as a hashable key: one account or a list of them, the same either way."""
    return (chain,) if isinstance(chain, str) else tuple(chain or ())


@dataclass(frozen=True)
class JobApi:
    """Where and as whom one task reaches its job: an immutable value, with its hooks built once."""

    backend: str
    gcp_conn_id: str
    api_endpoint: str | None
    impersonation_chain: str | list[str] | None
    project_id: str | None
    region: str | None

    def addressing(self, reference: object) -> JobApi:
        """This API for a job given by ``reference``: a resource name's own location wins."""
        if not isinstance(reference, str) or not reference.startswith("projects/"):
            return self
        try:
            location = backend_named(self.backend).location_of(reference)
        except ValueError as err:
            raise ValidationError("job_id", str(err)) from None
        return replace(self, region=location) if location else self

    def to_json(self) -> dict[str, Any]:
        """The one serialisation of a job API: what a trigger, a cancel and the UI rebuild it from."""
        return {field: getattr(self, field) for field in API_FIELDS}

    @classmethod
    def from_json(cls, value: object) -> JobApi | None:
        """The API :meth:`to_json` (or a pushed :meth:`for_job`) wrote; None for any other shape."""
        if not isinstance(value, Mapping):
            return None
        if not isinstance(value.get("gcp_conn_id"), str) or not isinstance(value.get("backend"), str):
            return None
        fields: dict[str, Any] = {field: value.get(field) for field in API_FIELDS}
        return cls(**fields)

    def for_job(self, name: str, project_id: str | None) -> dict[str, Any]:
        """The ``aip_job_api`` XCom: the job's resource name and how to reach it (the live tab reads it)."""
        return {"name": name, **replace(self.addressing(name), project_id=project_id).to_json()}

    @property
    def arguments(self) -> dict[str, Any]:
        """How this task reaches the job's API, less the project, which its callers pass apart."""
        return {k: v for k, v in self.to_json().items() if k != "project_id"}

    @property
    def poller_key(self) -> tuple[Any, ...]:
        """Who may share a job poller in a triggerer: one API, endpoint, identity, project, region."""
        chain = chain_key(self.impersonation_chain)
        return (self.backend, self.gcp_conn_id, self.api_endpoint, chain, self.project_id, self.region)

    def job_hook(self, **retry: Any) -> JobClient:
        return job_hook(project_id=self.project_id, **self.arguments, **retry)

    def logs_hook(self, **retry: Any) -> JobLogsHook:
        """The job's logs: from the job API's endpoint when it is an emulator, else Cloud Logging."""
        return JobLogsHook(
            self.gcp_conn_id,
            project_id=self.project_id,
            ml_api_endpoint=self.api_endpoint,
            impersonation_chain=self.impersonation_chain,
            job_endpoint_env=backend_named(self.backend).endpoint_env,
            **retry,
        )


class JobHooksMixin:
    """``job_api`` and its hooks, for a task (or trigger) that addresses one job."""

    gcp_conn_id: str
    project_id: str | None
    api_endpoint: str | None
    impersonation_chain: str | list[str] | None = None
    backend: str = VERTEX
    region: str | None = None

    def job_region(self) -> str | None:
        """The region the task's job API is in: its ``region``, unless the job says otherwise."""
        return self.region

    @cached_property
    def job_api(self) -> JobApi:
        """This task's job API, read once when it runs (a resource name's location included)."""
        api = JobApi(
            self.backend,
            self.gcp_conn_id,
            self.api_endpoint,
            self.impersonation_chain,
            self.project_id,
            self.job_region(),
        )
        return api.addressing(getattr(self, "job_id", None))

    @property
    def job_api_arguments(self) -> dict[str, Any]:
        return self.job_api.arguments

    @property
    def poller_key(self) -> tuple[Any, ...]:
        return self.job_api.poller_key

    def job_name_for(self, reference: str) -> str:
        """The resource name of a job given by our job ID (looked up) or by its resource name."""
        if not isinstance(reference, str) or not reference:
            raise ValidationError("job_id", f"must be a job ID or a resource name, got {reference!r}")
        if reference.startswith("projects/"):
            return reference
        return self.hook.resolve(reference)

    def console_url_for(self, name: str, job_id: str) -> str | None:
        """The job's page without reading it: the local service's own page, or Google's console."""
        local = self.hook.local_page(name)
        if local:
            return local
        view = {"backend": self.backend, "name": name, "job_id": job_id, "region": self.job_api.region}
        return google_console_url({**view, "project_id": self.hook.project_id})

    @cached_property
    def hook(self) -> JobClient:
        return self.job_api.job_hook()

    @cached_property
    def wait_hook(self) -> JobClient:
        """``hook`` trying each request once, for waiting: the wait step owns outage policy."""
        return self.job_api.job_hook(retry_attempts=1)

    @cached_property
    def logs_hook(self) -> JobLogsHook:
        return self.job_api.logs_hook()

    @cached_property
    def poll_logs_hook(self) -> JobLogsHook:
        """``logs_hook`` trying each read once, for the triggerer's shared log poller: a failed
        read is made again next round, within the budget; retries inside a read would not be."""
        return self.job_api.logs_hook(retry_attempts=1)


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

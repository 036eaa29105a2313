"""How a task reaches its job's API: the connection's arguments, once; one immutable value; its hooks.

The operators, the sensor and the triggers address a job by the same six arguments (connection,
identity, endpoint, backend, project, region), and the packaging operators reach Google as the
same identity. Those arguments, their defaults and their serialisation are defined here once:

- :class:`GoogleIdentity`: ``gcp_conn_id`` and ``impersonation_chain``, as whom a task reaches Google;
- :class:`JobConnection`: those and ``project_id``, ``backend``, ``region``, ``api_endpoint``, where
  its job's API is; :meth:`JobConnection.connection` is the six as one :class:`JobApi`, which a
  trigger serialises with :meth:`JobApi.to_json`;
- :class:`JobHooksMixin`: a job connection's hooks.

They are cooperative ``__init__`` mixins, shared by the operators (through
:mod:`airflow_aip.operators.connected`, which makes Airflow apply a DAG's ``default_args`` to
them) and the triggers. :class:`JobApi` holds the arguments once per task process or trigger
instance, read when the task runs (never at DAG parse), with the region the job really lives in:
a Vertex AI resource name carries its location, and a submit's request its region. The hooks
are built from that value, lazily and once; the task's template fields are never rewritten.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow_aip import config
from airflow_aip.exceptions import ValidationError
from airflow_aip.hooks.base import DEFAULT_CONN_ID
from airflow_aip.hooks.logs import JobLogsHook
from airflow_aip.hooks.training import TrainingJobHook
from airflow_aip.hooks.vertex import VertexJobHook
from airflow_aip.jobs.backends import backend_named
from airflow_aip.jobs.summary import google_console_url
from airflow_aip.jobs.view import AI_PLATFORM

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


class GoogleIdentity:
    """As whom a task reaches Google: the one signature of ``gcp_conn_id`` and ``impersonation_chain``.

    :param gcp_conn_id: the Airflow connection to Google Cloud (missing: Application Default
        Credentials; the image operator takes None for the engine's own credentials).
    :param impersonation_chain: a service account to impersonate, or a chain of them; wins over
        the connection's.
    """

    def __init__(
        self,
        *,
        gcp_conn_id: str | None = DEFAULT_CONN_ID,
        impersonation_chain: str | list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.gcp_conn_id = gcp_conn_id
        self.impersonation_chain = impersonation_chain


class JobConnection(GoogleIdentity):
    """Where a task's (or trigger's) job API is, and as whom: the one signature of the job arguments.

    :param project_id: the Google Cloud project (default: the connection's).
    :param backend: "vertex" (Vertex AI custom training) or "ai_platform" (the ml v1 API); default
        :meth:`default_backend`, ``[aip] backend``, read when the task is created.
    :param region: the job's location on Vertex AI; default :meth:`default_region`, ``[aip]
        region``, read when the task is created (a resource name carries its own).
    :param api_endpoint: the job API's root URL, e.g. the local training service's (None: the
        connection's extra, the environment, then Google's).
    """

    gcp_conn_id: str  # a job API is always reached through a connection (or ADC when it is missing)

    def __init__(
        self,
        *,
        project_id: str | None = None,
        backend: str | None = None,
        region: str | None = None,
        api_endpoint: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.project_id = project_id
        self.backend = self.default_backend() if backend is None else backend
        self.region = self.default_region() if region is None else region
        self.api_endpoint = api_endpoint

    def default_backend(self) -> str:
        """The backend of a task given none: ``[aip] backend``."""
        return config.backend()

    def default_region(self) -> str | None:
        """The region of a task given none: ``[aip] region``."""
        return config.region()

    @property
    def connection(self) -> JobApi:
        """The six arguments as given (templates rendered), as one value: what a trigger serialises."""
        fields: dict[str, Any] = {field: getattr(self, field) for field in API_FIELDS}
        return JobApi(**fields)


class JobHooksMixin(JobConnection):
    """``job_api`` and its hooks, for a task (or trigger) that addresses one job."""

    def job_region(self) -> str | None:
        """The region the task's job API is in: its ``region``, unless the job says otherwise."""
        return self.region

    @cached_property
    def job_api(self) -> JobApi:
        """This task's job API, read once when it runs (a resource name's location included)."""
        api = replace(self.connection, region=self.job_region())
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

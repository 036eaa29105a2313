"""The ml v1 API (projects.jobs create/get/cancel/list): the only place that talks to it.

Its endpoint, credentials, retries and typed errors are the shared core's
(:class:`~airflow_aip.hooks.google_api.GoogleApiHook`): Google's endpoint unless overridden by
the hook argument, the connection extra ``api_endpoint`` or gcloud's
``CLOUDSDK_API_ENDPOINT_OVERRIDES_ML`` (a root URL such as ``http://127.0.0.1:8080/``); an
emulator endpoint gets anonymous credentials. This module adds the paths and the ml v1
meaning of the answers (404 JobNotFoundError, 409 JobAlreadyExistsError, 400 on cancelling an
ended job).

google.*, googleapiclient and httpx are imported inside functions: DAG files import this module
through the operators.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, ClassVar
from urllib.parse import quote

from airflow_aip.exceptions import JobAlreadyExistsError, JobNotFoundError, ValidationError
from airflow_aip.hooks.google_api import GoogleApiHook
from airflow_aip.hooks.http_shared import error_message, is_transient
from airflow_aip.hooks.job_client import acancel_unless_ended, alist_watched, cancel_unless_ended
from airflow_aip.jobs import JobState, validate_job, validate_job_id
from airflow_aip.jobs.backend import Backend
from airflow_aip.jobs.mlv1.backend import MLV1
from airflow_aip.jobs.mlv1.view import ml_job_name
from airflow_aip.jobs.request import JobRequest
from airflow_aip.jobs.view import JobView
from airflow_aip.jobs.watch import Listed, WatchBatch, batches
from airflow_aip.uris import is_loopback

__all__ = [
    "ENDPOINT_ENV",
    "ENDPOINT_EXTRA",
    "TrainingJobHook",
    "error_message",
    "is_loopback",
    "is_transient",
]

ENDPOINT_ENV = MLV1.endpoint_env
ENDPOINT_EXTRA = "api_endpoint"


job_name = ml_job_name


class TrainingJobHook(GoogleApiHook):
    """Create, get, cancel and list AI Platform Training jobs, sync and async.

    Its arguments are the core's (:class:`~airflow_aip.hooks.google_api.GoogleApiHook`).
    """

    hook_name = "AI Platform Training (airflow_aip)"
    api_label = "ml v1"
    default_host = "ml"
    endpoint_extra = ENDPOINT_EXTRA
    endpoint_env = ENDPOINT_ENV
    backend: ClassVar[Backend] = MLV1

    def _job_path(self, job_id: str, project_id: str | None) -> str:
        return "v1/" + quote(job_name(project_id or self.project_id, validate_job_id(job_id)))

    def _cancel_path(self, job_id: str, project_id: str | None) -> str:
        return self._job_path(job_id, project_id) + ":cancel"

    def create_job(self, job: dict[str, Any], project_id: str | None = None) -> dict[str, Any]:
        """``projects.jobs.create``; the body is validated first (nothing is sent if it is bad).

        When an attempt fails transiently (5xx, 429, dropped connection) the server may have
        applied it anyway, and a later attempt meets 409. That 409 is raised as
        JobAlreadyExistsError with ``first_sent`` set, so the caller can ask the model's
        adoption rule (``airflow_aip.jobs.adoption``) whether the job is this call's own.
        The hook only fetches and sends; it never decides whose a job is.
        """
        body = validate_job(job)
        project = project_id or self.project_id
        parent = f"projects/{project}"
        self.log.info("Creating training job %s in %s", body["jobId"], parent)
        sends: list[float] = []
        try:
            return self.request(
                "jobs.create",
                "POST",
                f"v1/{quote(parent)}/jobs",
                body=body,
                on_send=lambda: sends.append(time.time()),
            )
        except JobAlreadyExistsError as err:
            if len(sends) < 2:
                raise
            raise JobAlreadyExistsError(
                err.status, err.message, method=err.method, first_sent=sends[0]
            ) from None

    def get_job(self, job_id: str, project_id: str | None = None) -> dict[str, Any]:
        """``projects.jobs.get``; JobNotFoundError when there is no such job."""
        return self.request("jobs.get", "GET", self._job_path(job_id, project_id))

    def cancel_job(self, job_id: str, project_id: str | None = None) -> bool:
        """Ask for cancellation; False when the job had already ended (the API answers 400)."""
        project = project_id or self.project_id
        return cancel_unless_ended(
            partial(
                self.request, "jobs.cancel", "POST", self._job_path(job_id, project) + ":cancel", body={}
            ),
            lambda: self.get_job(job_id, project).get("state"),
            self.log,
            job_id,
        )

    def list_jobs(
        self, project_id: str | None = None, *, filter: str | None = None, page_size: int = 100
    ) -> list[dict[str, Any]]:
        """Every job of the project (``filter`` in the API's syntax, e.g. ``state=RUNNING``)."""
        path = f"v1/projects/{quote(project_id or self.project_id)}/jobs"
        params: dict[str, Any] = {"pageSize": page_size, **({"filter": filter} if filter else {})}
        return self.list_all("jobs.list", path, "jobs", params)

    # -- the neutral interface (the same on VertexJobHook) ------------------------------------

    def _view(self, job: dict[str, Any], project_id: str | None = None) -> JobView:
        view = self.backend.view(job, project_id=project_id or self.project_id, region=None)
        view["console_url"] = self.local_page(view["name"])  # None: Google's console, from the view
        return view

    @staticmethod
    def _split(name: str) -> tuple[str, str]:
        """``(project, job_id)`` of ``projects/P/jobs/ID``."""
        parts = name.strip("/").split("/")
        if len(parts) != 4 or parts[0] != "projects" or parts[2] != "jobs":
            raise ValidationError("job_name", f"must be projects/<project>/jobs/<job id>, got {name!r}")
        return parts[1], parts[3]

    def find_job(self, job_id: str, kind: str | None = None) -> JobView | None:
        """The job with this ID, or None (ml v1 IDs are the client's: a get answers it)."""
        try:
            return self._view(self.get_job(job_id))
        except JobNotFoundError:
            return None

    def create(self, request: JobRequest, job_id: str) -> JobView:
        """``projects.jobs.create`` under ``job_id`` (409: JobAlreadyExistsError, see create_job)."""
        return self._view(self.create_job(request.for_attempt(job_id)))

    def logged_runs(self, job_ids: Sequence[str], since: str | None) -> dict[str, dict[str, Any]]:
        """None: AI Platform Training has no Experiments (Vertex AI's: ``VertexJobHook.logged_runs``)."""
        return {}

    def read(self, name: str) -> JobView:
        project, job_id = self._split(name)
        return self._view(self.get_job(job_id, project), project)

    async def aread(self, name: str) -> JobView:
        project, job_id = self._split(name)
        return self._view(await self.aget_job(job_id, project), project)

    def cancel(self, name: str) -> bool:
        project, job_id = self._split(name)
        return self.cancel_job(job_id, project)

    async def acancel(self, name: str) -> bool:
        project, job_id = self._split(name)
        return await self.acancel_job(job_id, project)

    def resolve(self, job_id: str) -> str:
        """The resource name of a job ID (no request: ml v1 names are the client's)."""
        checked = validate_job_id(job_id)  # before the project: a bad ID costs no credential lookup
        return ml_job_name(self.project_id, checked)

    # -- watching many jobs (the triggerer's shared poller) ------------------------------------

    def watch_batches(self, watched: Sequence[tuple[str, str]]) -> list[WatchBatch]:
        """List calls that read the watched ``(name, job_id)`` jobs: ``jobId="a" OR ...`` per project."""
        by_project: dict[str, list[str]] = {}
        for name, _ in watched:
            by_project.setdefault(self._split(name)[0], []).append(name)
        return [
            WatchBatch(tuple(members), f"projects/{project}", "jobs", text)
            for project, names in by_project.items()
            for members, text in batches(names, lambda name: self._split(name)[1], "jobId")
        ]

    async def alist_batch(self, batch: WatchBatch) -> Mapping[str, Listed]:
        """The batch's jobs the list answered, by watched name (ml v1 lists whole jobs; an answer as
        last round's is not parsed again: :func:`~airflow_aip.hooks.job_client.alist_watched`)."""
        path = f"v1/{quote(batch.parent)}/jobs"
        return await alist_watched(self, batch, "jobs.list", path, "jobs", partial(self._listed, batch))

    def _listed(self, batch: WatchBatch, listed: list[dict[str, Any]]) -> dict[str, Listed]:
        project = batch.parent.removeprefix("projects/")
        found: dict[str, Listed] = {}
        for job in listed:
            name = ml_job_name(project, str(job.get("jobId")))
            if name in batch.names:
                found[name] = Listed(JobState.parse(job.get("state")), partial(self._view, job, project))
        return found

    # -- async path (triggers) ---------------------------------------------------------------

    async def aget_job(self, job_id: str, project_id: str | None = None) -> dict[str, Any]:
        """``projects.jobs.get`` without blocking the event loop."""
        await self.aprepare()
        return await self.arequest("jobs.get", "GET", self._job_path(job_id, project_id))

    async def acancel_job(self, job_id: str, project_id: str | None = None) -> bool:
        """As :meth:`cancel_job`, async."""
        await self.aprepare()
        project = project_id or self.project_id

        async def state_now() -> Any:
            return (await self.aget_job(job_id, project)).get("state")

        return await acancel_unless_ended(
            partial(
                self.arequest, "jobs.cancel", "POST", self._job_path(job_id, project) + ":cancel", body={}
            ),
            state_now,
            self.log,
            job_id,
        )

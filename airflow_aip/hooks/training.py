"""The ml v1 API (projects.jobs create/get/cancel/list): the only place that talks to it.

- The client is built from the discovery document google-api-python-client ships: no
  discovery fetch, so no network call before the first real request.
- The endpoint is Google's unless overridden by the hook argument, the connection extra
  ``api_endpoint`` or gcloud's ``CLOUDSDK_API_ENDPOINT_OVERRIDES_ML`` (a root URL such as
  ``http://127.0.0.1:8080/``). A loopback endpoint (the local training service) gets anonymous
  credentials.
- One retry policy for the sync and the async path: exponential backoff with jitter on 429,
  5xx and connection errors only; any other 4xx fails at once with the API's own message, as
  a typed error (404 JobNotFoundError, 409 JobAlreadyExistsError, else ApiError).
- The async path (for the trigger) never blocks the event loop: httpx for requests, the
  connection read with ``aget_connection``, credentials loaded and refreshed in a thread.

google.*, googleapiclient, httplib2 and httpx are imported inside functions: DAG files import
this module through the operators.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from functools import cached_property
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from tenacity import AsyncRetrying, Retrying

from airflow_aip.exceptions import ApiError, JobAlreadyExistsError, ValidationError
from airflow_aip.hooks.async_auth import AsyncAuthMixin
from airflow_aip.hooks.base import DEFAULT_CONN_ID, GoogleCloudBaseHook, load_credentials
from airflow_aip.hooks.ml_http import (
    DEFAULT_ROOT_URL,
    ENDPOINT_ENV,
    ENDPOINT_EXTRA,
    REQUEST_TIMEOUT,
    RETRY_ATTEMPTS,
    RETRY_MAX_WAIT,
    api_error,
    borrow_client,
    error_message,
    is_emulator,
    is_loopback,
    is_our_create,
    is_transient,
    job_name,
    resolve_endpoint,
    retry_policy,
    single_send_http,
)
from airflow_aip.jobs import JobState, discovery_document_path, validate_job, validate_job_id

if TYPE_CHECKING:
    import httpx

__all__ = [
    "ENDPOINT_ENV",
    "ENDPOINT_EXTRA",
    "TrainingJobHook",
    "error_message",
    "is_loopback",
    "is_transient",
]


class TrainingJobHook(AsyncAuthMixin, GoogleCloudBaseHook):
    """Create, get, cancel and list AI Platform Training jobs, sync and async.

    :param gcp_conn_id: Airflow connection (provider-google extras; missing => ADC).
    :param project_id: overrides the connection's and the credentials' project.
    :param api_endpoint: root URL override, e.g. ``http://127.0.0.1:8080/``.
    :param retry_attempts: total tries of a request on transient errors.
    """

    hook_name = "AI Platform Training (airflow_aip)"

    def __init__(
        self,
        gcp_conn_id: str = DEFAULT_CONN_ID,
        *,
        project_id: str | None = None,
        api_endpoint: str | None = None,
        retry_attempts: int = RETRY_ATTEMPTS,
        retry_max_wait: float = RETRY_MAX_WAIT,
        request_timeout: float = REQUEST_TIMEOUT,
        **kwargs: Any,
    ) -> None:
        super().__init__(gcp_conn_id, **kwargs)
        self._project_id = project_id
        self._api_endpoint = api_endpoint
        self.retry_attempts = retry_attempts
        self.retry_max_wait = retry_max_wait
        self.request_timeout = request_timeout

    # -- where and as whom -------------------------------------------------------------------

    @cached_property
    def endpoint(self) -> str | None:
        """The root URL override, or None for Google's own endpoint."""
        return resolve_endpoint(self._api_endpoint, self.settings)

    @property
    def root_url(self) -> str:
        return self.endpoint or DEFAULT_ROOT_URL

    @property
    def is_local(self) -> bool:
        """Talking to an emulator (loopback or plain http): anonymous credentials, no token sent."""
        return self.endpoint is not None and is_emulator(self.endpoint)

    @cached_property
    def credentials_and_project(self) -> tuple[Any, str | None]:
        """``(credentials, project)``; anonymous for a local endpoint (no key, no ADC lookup)."""
        if self.is_local:
            from google.auth.credentials import AnonymousCredentials

            return AnonymousCredentials(), self.settings.project_id
        return load_credentials(self.settings)

    @property
    def project_id(self) -> str:
        """The project jobs live in: argument, connection, then credentials."""
        project = self._project_id or self.settings.project_id or self.credentials_and_project[1]
        if not project:
            raise ValidationError(
                "project_id", "is required: pass it to the task or set 'project' on the connection"
            )
        return project

    # -- sync client -------------------------------------------------------------------------

    def _http(self) -> Any:
        """The HTTP transport: authorised httplib2 (tests replace this at the HTTP boundary)."""
        raw = single_send_http(self.request_timeout)
        if self.is_local:
            return raw
        import google_auth_httplib2

        return google_auth_httplib2.AuthorizedHttp(self.credentials_and_project[0], http=raw)

    @cached_property
    def ml(self) -> Any:
        """The ml v1 ``projects.jobs`` resource, from the static discovery document."""
        from googleapiclient.discovery import build_from_document

        service = build_from_document(
            discovery_document_path().read_text(encoding="utf-8"),
            http=self._http(),
            client_options={"api_endpoint": self.endpoint} if self.endpoint else None,
        )
        return service.projects().jobs()

    def _call(self, method: str, build: Callable[[], Any]) -> dict[str, Any]:
        """Execute a request with the retry policy; HTTP errors become typed errors."""
        from googleapiclient.errors import HttpError

        def once() -> dict[str, Any]:
            try:
                result = build().execute(num_retries=0)
            except HttpError as err:
                status = int(err.resp.status)
                raise api_error(status, error_message(err.content, str(err.reason)), method) from None
            return dict(result or {})

        for attempt in Retrying(**retry_policy(self.retry_attempts, self.retry_max_wait, self.log)):
            with attempt:
                return once()
        raise AssertionError("unreachable: tenacity reraises")  # pragma: no cover

    def create_job(self, job: dict[str, Any], project_id: str | None = None) -> dict[str, Any]:
        """``projects.jobs.create``; the body is validated first (nothing is sent if it is bad).

        Exactly once under retries: when an attempt fails transiently (5xx, 429, dropped
        connection) the server may have applied it anyway. A later attempt that meets 409 then
        reads the job, and if it is the one we asked for (same trainingInput and labels,
        created since our first send) returns it as created, instead of reporting someone
        else's job. A 409 on the first attempt is a job that existed before this call:
        JobAlreadyExistsError, for the caller to judge (adopt, fail, or the next ID).
        """
        body = validate_job(job)
        project = project_id or self.project_id
        parent = f"projects/{project}"
        self.log.info("Creating training job %s in %s", body["jobId"], parent)
        sent, first_sent = 0, time.time()

        def create() -> Any:
            nonlocal sent
            sent += 1
            return self.ml.create(parent=parent, body=body)

        try:
            return self._call("jobs.create", create)
        except JobAlreadyExistsError:
            if sent < 2:
                raise
            existing = self.get_job(body["jobId"], project)
            if not is_our_create(body, existing, first_sent):
                raise
            self.log.warning(
                "Training job %s exists with the spec we sent: an earlier attempt was applied but its "
                "answer was lost; using that job",
                body["jobId"],
            )
            return existing

    def get_job(self, job_id: str, project_id: str | None = None) -> dict[str, Any]:
        """``projects.jobs.get``; JobNotFoundError when there is no such job."""
        name = job_name(project_id or self.project_id, validate_job_id(job_id))
        return self._call("jobs.get", lambda: self.ml.get(name=name))

    def cancel_job(self, job_id: str, project_id: str | None = None) -> bool:
        """Ask for cancellation; False when the job had already ended (the API answers 400)."""
        project = project_id or self.project_id
        name = job_name(project, validate_job_id(job_id))
        try:
            self._call("jobs.cancel", lambda: self.ml.cancel(name=name, body={}))
        except ApiError as err:
            if err.status == 400 and JobState.parse(self.get_job(job_id, project).get("state")).is_terminal:
                self.log.info("Training job %s had already ended: nothing to cancel", job_id)
                return False
            raise
        self.log.info("Cancellation of training job %s requested", job_id)
        return True

    def list_jobs(
        self, project_id: str | None = None, *, filter: str | None = None, page_size: int = 100
    ) -> list[dict[str, Any]]:
        """Every job of the project (``filter`` in the API's syntax, e.g. ``state=RUNNING``)."""
        parent = f"projects/{project_id or self.project_id}"
        jobs: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            page = self._call(
                "jobs.list",
                lambda token=token: self.ml.list(  # type: ignore[misc]
                    parent=parent, filter=filter, pageSize=page_size, pageToken=token
                ),
            )
            jobs.extend(page.get("jobs") or [])
            token = page.get("nextPageToken")
            if not token:
                return jobs

    # -- async path (triggers) ---------------------------------------------------------------

    def _shared_auth_key(self) -> tuple[str, str | None]:
        return (self.gcp_conn_id, self._api_endpoint)

    def _client_slot(self) -> AbstractAsyncContextManager[httpx.AsyncClient]:
        """Borrow a client of the event loop's pool (tests replace this at the HTTP boundary)."""
        return borrow_client(self.request_timeout)

    async def _arequest(self, method: str, verb: str, path: str, body: Any = None) -> dict[str, Any]:
        await self.aprepare()
        url = self.root_url + "v1/" + path

        async def once() -> dict[str, Any]:
            headers = await self._auth_headers()
            async with self._client_slot() as client:
                response = await client.request(verb, url, json=body, headers=headers)
            if response.status_code >= 400:
                raise api_error(
                    response.status_code, error_message(response.content, response.reason_phrase), method
                )
            return dict(response.json() or {}) if response.content else {}

        async for attempt in AsyncRetrying(
            **retry_policy(self.retry_attempts, self.retry_max_wait, self.log)
        ):
            with attempt:
                return await once()
        raise AssertionError("unreachable: tenacity reraises")  # pragma: no cover

    async def aget_job(self, job_id: str, project_id: str | None = None) -> dict[str, Any]:
        """``projects.jobs.get`` without blocking the event loop."""
        await self.aprepare()
        path = quote(job_name(project_id or self.project_id, validate_job_id(job_id)))
        return await self._arequest("jobs.get", "GET", path)

    async def acancel_job(self, job_id: str, project_id: str | None = None) -> bool:
        """As :meth:`cancel_job`, async."""
        await self.aprepare()
        project = project_id or self.project_id
        path = quote(job_name(project, validate_job_id(job_id))) + ":cancel"
        try:
            await self._arequest("jobs.cancel", "POST", path, body={})
        except ApiError as err:
            if (
                err.status == 400
                and JobState.parse((await self.aget_job(job_id, project)).get("state")).is_terminal
            ):
                return False
            raise
        self.log.info("Cancellation of training job %s requested", job_id)
        return True


def cancel_quietly(
    job_id: str, project_id: str | None, *, gcp_conn_id: str, api_endpoint: str | None, reason: str, log: Any
) -> None:
    """Cancel a job for a task that is being killed or gives up: log, never raise.

    A fresh hook, because ``on_kill`` runs in a signal handler, maybe in the middle of a request
    on the task's own hook's transport; never raising, because the kill must go on either way.
    """
    log.warning("Cancelling training job %s (%s)", job_id, reason)
    try:
        TrainingJobHook(gcp_conn_id, project_id=project_id, api_endpoint=api_endpoint).cancel_job(job_id)
    except Exception:
        log.exception("Could not cancel training job %s", job_id)

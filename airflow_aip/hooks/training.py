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

import asyncio
import http.client
import ipaddress
import json
import weakref
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from airflow_aip.exceptions import ApiError, JobAlreadyExistsError, JobNotFoundError, ValidationError
from airflow_aip.hooks.base import (
    DEFAULT_CONN_ID,
    ConnectionSettings,
    GoogleCloudBaseHook,
    env_flag,
    load_credentials,
)
from airflow_aip.jobs import JobState, discovery_document_path, validate_job, validate_job_id

if TYPE_CHECKING:
    import httpx

ENDPOINT_ENV = "CLOUDSDK_API_ENDPOINT_OVERRIDES_ML"
ENDPOINT_EXTRA = "api_endpoint"
DEFAULT_ROOT_URL = "https://ml.googleapis.com/"
RETRY_ATTEMPTS = 6
RETRY_INITIAL_WAIT = 1.0
RETRY_MAX_WAIT = 60.0
REQUEST_TIMEOUT = 60.0
# One pooled httpx client per event loop, shared by every trigger in a triggerer.
_ASYNC_CLIENTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
    weakref.WeakKeyDictionary()
)


def api_error(status: int, message: str, method: str) -> ApiError:
    """The typed error for an HTTP error answer."""
    kind = {404: JobNotFoundError, 409: JobAlreadyExistsError}.get(status, ApiError)
    return kind(status, message, method=method)


def error_message(content: bytes | str, fallback: str) -> str:
    """``error.message`` of a Google error body, else the body itself (short), else ``fallback``."""
    text = content.decode("utf-8", "replace") if isinstance(content, bytes) else content
    try:
        body = json.loads(text)
        message = body["error"]["message"]
        if isinstance(message, str) and message:
            return message
    except (ValueError, KeyError, TypeError):
        pass
    return text.strip()[:500] or fallback


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: throttling, server errors, and the connection failing under us."""
    if isinstance(exc, ApiError):
        return exc.status in (408, 429) or exc.status >= 500
    if isinstance(exc, OSError | http.client.HTTPException):  # refused, reset, timed out
        return True
    module = type(exc).__module__
    name = type(exc).__name__
    if module.startswith("httpx") and name != "InvalidURL":
        import httpx

        return isinstance(exc, httpx.TransportError)
    if module.startswith("httplib2"):
        return name == "ServerNotFoundError"
    if module.startswith("google.auth"):
        return name == "TransportError"
    return False


def retry_policy(attempts: int, max_wait: float, log: Any = None) -> dict[str, Any]:
    """tenacity arguments shared by :class:`Retrying` and :class:`AsyncRetrying`."""

    def before_sleep(state: RetryCallState) -> None:
        if log is not None and state.outcome is not None and state.next_action is not None:
            log.warning(
                "ml v1 request failed (%s); retry %d of %d in %.1fs",
                state.outcome.exception(),
                state.attempt_number,
                attempts - 1,
                state.next_action.sleep,
            )

    return {
        "stop": stop_after_attempt(attempts),
        "wait": wait_random_exponential(multiplier=RETRY_INITIAL_WAIT, max=max_wait),
        "retry": retry_if_exception(is_transient),
        "before_sleep": before_sleep,
        "reraise": True,
    }


def is_loopback(url: str) -> bool:
    """A URL on this machine: the local training service, never Google."""
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolve_endpoint(explicit: str | None, settings: ConnectionSettings) -> str | None:
    """The root URL override: hook argument, then connection extra, then gcloud's variable."""
    root = explicit or settings.extras.get(ENDPOINT_EXTRA) or env_flag(ENDPOINT_ENV)
    if not root:
        return None
    root = str(root).strip()
    if urlsplit(root).scheme not in ("http", "https"):
        raise ValidationError(
            ENDPOINT_EXTRA, f"must be an http(s) root URL like http://127.0.0.1:8080/, got {root!r}"
        )
    return root if root.endswith("/") else root + "/"


def job_name(project_id: str, job_id: str) -> str:
    """``projects/{project}/jobs/{job}``: the resource name every job method takes."""
    return f"projects/{project_id}/jobs/{job_id}"


class TrainingJobHook(GoogleCloudBaseHook):
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
        self._refresh_lock: asyncio.Lock | None = None

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
        """Talking to a loopback endpoint: anonymous credentials, and nothing leaves the machine."""
        return self.endpoint is not None and is_loopback(self.endpoint)

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
        import httplib2

        raw = httplib2.Http(timeout=self.request_timeout)
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
        """``projects.jobs.create``; the body is validated first (nothing is sent if it is bad)."""
        body = validate_job(job)
        parent = f"projects/{project_id or self.project_id}"
        self.log.info("Creating training job %s in %s", body["jobId"], parent)
        return self._call("jobs.create", lambda: self.ml.create(parent=parent, body=body))

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

    async def aprepare(self) -> None:
        """Read the connection and credentials without blocking the event loop (once)."""
        if "settings" not in self.__dict__:
            from airflow.sdk.exceptions import AirflowNotFoundException

            try:
                conn = await self.aget_connection(self.gcp_conn_id)
                settings = ConnectionSettings.from_extras(dict(conn.extra_dejson or {}))
            except AirflowNotFoundException:
                settings = ConnectionSettings()
            self.__dict__["settings"] = settings
        if "credentials_and_project" not in self.__dict__:
            found = await asyncio.to_thread(lambda: self.credentials_and_project)
            self.__dict__["credentials_and_project"] = found

    async def _auth_headers(self) -> dict[str, str]:
        """A bearer token, refreshed in a thread when it is missing or about to expire."""
        if self.is_local:
            return {}
        credentials = self.credentials_and_project[0]
        if not credentials.valid:
            self._refresh_lock = self._refresh_lock or asyncio.Lock()
            async with self._refresh_lock:
                if not credentials.valid:
                    from google.auth.transport.requests import Request

                    await asyncio.to_thread(credentials.refresh, Request())
        return {"Authorization": f"Bearer {credentials.token}"}

    def _async_client(self) -> httpx.AsyncClient:
        """The event loop's shared, pooled client (tests replace this at the HTTP boundary)."""
        import httpx

        loop = asyncio.get_running_loop()
        client = _ASYNC_CLIENTS.get(loop)
        if client is None or client.is_closed:
            client = httpx.AsyncClient(
                timeout=self.request_timeout,
                limits=httpx.Limits(max_connections=200, max_keepalive_connections=200),
            )
            _ASYNC_CLIENTS[loop] = client
        return client

    async def _arequest(self, method: str, verb: str, path: str, body: Any = None) -> dict[str, Any]:
        await self.aprepare()
        url = self.root_url + "v1/" + path

        async def once() -> dict[str, Any]:
            response = await self._async_client().request(
                verb, url, json=body, headers=await self._auth_headers()
            )
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

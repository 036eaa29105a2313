"""A training job's log lines from Cloud Logging v2 ``entries.list``: the only place that reads them.

- Sync path (operator, sensor): google-api-python-client built from the static ``logging`` v2
  discovery document it ships, so no discovery fetch. Async path (trigger): httpx through the
  event loop's shared client pool, connection and credentials read without blocking.
- Endpoint: the hook argument, the connection extra ``logging_api_endpoint``, gcloud's
  ``CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING``; failing those, the ml endpoint when it is an
  emulator (the local training service serves both APIs on one URL), else Google's.
  Credentials as for TrainingJobHook: anonymous for loopback or plain-http endpoints.
- Retries: the ml hook's policy (429, 5xx, connection errors; backoff with jitter) with fewer,
  shorter tries: a poll that fails is simply made again at the next one, and the cursor has
  not moved, so nothing is lost. Cloud Logging allows about 60 reads a minute per project.
- :meth:`follow` / :meth:`afollow` make one poll and log what the LogStream lets through;
  :meth:`drain` / :meth:`adrain` apply the end rule. They never raise (cancellation aside):
  reading logs is best effort and must never fail the task that waits for the job.
"""

from __future__ import annotations

import asyncio
import importlib.util
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tenacity import AsyncRetrying, Retrying

from airflow_aip.exceptions import AipError, ApiError, ValidationError
from airflow_aip.hooks.async_auth import AsyncAuthMixin
from airflow_aip.hooks.base import DEFAULT_CONN_ID, GoogleCloudBaseHook, load_credentials
from airflow_aip.hooks.ml_http import (
    REQUEST_TIMEOUT,
    borrow_client,
    error_message,
    is_emulator,
    resolve_api_endpoint,
    resolve_endpoint,
    retry_policy,
)
from airflow_aip.jobs.logs import MAX_PAGES_PER_POLL, PAGE_SIZE, DrainRule, LogStream

if TYPE_CHECKING:
    import httpx

LOGGING_ENDPOINT_ENV = "CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING"
LOGGING_ENDPOINT_EXTRA = "logging_api_endpoint"
DEFAULT_LOGGING_ROOT_URL = "https://logging.googleapis.com/"
LOG_RETRY_ATTEMPTS = 3
LOG_RETRY_MAX_WAIT = 10.0
LOG_REQUEST_TIMEOUT = 30.0  # a hung logging endpoint must not hold up the job's own polling for long
REPORT_FAILURE_EVERY = 10  # polls: the first failure in a row is reported, then every 10th


class _Log(Protocol):
    def info(self, msg: Any, /, *args: Any) -> Any: ...
    def warning(self, msg: Any, /, *args: Any) -> Any: ...


@dataclass(frozen=True)
class Batch:
    """One poll's entries; ``more`` when the page cap stopped it before the end."""

    entries: list[dict[str, Any]]
    more: bool


@dataclass(frozen=True)
class PollOutcome:
    new: int
    more: bool
    failed: bool


def logging_discovery_document_path() -> Path:
    """The static ``logging`` v2 discovery document google-api-python-client ships."""
    spec = importlib.util.find_spec("googleapiclient")
    if spec is None or not spec.submodule_search_locations:
        raise AipError("google-api-python-client is not installed: the logging v2 schema is unavailable")
    base = Path(next(iter(spec.submodule_search_locations)))
    return base / "discovery_cache" / "documents" / "logging.v2.json"


class JobLogsHook(AsyncAuthMixin, GoogleCloudBaseHook):
    """Read a training job's log entries, sync and async, and stream them into a logger.

    :param gcp_conn_id: Airflow connection (provider-google extras; missing => ADC).
    :param project_id: the project whose logs are read (default: connection, then credentials).
    :param api_endpoint: logging root URL override, e.g. ``http://127.0.0.1:8080/``.
    :param ml_api_endpoint: the ml endpoint of the job: when it is an emulator, logs come from it too.
    """

    hook_name = "AI Platform Training logs (airflow_aip)"

    def __init__(
        self,
        gcp_conn_id: str = DEFAULT_CONN_ID,
        *,
        project_id: str | None = None,
        api_endpoint: str | None = None,
        ml_api_endpoint: str | None = None,
        retry_attempts: int = LOG_RETRY_ATTEMPTS,
        retry_max_wait: float = LOG_RETRY_MAX_WAIT,
        request_timeout: float = LOG_REQUEST_TIMEOUT,
        page_size: int = PAGE_SIZE,
        max_pages: int = MAX_PAGES_PER_POLL,
        **kwargs: Any,
    ) -> None:
        super().__init__(gcp_conn_id, **kwargs)
        self._project_id = project_id
        self._api_endpoint = api_endpoint
        self._ml_api_endpoint = ml_api_endpoint
        self.retry_attempts = retry_attempts
        self.retry_max_wait = retry_max_wait
        self.request_timeout = request_timeout
        self.page_size = page_size
        self.max_pages = max_pages

    # -- where and as whom -------------------------------------------------------------------

    @cached_property
    def endpoint(self) -> str | None:
        """The logging root URL override, or None for Google's own endpoint."""
        own = resolve_api_endpoint(
            self._api_endpoint, self.settings, extra=LOGGING_ENDPOINT_EXTRA, env=LOGGING_ENDPOINT_ENV
        )
        if own:
            return own
        ml = resolve_endpoint(self._ml_api_endpoint, self.settings)
        return ml if ml and is_emulator(ml) else None

    @property
    def root_url(self) -> str:
        return self.endpoint or DEFAULT_LOGGING_ROOT_URL

    @property
    def is_local(self) -> bool:
        return self.endpoint is not None and is_emulator(self.endpoint)

    @cached_property
    def credentials_and_project(self) -> tuple[Any, str | None]:
        if self.is_local:
            from google.auth.credentials import AnonymousCredentials

            return AnonymousCredentials(), self.settings.project_id
        return load_credentials(self.settings)

    def resolve_project(self, project_id: str | None = None) -> str:
        project = (
            project_id or self._project_id or self.settings.project_id or self.credentials_and_project[1]
        )
        if not project:
            raise ValidationError("project_id", "is required to read a job's logs")
        return project

    def _body(self, stream: LogStream, project: str) -> dict[str, Any]:
        return {
            "resourceNames": [f"projects/{project}"],
            "filter": stream.filter,
            "orderBy": "timestamp asc",
            "pageSize": self.page_size,
        }

    # -- sync --------------------------------------------------------------------------------

    def _http(self) -> Any:
        """The HTTP transport: authorised httplib2 (tests replace this at the HTTP boundary)."""
        import httplib2

        raw = httplib2.Http(timeout=self.request_timeout)
        if self.is_local:
            return raw
        import google_auth_httplib2

        return google_auth_httplib2.AuthorizedHttp(self.credentials_and_project[0], http=raw)

    @cached_property
    def entries(self) -> Any:
        """The logging v2 ``entries`` resource, from the static discovery document."""
        from googleapiclient.discovery import build_from_document

        service = build_from_document(
            logging_discovery_document_path().read_text(encoding="utf-8"),
            http=self._http(),
            client_options={"api_endpoint": self.endpoint} if self.endpoint else None,
        )
        return service.entries()

    def list_entries(self, body: dict[str, Any]) -> dict[str, Any]:
        """One ``entries.list`` page, with the retry policy; HTTP errors become typed errors."""
        from googleapiclient.errors import HttpError

        for attempt in Retrying(
            **retry_policy(self.retry_attempts, self.retry_max_wait, self.log, "logging v2")
        ):
            with attempt:
                try:
                    return dict(self.entries.list(body=body).execute(num_retries=0) or {})
                except HttpError as err:
                    status = int(err.resp.status)
                    message = error_message(err.content, str(err.reason))
                    raise ApiError(status, message, method="entries.list") from None
        raise AssertionError("unreachable: tenacity reraises")  # pragma: no cover

    def fetch(self, stream: LogStream, project_id: str | None = None) -> Batch:
        """The entries after the stream's cursor, at most ``max_pages`` pages."""
        body = self._body(stream, self.resolve_project(project_id))
        entries: list[dict[str, Any]] = []
        for _ in range(self.max_pages):
            page = self.list_entries(body)
            entries.extend(page.get("entries") or [])
            if not page.get("nextPageToken"):
                return Batch(entries, more=False)
            body = {**body, "pageToken": page["nextPageToken"]}
        return Batch(entries, more=True)

    def follow(
        self,
        stream: LogStream,
        log: _Log,
        project_id: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> PollOutcome:
        """One poll: log the new lines the stream lets through. Never raises."""
        try:
            batch = self.fetch(stream, project_id)
        except Exception as err:
            return _failed(stream, log, err)
        return _show(stream, log, batch, clock())

    def drain(
        self,
        stream: LogStream,
        log: _Log,
        project_id: str | None = None,
        *,
        interval: float,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """The job ended: poll until a poll after the end brings nothing new (gcloud's rule)."""
        rule = DrainRule(clock(), settle=interval)
        while True:
            started = clock()
            outcome = self.follow(stream, log, project_id, clock)
            if rule.finished(started, outcome.new, outcome.more, outcome.failed):
                return _exhausted(stream, log, rule)
            if not outcome.more:
                sleep(interval)

    # -- async (triggers) --------------------------------------------------------------------

    def _shared_auth_key(self) -> tuple[str, str | None]:
        return (self.gcp_conn_id, f"logging|{self._api_endpoint}|{self._ml_api_endpoint}")

    def _client_slot(self) -> AbstractAsyncContextManager[httpx.AsyncClient]:
        """Borrow a client of the event loop's pool (tests replace this at the HTTP boundary).

        The pool's clients are shared with the ml hook and keep its timeout; ours is per request.
        """
        return borrow_client(REQUEST_TIMEOUT)

    async def alist_entries(self, body: dict[str, Any]) -> dict[str, Any]:
        """As :meth:`list_entries`, without blocking the event loop."""
        await self.aprepare()
        url = self.root_url + "v2/entries:list"
        async for attempt in AsyncRetrying(
            **retry_policy(self.retry_attempts, self.retry_max_wait, self.log, "logging v2")
        ):
            with attempt:
                headers = await self._auth_headers()
                async with self._client_slot() as client:
                    response = await client.post(
                        url, json=body, headers=headers, timeout=self.request_timeout
                    )
                if response.status_code >= 400:
                    message = error_message(response.content, response.reason_phrase)
                    raise ApiError(response.status_code, message, method="entries.list")
                return dict(response.json() or {}) if response.content else {}
        raise AssertionError("unreachable: tenacity reraises")  # pragma: no cover

    async def afetch(self, stream: LogStream, project_id: str | None = None) -> Batch:
        await self.aprepare()
        body = self._body(stream, self.resolve_project(project_id))
        entries: list[dict[str, Any]] = []
        for _ in range(self.max_pages):
            page = await self.alist_entries(body)
            entries.extend(page.get("entries") or [])
            if not page.get("nextPageToken"):
                return Batch(entries, more=False)
            body = {**body, "pageToken": page["nextPageToken"]}
        return Batch(entries, more=True)

    async def afollow(self, stream: LogStream, log: _Log, project_id: str | None = None) -> PollOutcome:
        """As :meth:`follow`, async. Never raises (cancellation aside)."""
        try:
            batch = await self.afetch(stream, project_id)
        except Exception as err:
            return _failed(stream, log, err)
        return _show(stream, log, batch, time.monotonic())

    async def adrain(
        self, stream: LogStream, log: _Log, project_id: str | None = None, *, interval: float
    ) -> None:
        """As :meth:`drain`, async."""
        rule = DrainRule(time.monotonic(), settle=interval)
        while True:
            started = time.monotonic()
            outcome = await self.afollow(stream, log, project_id)
            if rule.finished(started, outcome.new, outcome.more, outcome.failed):
                return _exhausted(stream, log, rule)
            await asyncio.sleep(0 if outcome.more else interval)


def _show(stream: LogStream, log: _Log, batch: Batch, now: float) -> PollOutcome:
    recovering = stream.failures > 0
    shown = stream.accept(batch.entries, now)
    if recovering:
        log.info("Reading the logs of training job %s again", stream.job_id)
    for line in shown.lines:
        log.info("%s", line)
    return PollOutcome(shown.new, batch.more, failed=False)


def _failed(stream: LogStream, log: _Log, err: Exception) -> PollOutcome:
    count = stream.failed()
    if count == 1 or count % REPORT_FAILURE_EVERY == 0:
        log.warning(
            "Could not read the logs of training job %s (%s: %s); retrying at the next poll, nothing is lost",
            stream.job_id,
            type(err).__name__,
            err,
        )
    return PollOutcome(0, more=False, failed=True)


def _exhausted(stream: LogStream, log: _Log, rule: DrainRule) -> None:
    if rule.exhausted:
        log.warning(
            "Stopped reading the logs of training job %s %.0fs after it ended; the rest is in Cloud Logging",
            stream.job_id,
            rule.max_seconds,
        )

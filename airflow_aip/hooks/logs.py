"""A training job's log lines from Cloud Logging v2 ``entries.list``: the only place that reads them.

- Requests go through the shared HTTP core (:class:`~airflow_aip.hooks.google_api.GoogleApiHook`),
  sync for the operator and sensor, async for the trigger: the same credentials, signing,
  retries and typed errors as the ml hook.
- Endpoint: the hook argument, the connection extra ``logging_api_endpoint``, gcloud's
  ``CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING``; failing those, the ml endpoint when it is an
  emulator (the local training service serves both APIs on one URL), else Google's.
  Credentials as for TrainingJobHook: anonymous for loopback or plain-http endpoints.
- Retries: the ml hook's policy (5xx, connection errors; backoff with jitter) with fewer,
  shorter tries: a poll that fails is simply made again at the next one, and the cursor has
  not moved, so nothing is lost. A 429 is never retried here: Cloud Logging allows 60
  ``entries.list`` calls a minute per project (https://cloud.google.com/logging/quotas), and a
  retry would spend it again. The caller backs off instead: in a worker, the stream pauses its
  reads (:meth:`LogStream.throttled`, 10 s doubling up to 5 minutes, reset by a read that
  succeeds); in the triggerer, the shared poller's per-project budget slows down
  (:mod:`airflow_aip.triggers.log_polling`).
- :meth:`follow` makes one poll and logs what the LogStream lets through; :meth:`drain` applies
  the end rule. They never raise: reading logs is best effort and must never fail the task
  that waits for the job. The triggerer reads with :meth:`alist_entries`, through its shared
  log poller (:mod:`airflow_aip.triggers.log_polling`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import islice
from typing import Any, Protocol

from tenacity import retry_if_exception

from airflow_aip.exceptions import ApiError, ValidationError
from airflow_aip.hooks.base import DEFAULT_CONN_ID
from airflow_aip.hooks.google_api import GoogleApiHook
from airflow_aip.hooks.http_shared import is_transient, resolve_api_endpoint, retry_policy
from airflow_aip.hooks.training import ENDPOINT_ENV, ENDPOINT_EXTRA
from airflow_aip.jobs.logs import (
    MAX_PAGES_PER_POLL,
    PAGE_SIZE,
    REPORT_FAILURE_EVERY,
    DrainRule,
    LogStream,
)
from airflow_aip.uris import is_emulator

LOGGING_ENDPOINT_ENV = "CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING"
LOGGING_ENDPOINT_EXTRA = "logging_api_endpoint"
LOG_RETRY_ATTEMPTS = 3
LOG_RETRY_MAX_WAIT = 10.0
LIST_PATH = "v2/entries:list"
LOG_REQUEST_TIMEOUT = 30.0  # a hung logging endpoint must not hold up the job's own polling for long

__all__ = ["REPORT_FAILURE_EVERY", "Batch", "JobLogsHook", "PollOutcome", "is_throttled"]


def is_throttled(exc: BaseException) -> bool:
    """A 429: the project's read quota is spent (by us or by anyone else reading its logs)."""
    return isinstance(exc, ApiError) and exc.status == 429


def _worth_retrying(exc: BaseException) -> bool:
    """The shared transient errors, less 429: its caller backs off instead (module docstring)."""
    return is_transient(exc) and not is_throttled(exc)


class _Log(Protocol):
    def info(self, msg: Any, /, *args: Any) -> Any: ...
    def warning(self, msg: Any, /, *args: Any) -> Any: ...
    def error(self, msg: Any, /, *args: Any) -> Any: ...


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


class JobLogsHook(GoogleApiHook):
    """Read a training job's log entries, sync and async, and stream them into a logger.

    :param gcp_conn_id: Airflow connection (provider-google extras; missing => ADC).
    :param project_id: the project whose logs are read (default: connection, then credentials).
    :param api_endpoint: logging root URL override, e.g. ``http://127.0.0.1:8080/``.
    :param ml_api_endpoint: the job API's endpoint: when it is an emulator, logs come from it too.
    :param job_endpoint_env: the gcloud variable that overrides the job API's endpoint.
    :param impersonation_chain: account (or chain) to impersonate; wins over the connection's.
    """

    hook_name = "AI Platform Training logs (airflow_aip)"
    api_label = "logging v2"
    default_host = "logging"
    endpoint_extra = LOGGING_ENDPOINT_EXTRA
    endpoint_env = LOGGING_ENDPOINT_ENV

    def __init__(
        self,
        gcp_conn_id: str = DEFAULT_CONN_ID,
        *,
        project_id: str | None = None,
        api_endpoint: str | None = None,
        ml_api_endpoint: str | None = None,
        job_endpoint_env: str = ENDPOINT_ENV,
        impersonation_chain: str | Sequence[str] | None = None,
        retry_attempts: int = LOG_RETRY_ATTEMPTS,
        retry_max_wait: float = LOG_RETRY_MAX_WAIT,
        request_timeout: float = LOG_REQUEST_TIMEOUT,
        page_size: int = PAGE_SIZE,
        max_pages: int = MAX_PAGES_PER_POLL,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            gcp_conn_id,
            project_id=project_id,
            api_endpoint=api_endpoint,
            impersonation_chain=impersonation_chain,
            retry_attempts=retry_attempts,
            retry_max_wait=retry_max_wait,
            request_timeout=request_timeout,
            **kwargs,
        )
        self._ml_api_endpoint = ml_api_endpoint
        self._job_endpoint_env = job_endpoint_env
        self.page_size = page_size
        self.max_pages = max_pages

    @cached_property
    def endpoint(self) -> str | None:
        """The logging root URL override; else the ml endpoint when it is an emulator, else Google's."""
        own = super().endpoint
        if own:
            return own
        ml = resolve_api_endpoint(
            self._ml_api_endpoint, self.settings, extra=ENDPOINT_EXTRA, env=self._job_endpoint_env
        )
        return ml if ml and is_emulator(ml) else None

    def _shared_auth_key(self) -> tuple[str, ...]:
        return (*super()._shared_auth_key(), str(self._ml_api_endpoint))

    @cached_property
    def _retry_policy(self) -> dict[str, Any]:
        """The shared policy, except that a 429 is not retried (see the module docstring)."""
        policy = retry_policy(self.retry_attempts, self.retry_max_wait, self.log, self.api_label)
        return {**policy, "retry": retry_if_exception(_worth_retrying)}

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

    def fetch(self, stream: LogStream, project_id: str | None = None) -> Batch:
        """The entries after the stream's cursor, at most ``max_pages`` pages."""
        body = self._body(stream, self.resolve_project(project_id))
        entries: list[dict[str, Any]] = []
        pages = self.pages("entries.list", "POST", LIST_PATH, body=body)
        for page in islice(pages, self.max_pages):
            entries.extend(page.get("entries") or [])
            if not page.get("nextPageToken"):
                return Batch(entries, more=False)
        return Batch(entries, more=True)

    def follow(
        self,
        stream: LogStream,
        log: _Log,
        project_id: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> PollOutcome:
        """One poll: log the new lines the stream lets through. Never raises.

        While a 429's pause lasts (:meth:`LogStream.may_read`) nothing is sent and the poll
        counts as failed: a drain goes on, bounded by its own limit.
        """
        if not stream.may_read(clock()):
            return PollOutcome(0, more=False, failed=True)
        try:
            batch = self.fetch(stream, project_id)
        except Exception as err:
            return _failed(stream, log, err, clock())
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

    async def alist_entries(self, body: dict[str, Any]) -> dict[str, Any]:
        """One ``entries.list`` call with ``body`` (one page), without blocking the event loop."""
        return await self.arequest("entries.list", "POST", LIST_PATH, body=body)


def _show(stream: LogStream, log: _Log, batch: Batch, now: float) -> PollOutcome:
    shown = stream.read(batch.entries, now)
    for level, line in shown.lines:  # at the entry's own level: the logger adds the one timestamp
        getattr(log, level)("%s", line)
    return PollOutcome(shown.new, batch.more, failed=False)


def _failed(stream: LogStream, log: _Log, err: Exception, now: float) -> PollOutcome:
    retry = "at the next poll"
    if is_throttled(err):
        retry = f"in {stream.throttled(now):.0f}s (Cloud Logging's read quota is spent)"
    notice = stream.read_failed(f"{type(err).__name__}: {err}", retry)
    if notice is not None:
        getattr(log, notice[0])("%s", notice[1])
    return PollOutcome(0, more=False, failed=True)


def _exhausted(stream: LogStream, log: _Log, rule: DrainRule) -> None:
    notice = rule.notice(stream.job_id)
    if notice is not None:
        getattr(log, notice[0])("%s", notice[1])

"""What every job hook offers the adapters: one Protocol, checked by mypy, and the rules they share.

Above the hooks, operators, sensors, triggers and export see one interface whatever API answers:
:class:`~airflow_aip.hooks.vertex.VertexJobHook` (aiplatform v1) and
:class:`~airflow_aip.hooks.training.TrainingJobHook` (ml v1) implement :class:`JobClient` and
answer neutral job views (:mod:`airflow_aip.jobs.view`). The rules both share, "a cancel that the
API refuses because the job already ended is no error" (sync and async) and "a watch list answered
as last round is not parsed again", are written here once.
"""

from __future__ import annotations

import hashlib
import json
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import cache, partial
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from airflow_aip.exceptions import ApiError
from airflow_aip.jobs.backend import Backend
from airflow_aip.jobs.request import JobRequest
from airflow_aip.jobs.states import JobState
from airflow_aip.jobs.view import JobView
from airflow_aip.jobs.watch import WATCH_PAGE_SIZE, AsLast, Listed, WatchBatch

if TYPE_CHECKING:
    from airflow_aip.hooks.google_api import GoogleApiHook

Match = Callable[[list[dict[str, Any]]], dict[str, Listed]]


class JobClient(Protocol):
    """A job API as the adapters use it: find, create, read, cancel, resolve, watch in batches."""

    backend: ClassVar[Backend]
    impersonation_chain: list[str]  # who the hook acts as

    @property
    def project_id(self) -> str: ...

    def local_page(self, name: str) -> str | None: ...

    def find_job(self, job_id: str, kind: str | None = None) -> JobView | None:
        """The job our ID names, or None."""

    def create(self, request: JobRequest, job_id: str) -> JobView:
        """Create the job under ``job_id`` (JobAlreadyExistsError when the ID is taken)."""

    def read(self, name: str) -> JobView: ...

    async def aread(self, name: str) -> JobView: ...

    def cancel(self, name: str) -> bool:
        """Ask for cancellation; False when the job had already ended."""

    async def acancel(self, name: str) -> bool: ...

    def resolve(self, job_id: str) -> str:
        """The resource name of our job ID."""

    def logged_runs(self, job_ids: Sequence[str], since: str | None) -> dict[str, dict[str, Any]]:
        """Each job's Experiments run, by job ID (``airflow_aip.jobs.experiments``); {} where none."""

    def watch_batches(self, watched: Sequence[tuple[str, str]]) -> list[WatchBatch]: ...

    async def alist_batch(self, batch: WatchBatch) -> Mapping[str, Listed]: ...


def _ended_already(err: ApiError, state: Any) -> bool:
    """A cancel refused with 400 because the job is over (both APIs answer so): not an error."""
    return err.status == 400 and JobState.parse(state).is_terminal


def cancel_unless_ended(
    send: Callable[[], object], state_now: Callable[[], Any], log: Any, name: str
) -> bool:
    """Send a cancel; False (and a log line) when the API refused it because the job had ended."""
    try:
        send()
    except ApiError as err:
        if _ended_already(err, state_now()):
            log.info("Training job %s had already ended: nothing to cancel", name)
            return False
        raise
    log.info("Cancellation of training job %s requested", name)
    return True


async def acancel_unless_ended(
    send: Callable[[], Awaitable[object]], state_now: Callable[[], Awaitable[Any]], log: Any, name: str
) -> bool:
    """As :func:`cancel_unless_ended`, without blocking the event loop."""
    try:
        await send()
    except ApiError as err:
        if _ended_already(err, await state_now()):
            log.info("Training job %s had already ended: nothing to cancel", name)
            return False
        raise
    log.info("Cancellation of training job %s requested", name)
    return True


# A batch's last answer: its SHA-1 and what it said of each job (state, complete), while the
# poller keeps the batch (the same jobs, round after round).
_LAST_ANSWERS: weakref.WeakKeyDictionary[WatchBatch, tuple[bytes, dict[str, tuple[JobState, bool]]]] = (
    weakref.WeakKeyDictionary()
)


async def alist_watched(
    hook: GoogleApiHook,
    batch: WatchBatch,
    method: str,
    path: str,
    items: str,
    match: Match,
    read_mask: str | None = None,
) -> Mapping[str, Listed]:
    """A poll round's list call for ``batch``; ``match`` reads the jobs listed (``items``) as its reads.

    Most rounds change nothing, and parsing and matching 5,000 jobs' JSON for nothing was most of
    what a round cost the triggerer. So an answer byte for byte the batch's last is not parsed:
    the same bytes say the same states (:class:`~airflow_aip.jobs.watch.AsLast`: the poller
    re-arms the watches that heard them without a read per job), and a job's view is parsed from
    them only if a trigger needs it (news). A one-page answer is remembered by its digest, not
    kept. ``read_mask``: only the fields the wait and the budget guard read (Vertex AI's list
    takes a ``readMask``).
    """
    params: dict[str, Any] = {"filter": batch.filter, "pageSize": WATCH_PAGE_SIZE}
    if read_mask:
        params["readMask"] = read_mask
    content = await hook.arequest_bytes(method, "GET", path, params=params)
    digest = hashlib.sha1(content, usedforsecurity=False).digest()
    last = _LAST_ANSWERS.get(batch)
    if last is not None and last[0] == digest:
        return AsLast(last[1], partial(_view_of, cache(lambda: match(_items(content, items)[0]))))
    jobs, token = _items(content, items)
    if token:  # more than a page (two jobs carry one label): the rest, and nothing remembered
        jobs += await hook.alist_all(method, path, items, {**params, "pageToken": token})
        _LAST_ANSWERS.pop(batch, None)
        return match(jobs)
    found = match(jobs)
    _LAST_ANSWERS[batch] = (digest, {name: (read.state, read.complete) for name, read in found.items()})
    return found


def _items(content: bytes, items: str) -> tuple[list[dict[str, Any]], str | None]:
    page = json.loads(content) if content else {}
    return list(page.get(items) or []), page.get("nextPageToken")


def _view_of(reads: Callable[[], dict[str, Listed]], name: str) -> JobView:
    return reads()[name].view()

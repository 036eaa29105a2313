"""What every job hook offers the adapters: one Protocol, checked by mypy, and the rules they share.

Above the hooks, operators, sensors, triggers and export see one interface whatever API answers:
:class:`~airflow_aip.hooks.vertex.VertexJobHook` (aiplatform v1) and
:class:`~airflow_aip.hooks.training.TrainingJobHook` (ml v1) implement :class:`JobClient` and
answer neutral job views (:mod:`airflow_aip.jobs.view`). The rule both share, "a cancel that the
API refuses because the job already ended is no error", is written here once, sync and async.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar, Protocol

from airflow_aip.exceptions import ApiError
from airflow_aip.jobs.backend import Backend
from airflow_aip.jobs.request import JobRequest
from airflow_aip.jobs.states import JobState
from airflow_aip.jobs.view import JobView
from airflow_aip.jobs.watch import Listed, WatchBatch


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

    def watch_batches(self, watched: Sequence[tuple[str, str]]) -> list[WatchBatch]: ...

    async def alist_batch(self, batch: WatchBatch) -> dict[str, Listed]: ...


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

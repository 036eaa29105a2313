"""The live Training job tab: the job read from its API while the task waits, at most once per interval.

The API server has no operator object, so the submit operator and the sensor push how they reach
the job (:data:`airflow_aip.links.JOB_API_XCOM_KEY`) next to its id; from that this module builds
the same hook the task uses (connection, endpoint, impersonation, project, region) and reads the
job. Pages poll every :data:`REFRESH_SECONDS`; however many pages are open on a job, and however
many users, one process-wide :class:`LiveReads` makes at most one read per job per interval:
a cache entry per job lives that long (an ended job's, an hour), and a lock per job lets one
request read while the others wait for its answer (single-flight). A failed read is cached
too, so a broken connection is not hammered, and shown on the page as one line.

Once the task has ended its summary (or how its wait ended) is in XCom and no read is made (see
``app.task_payload``); only a task killed while it waited left none, and its job is read once.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Protocol

from airflow_aip.config import DEFERRAL_RACE
from airflow_aip.jobs.backends import backend_of
from airflow_aip.jobs.states import JobState
from airflow_aip.jobs.summary import summarize_job
from airflow_aip.jobs.vertex.ladder import RUNG_LABEL

if TYPE_CHECKING:
    from airflow_aip.hooks.job_client import JobClient

REFRESH_SECONDS = 5.0
# Task states in which the task still waits for (or is about to submit, or resubmit) its job.
WAITING_TASK_STATES = frozenset(
    {"scheduled", "queued", "running", "deferred", "up_for_retry", "up_for_reschedule", "restarting"}
)
# Only these may see a job that ended before the task did: it is about to finish, or to climb a
# rung (a deferred task whose trigger fired goes back through scheduled and queued to resume).
# Not up_for_retry: its job's end is the try's, and the next try submits anew.
ACTIVE_TASK_STATES = WAITING_TASK_STATES - {"up_for_retry"}
# An ended job no longer changes: its read is kept this long (a page of a killed task's job, or
# Browse listing it, reads it once, not every interval).
ENDED_TTL = 3600.0
# Past this many entries, expired ones are dropped on the next miss (one per open job is expected).
PRUNE_ABOVE = 256


class JobReader(Protocol):
    """What the tab needs of a job hook (a :class:`~airflow_aip.hooks.job_client.JobClient`)."""

    def read(self, name: str) -> dict[str, Any]: ...

    def cancel(self, name: str) -> bool: ...


HookFactory = Callable[[Mapping[str, Any]], JobReader]


def build_hook(api: Mapping[str, Any]) -> JobClient:
    """The task's own job hook, trying each request once: a page must not wait out a retry policy."""
    from airflow_aip.hooks.job_reference import JobApi

    reached = JobApi.from_json(api)
    if reached is None:
        raise ValueError(f"not a job API: {api!r}")
    return reached.job_hook(retry_attempts=1)


def job_api_of(value: Any) -> dict[str, Any] | None:
    """The pushed ``aip_job_api`` XCom (:meth:`~airflow_aip.hooks.job_reference.JobApi.for_job`)
    if it has that shape, else None."""
    from airflow_aip.hooks.job_reference import JobApi

    if not isinstance(value, Mapping) or not isinstance(value.get("name"), str) or not value["name"]:
        return None
    reached = JobApi.from_json(value)
    return None if reached is None else {"name": value["name"], **reached.to_json()}


@dataclass(frozen=True)
class LiveRead:
    """One read of a job: its summary and why it waits, or the line saying the read failed."""

    summary: dict[str, Any] | None
    waiting: str | None
    error: str | None


def why_it_waits(view: Mapping[str, Any]) -> str | None:
    """Why a job that has not started yet waits, as the wait step words it, and on which rung."""
    reason = backend_of(view).why_waiting(view)
    if reason is None:
        return None
    rung = (view.get("labels") or {}).get(RUNG_LABEL)
    return f"{reason}." + (f" Capacity ladder rung: {rung}." if rung else "")


class LiveReads:
    """Reads of running jobs shared by every request of the process: one per job per ``ttl``.

    Keyed by the job's resource name and how it is reached (two connections may see different
    things). ``hook_for`` builds a hook from those arguments; hooks are kept per arguments.
    """

    def __init__(
        self,
        ttl: float = REFRESH_SECONDS,
        hook_for: HookFactory = build_hook,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl = ttl
        self._hook_for = hook_for
        self._clock = clock
        self._guard = threading.Lock()  # over the dicts below, never held during a read
        self._locks: dict[str, threading.Lock] = {}
        self._entries: dict[str, tuple[float, LiveRead]] = {}
        self._hooks: dict[str, JobReader] = {}

    def read(self, api: Mapping[str, Any]) -> LiveRead:
        """The job's latest read: cached if younger than ``ttl``, else read by one request for all."""
        key = json.dumps(dict(api), sort_keys=True, default=str)
        fresh = self._fresh(key)
        if fresh is not None:
            return fresh
        with self._lock_for(key):
            fresh = self._fresh(key)  # another request read it while this one waited
            if fresh is not None:
                return fresh
            result = self._read(api)
            ended = result.summary is not None and JobState.parse(result.summary.get("state")).is_terminal
            with self._guard:
                self._entries[key] = (self._clock() + (ENDED_TTL if ended else self.ttl), result)
            return result

    def forget(self, api: Mapping[str, Any]) -> None:
        """Drop the job's cached read (after a cancel, so the next refresh shows it)."""
        key = json.dumps(dict(api), sort_keys=True, default=str)
        with self._guard:
            self._entries.pop(key, None)

    def hook(self, api: Mapping[str, Any]) -> JobReader:
        """The hook for these arguments (the job's name aside), built once."""
        key = json.dumps({k: v for k, v in api.items() if k != "name"}, sort_keys=True, default=str)
        with self._guard:
            hook = self._hooks.get(key)
        if hook is None:
            hook = self._hook_for(api)
            with self._guard:
                hook = self._hooks.setdefault(key, hook)
        return hook

    def _fresh(self, key: str) -> LiveRead | None:
        with self._guard:
            entry = self._entries.get(key)
        return entry[1] if entry is not None and entry[0] > self._clock() else None

    def _lock_for(self, key: str) -> threading.Lock:
        with self._guard:
            if len(self._entries) > PRUNE_ABOVE:
                now = self._clock()
                for stale in [k for k, (expires, _) in self._entries.items() if expires <= now]:
                    del self._entries[stale]
                    self._locks.pop(stale, None)
            return self._locks.setdefault(key, threading.Lock())

    def _read(self, api: Mapping[str, Any]) -> LiveRead:
        try:
            view = self.hook(api).read(str(api["name"]))
        except Exception as err:  # shown on the page: whatever went wrong, the tab stays up
            return LiveRead(None, None, f"could not read the job: {err}")
        return LiveRead(summarize_job(view), why_it_waits(view), None)


#: The process's one cache: the API server's request threads all share it.
LIVE_READS = LiveReads()


def keeps_refreshing(task_state: str | None, job_state: Any, *, run_active: bool = False) -> bool:
    """Whether the page should fetch again: the task still waits, and its job is not over.

    A job that ended while its task still waits (but for a retry) is still refreshed: the task is
    about to store its summary, or how it ended (or, on a capacity ladder, to climb a rung). A task
    with no state yet in a run that is queued or running (``run_active``) is about to be scheduled:
    a tab opened that early follows it to its job.
    """
    if task_state is None and run_active:
        return True
    if task_state not in WAITING_TASK_STATES:
        return False
    if job_state is None or not JobState.parse(job_state).is_terminal:
        return True
    return task_state in ACTIVE_TASK_STATES


def awaits_decision(
    has_job: bool, champion: Mapping[str, Any] | None, *, run_active: Callable[[], bool]
) -> bool:
    """Whether a training job's tab should fetch again for the champion decision of a later task.

    The job ended and its task stored it, but the export or registration that judges the model
    runs later in the same run: a tab left open would otherwise show the decision only after a
    reload. It follows the run until the decision arrives, or the run ends without one
    (``run_active`` is asked only when the rest holds: it reads the database).
    """
    return has_job and champion is None and run_active()


def resumes(
    task_state: str | None, job_state: Any, release_at: Callable[[], float | None], now: float | None = None
) -> dict[str, Any] | None:
    """Why a task whose job has ended still waits, or None (its job runs, or the task has ended).

    A deferred task's trigger holds the job's ending until ``release_at`` (``[aip] deferral_hold``
    after the deferral: :mod:`airflow_aip.triggers.hold`); then, and for a task back in the
    scheduler's hands (scheduled, queued, running), it resumes to store its summary or climb a
    rung. ``until`` (ISO, UTC) is when the hold ends, or None when it is no longer held.
    """
    if task_state not in ACTIVE_TASK_STATES or job_state is None or not JobState.parse(job_state).is_terminal:
        return None
    release = release_at() if task_state == "deferred" else None
    left = None if release is None else release - (time.time() if now is None else now)
    if left is None or left <= 0:
        return {"until": None, "seconds_left": None, "issue": DEFERRAL_RACE}
    until = datetime.fromtimestamp(release or 0.0, timezone.utc).isoformat(timespec="seconds")
    return {"until": until, "seconds_left": round(left, 1), "issue": DEFERRAL_RACE}

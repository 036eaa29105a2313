"""A fake Cloud Logging ``entries.list`` and a fake clock, for the shared log poller's tests.

The fake serves entries from memory, each visible from a simulated time on (Cloud Logging's
ingestion delay), and filters them with the local service's own filter parser, so the
poller's real filters (ORs of jobs, cursors) decide what comes back. It is plugged in as the
hook's ``alist_entries(body)``: the HTTP boundary.

``FakeTime`` is the only clock the poller sees. Its ``sleep`` jumps the clock instead of
waiting, and runs the actions a test scheduled (``at``) on the way, so a simulated ten minutes
takes what the CPU needs and nothing more.
"""

from __future__ import annotations

import asyncio
import bisect
import heapq
import itertools
import re
from collections import deque
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from airflow_aip.exceptions import ApiError
from airflow_aip.hooks.logs import JobLogsHook
from airflow_aip.jobs.logs import normalize_timestamp
from airflow_aip.local.logs.filters import Junction, Node, parse_filter, required_equalities

EPOCH = datetime(2024, 5, 1, tzinfo=timezone.utc)
TASK = "workerpool0-0"
_JOB_TERM = re.compile(r'resource\.labels\.job_id="([^"]+)"')
_JOB_SINCE = re.compile(r'resource\.labels\.job_id="([^"]+)" AND timestamp>="([^"]+)"')


class FakeTime:
    """A monotonic clock the poller's sleeps move; ``at(t, action)`` runs an action at time t."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now
        self.actions: list[tuple[float, int, Callable[[], object]]] = []

    def clock(self) -> float:
        return self.now

    def at(self, when: float, action: Callable[[], object]) -> None:
        bisect.insort(self.actions, (when, len(self.actions), action))

    async def sleep(self, seconds: float) -> None:
        """Jump to the end of the sleep, or to the first action before it: run it and return early
        (an action may concern the sleeper, which looks again at what it has to do)."""
        target = self.now + seconds
        if self.actions and self.actions[0][0] <= target:
            target = self.actions[0][0]
            self.now = max(self.now, target)
            while self.actions and self.actions[0][0] <= target:
                self.actions.pop(0)[2]()
        self.now = max(self.now, target)
        await asyncio.sleep(0)


def stamp(seconds: float, sequence: int = 0) -> str:
    """The RFC 3339 timestamp ``seconds`` (on the fake clock) plus ``sequence`` microseconds."""
    moment = EPOCH + timedelta(seconds=seconds, microseconds=sequence)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class FakeCloudLogging:
    """``entries.list`` over in-memory entries; ``errors`` are raised first, in order."""

    def __init__(self, time: FakeTime) -> None:
        self.time = time
        self.by_job: dict[str, list[tuple[str, str, float, dict[str, Any]]]] = {}
        self.errors: deque[Exception] = deque()
        self.calls: list[tuple[float, dict[str, Any]]] = []
        self.sequence = 0
        self.on_call: Callable[[dict[str, Any]], None] | None = None

    def add(self, job_id: str, count: int, *, visible_at: float = 0.0, together: bool = False) -> list[str]:
        """``count`` new lines of the job, written at ``visible_at`` (a microsecond apart, or
        ``together`` at one instant) and visible from then on; their messages, as relayed."""
        written = self.by_job.setdefault(job_id, [])
        messages = []
        instant = stamp(visible_at, self.sequence + 1)
        for _ in range(count):
            self.sequence += 1
            line = len(written)
            when = instant if together else stamp(visible_at, self.sequence)
            entry = {
                "insertId": f"{job_id}-{line:06d}",
                "timestamp": when,
                "severity": "INFO",
                "textPayload": f"{job_id} line {line}",
                "resource": {"type": "ml_job", "labels": {"job_id": job_id, "task_name": TASK}},
            }
            item = (normalize_timestamp(when) or "", str(entry["insertId"]), visible_at, entry)
            if written and item[:2] < written[-1][:2]:
                bisect.insort(written, item)
            else:
                written.append(item)
            messages.append(f"[{TASK}] {job_id} line {line}")
        return messages

    async def alist_entries(self, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((self.time.now, body))
        if self.on_call is not None:
            self.on_call(body)
        await asyncio.sleep(0)
        if self.errors:
            raise self.errors.popleft()
        text = str(body["filter"])
        matches = job_matcher(parse_filter(text))
        offset, size = int(body.get("pageToken") or 0), int(body["pageSize"])
        # Where each job's entries may start (its own cursor), only to skip what cannot match.
        starts = {job_id: "" for job_id in _JOB_TERM.findall(text)}
        starts |= {job_id: normalize_timestamp(since) or "" for job_id, since in _JOB_SINCE.findall(text)}
        merged = heapq.merge(
            *(
                self.by_job.get(job_id, [])[bisect.bisect_left(self.by_job.get(job_id, []), (since,)) :]
                for job_id, since in starts.items()
            )
        )
        # Lazily, in (timestamp, insertId) order: a page costs what it holds, not the whole log.
        wanted = (
            entry for _key, _id, visible_at, entry in merged if visible_at <= self.time.now and matches(entry)
        )
        found = list(itertools.islice(wanted, offset + size + 1))
        page: dict[str, Any] = {"entries": found[offset : offset + size]}
        if len(found) > offset + size:
            page["nextPageToken"] = str(offset + size)
        return page

    def reads_naming(self, job_id: str) -> int:
        return sum(1 for _, body in self.calls if f'job_id="{job_id}"' in body["filter"])


def job_matcher(node: Node | None) -> Callable[[dict[str, Any]], bool]:
    """``node.matches``, with an OR over jobs evaluated only in the parts that name the entry's job.

    The same answer (a part requiring ``job_id="X"`` matches no other job's entries) at a
    fraction of the cost: a batch ORs 150 jobs, and each entry would be tried against them all.
    """
    if node is None:
        return lambda entry: True
    if not (isinstance(node, Junction) and node.op == "AND"):
        return node.matches
    ors = [part for part in node.parts if isinstance(part, Junction) and part.op == "OR"]
    if len(ors) != 1:
        return node.matches
    rest = [part for part in node.parts if part is not ors[0]]
    by_job: dict[str, list[Node]] = {}
    for part in ors[0].parts:
        job_id = required_equalities(part).get(("resource", "labels", "job_id"))
        if job_id is None:
            return node.matches
        by_job.setdefault(job_id, []).append(part)

    def matches(entry: dict[str, Any]) -> bool:
        parts = by_job.get(str(entry["resource"]["labels"]["job_id"]), [])
        return any(part.matches(entry) for part in parts) and all(part.matches(entry) for part in rest)

    return matches


def throttled() -> ApiError:
    return ApiError(429, "Quota exceeded for quota metric 'Read requests'", method="entries.list")


def fake_hook(api: FakeCloudLogging, page_size: int = 1000, conn_id: str = "aip_missing_conn") -> JobLogsHook:
    hook = JobLogsHook(conn_id, project_id="proj", api_endpoint="http://127.0.0.1:8089/", page_size=page_size)
    hook.alist_entries = api.alist_entries  # type: ignore[method-assign]
    return hook

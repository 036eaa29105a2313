"""Per-job logs: written as the processes print, read back as Cloud Logging entries.

Each stdout/stderr line of every replica, and each message of the service itself, is stored
with its timestamp, task and trial id. They are served by ``aip-local jobs logs`` and by a
small Cloud Logging v2 ``entries:list`` endpoint, shaped like the entries Google writes for
AI Platform jobs (resource type ``ml_job``, labels ``job_id``/``task_name``, the trial id as
the ``ml.googleapis.com/trial_id`` label, stderr at severity ERROR), so a log streamer written
for Google reads them unchanged. A Vertex job's ``job_id`` is its numeric ID, its replicas'
``task_name`` ``workerpool0-0``...; a tuning job's trials log under its ID, tagged with their trial.

Timestamps never go back in the order entries are written: a reader that resumes from the
newest timestamp it saw (as Cloud Logging readers do) would otherwise skip a line stamped by
one thread just before another thread's line was written. That order is also what makes a
read of many jobs cheap: each job's lines are already sorted, so ``entries.list`` bisects each
job's log at its own ``timestamp>=`` cursor and merges the jobs, stopping once the page is full.

Page tokens are opaque; inside they hold an offset into the whole ordered answer.
In ``timestamp asc`` order (the readers' order) new lines are stamped no earlier than every
line served, so an offset stays on the line it pointed at (unless a new line ties the last one's
microsecond and sorts before it by insertId); in ``desc`` order new lines shift the pages.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.logs import SERVICE_TASK, TASK_LABEL, TRIAL_LABEL
from airflow_aip.local import pages
from airflow_aip.local.clock import rfc3339
from airflow_aip.local.logs.filter_pruning import FilterPlan, Residual, at_or_after, timestamp_floor
from airflow_aip.local.logs.filters import parse_filter
from airflow_aip.local.store import JOB_ID_FIELD, JobStore, JobView, project_number

MAX_PAGE_SIZE = 1000
ENTRY_JOB_ID = ("resource", "labels", "job_id")
ENTRY_TYPE = ("resource", "type")  # the same for every entry of a job, as are its job_id and project
RESOURCE_TYPE = "ml_job"
ENTRY_PROJECT = ("resource", "labels", "project_id")
# Stamp and append under one lock, and never stamp earlier than the previous entry: the replica
# pumps (stdout, stderr, every replica and trial) write from their own threads.
_WRITE_LOCK = threading.Lock()
_last_stamp = ""


class JobLog:
    """Appends to one job's log."""

    def __init__(self, store: JobStore, project: str, job_id: str) -> None:
        self.store = store
        self.project = project
        self.job_id = job_id

    def service(self, message: str, severity: str = "INFO", trial: str | None = None) -> None:
        """A message from the service about the job (state changes, installs, trial results)."""
        self._write(SERVICE_TASK, trial, severity, message)

    def replica(self, task: str, trial: str | None, stream: str, line: str) -> None:
        """A line a replica printed; stderr is ERROR, as Google records it."""
        self._write(task, trial, "ERROR" if stream == "stderr" else "INFO", line)

    def _write(self, task: str, trial: str | None, severity: str, message: str) -> None:
        global _last_stamp
        with _WRITE_LOCK:
            _last_stamp = stamp = max(rfc3339(), _last_stamp)
            entry = {"time": stamp, "severity": severity, "task": task, "trial": trial, "message": message}
            self.store.append_log(self.project, self.job_id, [entry])


def to_log_entry(project: str, job_id: str, index: int, stored: Mapping[str, Any]) -> dict[str, Any]:
    """A stored line as a Cloud Logging ``LogEntry``."""
    task = str(stored.get("task") or SERVICE_TASK)
    log_name = f"ml.googleapis.com%2F{job_id}" if task == SERVICE_TASK else task
    labels = {TASK_LABEL: task}
    if stored.get("trial"):
        labels[TRIAL_LABEL] = str(stored["trial"])
    return {
        "insertId": f"{job_id}-{index:08d}",
        "logName": f"projects/{project}/logs/{log_name}",
        "resource": {
            "type": RESOURCE_TYPE,
            "labels": {"job_id": job_id, "project_id": project, "task_name": task},
        },
        "timestamp": stored.get("time"),
        "receiveTimestamp": stored.get("time"),
        "severity": stored.get("severity", "INFO"),
        "textPayload": stored.get("message", ""),
        "labels": labels,
    }


def _page_offset(token: str | None) -> int:
    offset = pages.decode_token(token, lambda decoded: int(decoded["offset"])) or 0
    if offset < 0:
        raise ValidationError(pages.PAGE_TOKEN, pages.NOT_ISSUED)
    return offset


def _projects(names: Any) -> list[str]:
    """The projects ``resourceNames`` names, each also by number (Vertex jobs are kept under it)."""
    if not isinstance(names, list) or not names:
        raise ValidationError("resourceNames", "at least one projects/<project> is required")
    projects = []
    for name in names:
        if not isinstance(name, str) or not name.startswith("projects/") or name.count("/") != 1:
            raise ValidationError("resourceNames", f"only projects/<project> is supported, got {name!r}")
        project = name.split("/", 1)[1]
        projects += [project, project_number(project)]
    return projects


def list_entries(store: JobStore, request: Mapping[str, Any]) -> dict[str, Any]:
    """Cloud Logging ``entries.list`` over the stored job logs.

    ``resourceNames`` must name projects; ``filter`` is the usual filter language
    (``resource.labels.job_id`` terms, ORed or not, narrow the read to those jobs, and a
    ``timestamp>=`` beside one to that job's newer lines); ``orderBy`` is ``timestamp asc``
    (default) or ``timestamp desc``.
    """
    projects = _projects(request.get("resourceNames"))
    node = parse_filter(request.get("filter"))
    order = str(request.get("orderBy") or "timestamp asc").strip().lower()
    if order not in ("timestamp asc", "timestamp desc", "timestamp"):
        raise ValidationError("orderBy", "must be 'timestamp asc' or 'timestamp desc'")
    size = int(request.get("pageSize") or MAX_PAGE_SIZE)
    if not 0 < size <= MAX_PAGE_SIZE:
        raise ValidationError("pageSize", f"must be within 1..{MAX_PAGE_SIZE}")
    offset = _page_offset(request.get("pageToken"))
    descending = order.endswith("desc")

    plan = FilterPlan(node, ENTRY_JOB_ID)
    streams = []
    for view in store.job_views(projects, JOB_ID_FIELD, plan.candidates):
        # A Vertex job is kept under the project number, but Google logs it under the project ID.
        project_id = str(view.job.get("projectId") or view.project)
        residual = plan.residual(view.job_id, {ENTRY_TYPE: RESOURCE_TYPE, ENTRY_PROJECT: project_id})
        if residual is not False:
            streams.append(_job_entries(store, view, project_id, residual, descending))
    merged = heapq.merge(*streams, key=_order, reverse=descending)
    found = list(itertools.islice(merged, offset, offset + size + 1))
    page = found[:size]
    response: dict[str, Any] = {"entries": page} if page else {}
    if len(found) > size:
        response["nextPageToken"] = pages.encode_token({"offset": offset + size})
    return response


def _order(entry: Mapping[str, Any]) -> tuple[str, str]:
    return (entry["timestamp"] or "", entry["insertId"])


def _job_entries(
    store: JobStore, view: JobView, project_id: str, residual: Residual, descending: bool
) -> Iterator[dict[str, Any]]:
    """One job's matching entries in the answer's order, from the first its filter branch can match."""
    log = store.log_view(view.project, view.job_id)
    if not log.ordered:  # stamps that go back or do not parse: this job's lines read whole and sorted
        every = _matching(log.entries(), project_id, view.job_id, residual)
        return iter(sorted(every, key=_order, reverse=descending))
    floor = timestamp_floor(residual)
    start = log.first_at_or_after(floor)
    rest = at_or_after(residual, floor)  # what the bisect decided is not asked again per line
    lines = log.entries_reversed(start) if descending else log.entries(start)
    return _matching(lines, project_id, view.job_id, rest) if rest is not False else iter(())


def _matching(
    lines: Iterator[tuple[int, dict[str, Any]]], project_id: str, job_id: str, residual: Residual
) -> Iterator[dict[str, Any]]:
    for index, stored in lines:
        entry = to_log_entry(project_id, job_id, index, stored)
        if isinstance(residual, bool) or residual.matches(entry):
            yield entry

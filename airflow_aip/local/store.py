"""Job records and job logs on disk, so a restarted service still knows every job.

Layout under the data dir::

    projects/<project>/jobs/<jobId>/job.json    the record: the Job as the API returns it, plus
                                                 its creation order and the processes it runs
    projects/<project>/jobs/<jobId>/log.jsonl   one JSON object per log line
    projects/<project>/jobs/<jobId>/work/       working directories of its processes
    projects/<project>/jobs/<jobId>/packages/   its downloaded packageUris

Records are rewritten atomically (temporary file, fsync, rename): a crash leaves the old
record or the new one, never half of one. Reads are served from memory; the disk is the
source only at start-up.

Lists find jobs through indexes rather than scans (a poller lists 100 jobs by ID at once in a
project of thousands): by project in creation order, and by the fields in ``INDEXED_FIELDS``,
keyed as a filter's ``=`` compares values. A stored job dict is never changed in place (an
update swaps in a changed copy), so :meth:`JobStore.job_views` hands out the stored dicts
themselves, read-only, and only what a list returns is copied. Each job's log has an
append-only index (:mod:`airflow_aip.local.logs.index`), built on its first read and extended as it grows.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from airflow_aip.exceptions import JobAlreadyExistsError, JobNotFoundError, ValidationError
from airflow_aip.jobs.labels import JOB_ID_LABEL
from airflow_aip.local.logs.filters import equality_key
from airflow_aip.local.logs.index import LogIndex, LogView

RECORD_FILE = "job.json"
LOG_FILE = "log.jsonl"
# Google project IDs are lowercase; domain-scoped ones ("example.com:proj") carry dots and a colon.
_PROJECT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
FieldPath = tuple[str, ...]
JOB_ID_FIELD: FieldPath = ("jobId",)
# A Vertex job's record keeps the resource as created: our job ID's label, and its display name.
VERTEX_JOB_ID_LABEL_FIELD: FieldPath = ("resource", "labels", JOB_ID_LABEL)
VERTEX_DISPLAY_NAME_FIELD: FieldPath = ("resource", "displayName")
INDEXED_FIELDS = (JOB_ID_FIELD, VERTEX_JOB_ID_LABEL_FIELD, VERTEX_DISPLAY_NAME_FIELD)
IndexKey = float | str


def validate_project(project: str) -> str:
    """A project name that is safe as one directory name; anything else is refused."""
    if not _PROJECT.fullmatch(project) or ".." in project:
        raise ValidationError("parent", f"not a valid project name: {project!r}")
    return project


def project_number(project: str) -> str:
    """The project's number as the local service answers it: itself if numeric, else a stable 12 digits.

    Vertex AI names resources ``projects/<number>/...`` whether a client said the ID or the number;
    with no resource manager here, the number is derived from the ID, so both address one job.
    """
    if project.isdigit():
        return project
    digest = int(hashlib.sha256(project.encode()).hexdigest(), 16)
    return str(10**11 + digest % (9 * 10**11))


def safe_child(base: Path, name: str) -> Path:
    """``base / name`` when ``name`` is one plain path component, else ValidationError.

    Object names and ids come from requests: ``..``, separators, absolute paths and NUL
    must never let them address a file outside ``base``.
    """
    if not name or name in {".", ".."} or "\0" in name or "/" in name or "\\" in name:
        raise ValidationError("name", f"not a safe file name: {name!r}")
    child = base / name
    if child.resolve().parent != base.resolve():
        raise ValidationError("name", f"escapes its directory: {name!r}")
    return child


def write_json_atomic(path: Path, value: Any) -> None:
    """Replace ``path`` with ``value`` as JSON in one rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(value, handle, indent=1, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass
class JobRecord:
    """One job: the public Job body plus what only the service needs."""

    project: str
    job: dict[str, Any]
    seq: int
    processes: list[dict[str, int]] = field(default_factory=list)

    @property
    def job_id(self) -> str:
        return str(self.job["jobId"])

    def to_json(self) -> dict[str, Any]:
        return {"project": self.project, "seq": self.seq, "job": self.job, "processes": self.processes}


class JobView(NamedTuple):
    """A stored job as a list reads it: never to be changed (copy what you return)."""

    seq: int
    project: str
    job: Mapping[str, Any]

    @property
    def job_id(self) -> str:
        return str(self.job["jobId"])


def _index_keys(job: Mapping[str, Any], path: FieldPath) -> set[IndexKey]:
    """The keys a job is found under for ``path``: each value there (a list: each item), as ``=`` sees it."""
    value: Any = job
    for segment in path:
        if not isinstance(value, Mapping) or segment not in value:
            return set()
        value = value[segment]
    values = value if isinstance(value, list) else [value]
    return {key for item in values if (key := equality_key(item)) is not None}


class JobStore:
    """Thread-safe job records and logs under ``data_dir``."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._log_locks: dict[tuple[str, str], threading.Lock] = {}
        self._log_indexes: dict[tuple[str, str], LogIndex] = {}
        self._records: dict[tuple[str, str], JobRecord] = {}
        # Per project, its records in creation order (dicts keep insertion order; seq only grows).
        self._by_project: dict[str, dict[str, JobRecord]] = {}
        self._indexes: dict[FieldPath, dict[tuple[str, IndexKey], set[str]]] = {f: {} for f in INDEXED_FIELDS}
        self._seq = 0
        for record in sorted(self._load(), key=lambda r: r.seq):
            self._remember(record)
            self._seq = max(self._seq, record.seq)

    def _remember(self, record: JobRecord) -> None:
        self._records[(record.project, record.job_id)] = record
        self._by_project.setdefault(record.project, {})[record.job_id] = record
        self._index(record, add=True)

    def _index(self, record: JobRecord, *, add: bool) -> None:
        for path, index in self._indexes.items():
            for key in _index_keys(record.job, path):
                ids = index.setdefault((record.project, key), set())
                if add:
                    ids.add(record.job_id)
                else:
                    ids.discard(record.job_id)
                    if not ids:
                        del index[(record.project, key)]

    def _load(self) -> Iterator[JobRecord]:
        for path in sorted(self.data_dir.glob(f"projects/*/jobs/*/{RECORD_FILE}")):
            try:
                raw = json.loads(path.read_text(encoding="utf-8"))
                yield JobRecord(raw["project"], raw["job"], int(raw["seq"]), list(raw.get("processes", [])))
            except (OSError, ValueError, KeyError, TypeError):
                # A record we cannot read is left on disk untouched for a human to inspect.
                continue

    def job_dir(self, project: str, job_id: str) -> Path:
        projects = self.data_dir / "projects"
        return safe_child(safe_child(projects, validate_project(project)) / "jobs", job_id)

    def _persist(self, record: JobRecord) -> None:
        write_json_atomic(self.job_dir(record.project, record.job_id) / RECORD_FILE, record.to_json())

    def create(self, project: str, job: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        """Store a new job, returning its creation order; 409 if the project has one with that id."""
        job_id = str(job["jobId"])
        with self._lock:
            if (project, job_id) in self._records or (self.job_dir(project, job_id) / RECORD_FILE).exists():
                raise JobAlreadyExistsError(
                    409,
                    f"Field: job.job_id Error: A job with id '{job_id}' already exists in project {project}.",
                )
            self._seq += 1
            record = JobRecord(project, copy.deepcopy(dict(job)), self._seq)
            self._persist(record)
            self._remember(record)
            return record.seq, copy.deepcopy(record.job)

    def _record(self, project: str, job_id: str) -> JobRecord:
        record = self._records.get((project, job_id))
        if record is None:
            raise JobNotFoundError(
                404, f"Field: name Error: Job projects/{project}/jobs/{job_id} does not exist."
            )
        return record

    def get(self, project: str, job_id: str) -> dict[str, Any]:
        with self._lock:
            return copy.deepcopy(self._record(project, job_id).job)

    def update(self, project: str, job_id: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Apply ``change`` to the stored job under the lock and persist it; returns a copy."""
        with self._lock:
            record = self._record(project, job_id)
            job = copy.deepcopy(record.job)
            change(job)
            self._persist(JobRecord(record.project, job, record.seq, record.processes))
            self._index(record, add=False)
            record.job = job
            self._index(record, add=True)
            return copy.deepcopy(job)

    def delete(self, project: str, job_id: str) -> None:
        """Forget a job: its record, log, work and package directories."""
        with self._lock:
            record = self._record(project, job_id)
            self._index(record, add=False)
            del self._records[(project, job_id)]
            del self._by_project[project][job_id]
            self._log_locks.pop((project, job_id), None)
            self._log_indexes.pop((project, job_id), None)
            shutil.rmtree(self.job_dir(project, job_id), ignore_errors=True)

    def set_processes(self, project: str, job_id: str, processes: Iterable[Mapping[str, int]]) -> None:
        """Remember the job's live processes, so a restart can stop what a crash left behind."""
        with self._lock:
            record = self._record(project, job_id)
            record.processes = [dict(p) for p in processes]
            self._persist(record)

    def records(self) -> list[JobRecord]:
        """Copies of every record, oldest first."""
        with self._lock:
            ordered = sorted(self._records.values(), key=lambda r: r.seq)
            return [JobRecord(r.project, copy.deepcopy(r.job), r.seq, list(r.processes)) for r in ordered]

    def list_jobs(self, project: str) -> list[tuple[int, dict[str, Any]]]:
        """Copies of the project's jobs as ``(seq, job)``, newest first (as ``gcloud ... jobs list``)."""
        with self._lock:
            mine = reversed(self._by_project.get(project, {}).values())
            return [(r.seq, copy.deepcopy(r.job)) for r in mine]

    def job_views(
        self, projects: Iterable[str], field: FieldPath | None = None, values: Iterable[str] | None = None
    ) -> list[JobView]:
        """The projects' jobs, oldest first, read-only; with ``field`` and ``values``, only the jobs whose
        ``field`` equals one of ``values`` as a filter's ``=`` compares them (an index lookup, no scan).

        ``values=None`` means any value (every job of the projects). ``field`` must be in INDEXED_FIELDS.
        """
        wanted = list(dict.fromkeys(projects))
        with self._lock:
            if field is None or values is None:
                chosen = [r for p in wanted for r in self._by_project.get(p, {}).values()]
            else:
                index = self._indexes[field]
                keys = {key for value in values if (key := equality_key(value)) is not None}
                found = {(p, job_id) for p in wanted for key in keys for job_id in index.get((p, key), ())}
                chosen = [self._records[found_key] for found_key in found]
            if len(wanted) > 1 or values is not None:
                chosen.sort(key=lambda r: r.seq)
            return [JobView(r.seq, r.project, r.job) for r in chosen]

    def append_log(self, project: str, job_id: str, entries: Iterable[Mapping[str, Any]]) -> None:
        """Append log entries (one JSON object per line) to the job's log."""
        lines = "".join(json.dumps(dict(e), sort_keys=True) + "\n" for e in entries)
        if not lines:
            return
        with self._lock:
            lock = self._log_locks.setdefault((project, job_id), threading.Lock())
        path = self.job_dir(project, job_id) / LOG_FILE
        with lock:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as handle:
                handle.write(lines)

    def log_view(self, project: str, job_id: str) -> LogView:
        """The job's log as indexed now, after indexing the lines appended since the last read."""
        key = (project, job_id)
        with self._lock:
            index = self._log_indexes.get(key)
            if index is None:
                index = LogIndex(self.job_dir(project, job_id) / LOG_FILE)
                if key in self._records:  # kept only for jobs that exist: a typo costs no memory
                    self._log_indexes[key] = index
        return index.refresh()

    def read_log(self, project: str, job_id: str) -> list[dict[str, Any]]:
        """Every log entry of the job, in the order written; a torn last line is not read (yet)."""
        return [dict(stored) for _, stored in self.log_view(project, job_id).entries()]

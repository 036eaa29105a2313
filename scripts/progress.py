"""`make demo`'s progress: what changed between two looks at the run, printed as it happens.

Each look (a :class:`Snapshot`) is the run's task states, read from Airflow's metadata DB through
SQLAlchemy (the home's PostgreSQL, or SQLite where there is none: `scripts.postgres`), and the
project's jobs, read from the training service. :class:`ProgressTracker` turns successive
looks into events: a task starts or ends, a job changes state, a trial finishes (with its metric
and the best so far). The printers show them: plain lines when the output is not a terminal, the
same lines plus a live status line redrawn in place on a terminal.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import sqlalchemy
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from airflow_aip.jobs.trials import objective_value

RUNNING_TASK = frozenset({"running", "deferred", "up_for_reschedule", "up_for_retry"})
ENDED_TASK = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})
ENDED_TRIAL = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})


@dataclass(frozen=True)
class Snapshot:
    """One look at the run: task id -> state, the jobs as the service lists them, and the tasks
    known to have started (a start date) whatever their state says: `airflow dags test` keeps a
    deferred task "queued" while it runs the trigger inline."""

    tasks: Mapping[str, str | None]
    jobs: Sequence[Mapping[str, Any]] = ()
    started: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Event:
    kind: str  # task_started | task_ended | job_state | trial_ended
    text: str


@dataclass
class ProgressTracker:
    """Remembers what was already told, so each start, end, state and trial is told once."""

    tasks: dict[str, str | None] = field(default_factory=dict)
    started: set[str] = field(default_factory=set)
    job_states: dict[str, str] = field(default_factory=dict)
    trials_told: set[tuple[str, str]] = field(default_factory=set)
    best: dict[str, float] = field(default_factory=dict)

    def update(self, snapshot: Snapshot) -> list[Event]:
        events = self._tasks(snapshot.tasks, snapshot.started)
        for job in snapshot.jobs:
            events += self._job(job)
        return events

    def _tasks(self, tasks: Mapping[str, str | None], started: frozenset[str]) -> list[Event]:
        events = []
        for task_id, state in tasks.items():
            before = self.tasks.get(task_id)
            if state == before and (task_id in self.started or task_id not in started):
                continue
            self.tasks[task_id] = state
            # Told once, though a deferred task passes through "scheduled" on its way back; a task
            # seen only once it ended (a fast one, between two looks) still gets both lines.
            begun = state in RUNNING_TASK or state in ENDED_TASK or task_id in started
            if begun and task_id not in self.started:
                self.started.add(task_id)
                events.append(Event("task_started", f"task {task_id} started"))
            if state in ENDED_TASK and state != before:
                events.append(Event("task_ended", f"task {task_id} ended: {state}"))
        return events

    def _job(self, job: Mapping[str, Any]) -> list[Event]:
        """``job``: the neutral job view (``airflow_aip.jobs.view``), from either backend."""
        job_id, state = str(job.get("job_id")), str(job.get("state"))
        events = []
        if self.job_states.get(job_id) != state:
            self.job_states[job_id] = state
            shown = f" ({job['name']})" if job.get("name") else ""
            events.append(Event("job_state", f"job {job_id}: {state}{shown}"))
        maximize = job.get("goal", "MAXIMIZE") != "MINIMIZE"
        metric = job.get("hyperparameter_metric_tag") or "metric"
        trials = job.get("trials") or []
        for trial in sorted(trials, key=lambda t: int(t.get("trialId", 0))):
            key = (job_id, str(trial.get("trialId")))
            if trial.get("state") not in ENDED_TRIAL or key in self.trials_told:
                continue
            self.trials_told.add(key)
            events.append(Event("trial_ended", self._trial_text(job_id, trial, metric, maximize)))
        # the job's end is told after its last trials
        if events and events[0].kind == "job_state" and state in ENDED_TRIAL:
            events.append(events.pop(0))
        return events

    def _trial_text(self, job_id: str, trial: Mapping[str, Any], metric: str, maximize: bool) -> str:
        value = objective_value(trial)
        best = self.best.get(job_id)
        improves = best is None or (value is not None and (value > best if maximize else value < best))
        if value is not None and trial.get("state") == "SUCCEEDED" and improves:
            self.best[job_id] = best = value
        params = " ".join(f"{k}={_short(v)}" for k, v in (trial.get("hyperparameters") or {}).items())
        shown = f"{value:.4f}" if value is not None else "none"
        so_far = f"{best:.4f}" if best is not None else "none"
        return (
            f"trial {trial.get('trialId')} {trial.get('state')}: {params}  "
            f"{metric}={shown}  best so far={so_far}"
        )

    def status(self) -> str:
        """One line for the live display: what is running now, trials done, the best so far."""
        running = [t for t, s in self.tasks.items() if t in self.started and s not in ENDED_TASK]
        done = len(self.trials_told)
        best = list(self.best.values())[-1] if self.best else None  # the latest job's
        parts = [f"running: {', '.join(running) or '—'}", f"trials done: {done}"]
        if best is not None:
            parts.append(f"best: {best:.4f}")
        return " · ".join(parts)


def _short(value: Any) -> str:
    """A hyperparameter as people read it: 4 significant digits for a number, else as given."""
    try:
        return f"{float(value):.4g}"
    except (TypeError, ValueError):
        return str(value)


class PlainPrinter:
    """One line per event, with the seconds since the start: for logs, CI and pipes."""

    def __init__(self, out: TextIO, started: float) -> None:
        self.out, self.started = out, started

    def show(self, events: Sequence[Event], tracker: ProgressTracker) -> None:
        for event in events:
            print(f"[{time.monotonic() - self.started:4.0f}s] {event.text}", file=self.out, flush=True)

    def close(self) -> None:
        pass


class LivePrinter(PlainPrinter):
    """The same lines, and below them a status line redrawn in place (a terminal only)."""

    SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"

    def __init__(self, out: TextIO, started: float) -> None:
        super().__init__(out, started)
        self.ticks = 0

    def show(self, events: Sequence[Event], tracker: ProgressTracker) -> None:
        self.out.write("\r\x1b[K")
        super().show(events, tracker)
        self.ticks += 1
        spin = self.SPINNER[self.ticks % len(self.SPINNER)]
        elapsed = time.monotonic() - self.started
        self.out.write(f"\x1b[1m{spin} {elapsed:4.0f}s\x1b[0m {tracker.status()}")
        self.out.flush()

    def close(self) -> None:
        self.out.write("\r\x1b[K")
        self.out.flush()


def printer_for(out: TextIO = sys.stdout, started: float | None = None) -> PlainPrinter:
    started = time.monotonic() if started is None else started
    return LivePrinter(out, started) if out.isatty() else PlainPrinter(out, started)


@functools.cache
def _engine(db: str) -> sqlalchemy.Engine:
    """One engine per metadata DB (its connections pooled between looks); a SQLite file is read-only."""
    if db.startswith("sqlite:///"):
        path = db.removeprefix("sqlite:///")
        return sqlalchemy.create_engine(f"sqlite:///file:{path}?mode=ro&uri=true", poolclass=NullPool)
    return sqlalchemy.create_engine(db, pool_size=1, pool_pre_ping=True)


def _rows(db: str, query: str, **params: str) -> list[tuple[Any, ...]]:
    with _engine(db).connect() as conn:
        return [tuple(row) for row in conn.execute(sqlalchemy.text(query), params)]


LATEST_RUN = "FROM dag_run WHERE dag_id = :dag_id ORDER BY id DESC LIMIT 1"


def look(db: str, dag_id: str, jobs: Sequence[Mapping[str, Any]]) -> Snapshot:
    """The Dag's latest run, read from Airflow's metadata DB (``db``: its SQLAlchemy URL; nothing
    before it exists), and ``jobs``."""
    try:
        rows = _rows(
            db,
            "SELECT task_id, state, start_date FROM task_instance WHERE dag_id = :dag_id AND run_id = "
            f"(SELECT run_id {LATEST_RUN}) "
            "ORDER BY start_date IS NULL, start_date, task_id",
            dag_id=dag_id,
        )
    except SQLAlchemyError:  # not migrated yet, or busy: the next look will tell
        return Snapshot({}, jobs)
    started = frozenset(task_id for task_id, _, start in rows if start is not None)
    return Snapshot({task_id: state for task_id, state, _ in rows}, jobs, started)


def latest_run_state(db: str, dag_id: str) -> str | None:
    """The state of the Dag's latest run (``success``, ``failed``...), None before it exists."""
    try:
        rows = _rows(db, f"SELECT state {LATEST_RUN}", dag_id=dag_id)
    except SQLAlchemyError:  # not migrated yet, or busy: the next look will tell
        return None
    return str(rows[0][0]) if rows else None


def latest_run_id(db: str, dag_id: str) -> str | None:
    rows = _rows(db, f"SELECT run_id {LATEST_RUN}", dag_id=dag_id)
    return str(rows[0][0]) if rows else None

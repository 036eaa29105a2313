"""Climb a capacity ladder: find where the task had got to, and create the next rung's job, once.

The rules are the model's (:mod:`airflow_aip.jobs.vertex.ladder`, :mod:`airflow_aip.jobs.vertex.capacity`);
this fetches and creates. The jobs are the ladder's memory: every try of the task scans the
rungs in order, and a rung whose last job ended for capacity is passed, so a retry on any
worker resumes at the rung it had reached and never creates a rung's job twice
(:func:`~airflow_aip.operators.submission.submit_job` adopts or moves to ``_rN`` as without a
ladder). A create refused for a resource quota leaves no job: the next rung is tried at once,
and a retry tries that rung's create again (the quota may have been raised).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from airflow_aip.exceptions import CapacityRefusedError
from airflow_aip.jobs.adoption import Tries
from airflow_aip.jobs.request import JobRequest
from airflow_aip.jobs.vertex.capacity import QUOTA, Ending, rung_ending
from airflow_aip.jobs.vertex.ladder import Rung, rung_job_id
from airflow_aip.jobs.vertex.ladder_trials import Earlier, continue_study, rung_record
from airflow_aip.jobs.view import JobView
from airflow_aip.operators.submission import submit_job

if TYPE_CHECKING:
    from airflow_aip.hooks.job_client import JobClient

HookFor = Callable[..., "JobClient"]  # (region, **retry): the job hook of a region (the task's own: None)
Afford = Callable[[int, JobRequest], "str | None"]  # why rung i's request is over budget, or None
BUDGET = "budget"  # a rung not climbed to: its worst case passes what is left of the budget


@dataclass
class Position:
    """Where the ladder stands: rung ``index`` and its job (None: every rung ended for capacity)."""

    index: int
    job: JobView | None
    records: list[dict[str, Any]] = field(default_factory=list)  # the rungs passed, in order
    earlier: list[Earlier] = field(default_factory=list)  # their tuning jobs, whose trials count


def _latest(hook: JobClient, base_id: str, rung: Rung, kind: str) -> JobView | None:
    """The rung's most recent job (its highest attempt), or None when it has none."""
    latest = None
    for attempt in range(1, 101):
        found = hook.find_job(rung_job_id(base_id, rung, attempt), kind)
        if found is None:
            return latest
        latest = found
    return latest


def climb(
    hook_for: HookFor,
    requests: Sequence[JobRequest],
    rungs: Sequence[Rung],
    base_id: str,
    *,
    if_exists: str,
    log: Any,
    create: bool = True,
    earlier: Sequence[Earlier] = (),
    tries: Tries | None = None,
    afford: Afford | None = None,
    told: set[str] | None = None,
) -> Position:
    """Scan the rungs; pass those that ended for capacity; create (or adopt) the first other one.

    ``create=False`` only looks: the rung reached and its latest job (for the summary once the
    wait has ended). ``earlier``: jobs before the ladder whose trials count (resumePreviousJobId).
    ``tries``: after a clear, the rungs' jobs that ended before it are a past run's: the ladder
    starts again at rung 1 (unless one of them still runs: the clear adopts it, as a retry would).
    ``afford``: with a budget, a rung after the first that has no job yet is passed when its worst
    case passes what is left (:func:`airflow_aip.operators.spending.unaffordable`), in either mode.
    ``told``: the rungs whose passing this task has logged already (a climb is logged once, at
    WARNING, when it happens; a later scan, and a look with ``create=False``, say nothing).
    """
    position = Position(0, None, earlier=list(earlier))
    told = told if told is not None else set()
    if tries is not None and tries.first > 1 and _still_running(hook_for, requests, rungs, base_id, tries):
        tries = None  # a job from before the clear still runs: this try resumes that run
    for index, (rung, request) in enumerate(zip(rungs, requests, strict=True)):
        position.index = index
        hook = hook_for(request.region)
        latest = _latest(hook, base_id, rung, request.kind)
        if latest is not None and tries is not None and tries.not_this_runs(latest):
            latest = None  # a past run's: neither passed nor adopted
        ending = rung_ending(latest, rung, time.time()) if latest is not None else None
        if ending is None and latest is None and index > 0 and afford is not None:
            refused = afford(index, request)
            ending = Ending(BUDGET, refused) if refused else None
        if ending is None:
            if not create:
                position.job = latest
                return position
            asked = _with_budget(request, position, rung, first=index == 0)
            try:
                position.job = submit_job(hook, asked, _ids(base_id, rung), if_exists, log, tries)
                return position
            except CapacityRefusedError as err:
                ending = Ending(QUOTA, f"create refused for quota {err.metrics}")
        _passed(position, index, rung, latest if ending.reason != QUOTA else None, ending)
        key = f"{index}:{(latest or {}).get('job_id')}"
        if create and key not in told:
            told.add(key)
            _log_climb(log, index, rung, ending)
    position.index, position.job = len(rungs), None
    return position


def _still_running(
    hook_for: HookFor, requests: Sequence[JobRequest], rungs: Sequence[Rung], base_id: str, tries: Tries
) -> bool:
    """Whether a rung's latest job was made before the last clear and has not ended."""
    for rung, request in zip(rungs, requests, strict=True):
        job = _latest(hook_for(request.region), base_id, rung, request.kind)
        if job is not None and tries.before_clear(job) and not tries.not_this_runs(job):
            return True
    return False


def _ids(base_id: str, rung: Rung) -> Callable[[int], str]:
    return lambda attempt: rung_job_id(base_id, rung, attempt)


def _with_budget(request: JobRequest, position: Position, rung: Rung, *, first: bool) -> JobRequest:
    """A tuning rung after others ran trials gets what is left of the budget (jobs.ladder_trials)."""
    views = [view for _, view in position.earlier]
    if first and not views:
        return request
    return replace(request, body=continue_study(request.body, views, rung.label))


def _passed(position: Position, index: int, rung: Rung, view: JobView | None, ending: Ending) -> None:
    record = rung_record(index, rung, view, ending, time.time())
    position.records.append(record)
    if view is not None and view.get("is_hyperparameter_tuning_job"):
        position.earlier.append((rung.label, view))


def _log_climb(log: Any, index: int, rung: Rung, ending: Ending) -> None:
    if ending.reason == BUDGET:
        log.warning(
            "Capacity ladder: not climbing to rung %d, %s: %s", index + 1, rung.describe(), ending.detail
        )
        return
    log.warning(
        "Capacity ladder: rung %d, %s, ended (%s): %s; trying the next rung",
        index + 1,
        rung.describe(),
        ending.reason,
        ending.detail,
    )

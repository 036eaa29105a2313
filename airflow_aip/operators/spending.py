"""What a task's run has spent, read back from its jobs, and the budget's checks around a submit.

A retry or a user's clear of a task runs again under the same run: what its earlier tries'
jobs cost counts against the budget. Airflow's state knows nothing of that (a clear resets try
numbers and XCom), so it is read back from the jobs themselves: every attempt's job of every rung
the task may create (the IDs are the task's own, ``_r2``, ``_r3``...), kept when its
``airflow-run-id`` label is this run's. Each is estimated from its own times
(:func:`airflow_aip.jobs.cost.estimate`); the model decides (:mod:`airflow_aip.jobs.budget`),
this fetches.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from airflow_aip.exceptions import BudgetExceededError
from airflow_aip.jobs.budget import Budget, preflight
from airflow_aip.jobs.cost import estimate, worst_case
from airflow_aip.jobs.ids import with_attempt
from airflow_aip.jobs.labels import RUN_ID_LABEL
from airflow_aip.jobs.pricing import PriceTable
from airflow_aip.jobs.request import JobRequest
from airflow_aip.jobs.states import JobState
from airflow_aip.jobs.vertex.ladder import Rung, rung_job_id
from airflow_aip.jobs.view import JobView

if TYPE_CHECKING:
    from airflow_aip.hooks.job_client import JobClient

MAX_ATTEMPTS = 100  # as the ladder's scan: no task makes more attempts of one job ID


def run_jobs(
    hook_for: Callable[..., JobClient],
    requests: Sequence[JobRequest],
    rungs: Sequence[Rung],
    base_id: str,
) -> list[JobView]:
    """Every job this task made in this run: each rung's (or the plain job's) attempts, in order."""
    out: list[JobView] = []
    for index, request in enumerate(requests):
        rung = rungs[index] if rungs else None
        hook = hook_for(request.region)
        run = (request.body.get("labels") or {}).get(RUN_ID_LABEL)
        for attempt in range(1, MAX_ATTEMPTS + 1):
            job_id = rung_job_id(base_id, rung, attempt) if rung else with_attempt(base_id, attempt)
            found = hook.find_job(job_id, request.kind)
            if found is None:
                break
            if run is None or (found.get("labels") or {}).get(RUN_ID_LABEL) == run:
                out.append(found)
    return out


def spent(jobs: Sequence[JobView], table: PriceTable, log: Any, *, but: str = "") -> float:
    """What these jobs cost so far (all but the one named ``but``); a job with no estimate is
    said, and counts nothing (the guard then errs on the side of letting the job run)."""
    total = 0.0
    now = time.time()
    for job in jobs:
        if job.get("name") == but:
            continue
        figure = estimate(job, table, now)
        if figure.amount is None:
            log.warning("Earlier try %s of this run: %s", job.get("job_id"), figure.text())
        total += figure.amount or 0.0
    return total


def check_before_submit(
    request: JobRequest,
    jobs: Sequence[JobView],
    budget: Budget,
    table: PriceTable,
    log: Any,
    *,
    refuse: bool,
    what: str = "job",
) -> None:
    """Log a worst case over what is left of the budget, or raise BudgetExceededError when refused.

    A job of this run still running is never refused: it is adopted, and its wait is guarded.
    """
    if any(_adoptable(job) for job in jobs):
        return
    worst = worst_case(request.backend.usage(request.body), request.region or "", table)
    decided = preflight(worst, budget, spent_before=spent(jobs, table, log), refuse=refuse, what=what)
    if decided.refused:
        raise BudgetExceededError(decided.line)
    if decided.line:
        log.warning("%s", decided.line)


def _adoptable(job: JobView) -> bool:
    """A job of this run the submit may adopt: one that has not ended, nor is being cancelled."""
    state = JobState.parse(job.get("state"))
    return not state.is_terminal and state is not JobState.CANCELLING


def unaffordable(request: JobRequest, left: float, table: PriceTable) -> str | None:
    """Why a ladder does not climb to this rung (its worst case passes what is left), or None.

    A worst case the table cannot price does not stop the climb: no decision on a guess.
    """
    worst = worst_case(request.backend.usage(request.body), request.region or "", table)
    if worst.amount is None or worst.amount <= left:
        return None
    return (
        f"its worst case, {worst.currency} {worst.amount:.2f} (estimate, price table of "
        f"{worst.table_date}), passes the {max(0.0, left):.2f} left of the budget"
    )

"""Create a job under its task-derived ID, or do what the model's adoption rule says.

Every try of a task instance asks for the same ID, so what happens when it is taken is the
whole of "retries never duplicate a job and never re-attach to a failed one". Who made the
existing job and what to do about it is decided once, by
:func:`airflow_aip.jobs.decide_adoption` (its module has the table); this only fetches, asks
and acts: adopt, try the next attempt ID (``_r2``...), or raise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from airflow_aip.exceptions import JobAlreadyExistsError, JobSpecMismatchError, ValidationError
from airflow_aip.hooks.training import TrainingJobHook
from airflow_aip.jobs import IF_EXISTS, MAX_ATTEMPTS, Action, decide_adoption

__all__ = ["IF_EXISTS", "submit_job"]


def submit_job(
    hook: TrainingJobHook,
    body: dict[str, Any],
    project_id: str,
    id_for: Callable[[int], str],
    if_exists: str,
    log: Any,
) -> dict[str, Any]:
    """Create the job, or adopt/skip past an existing one with the same ID; return the job.

    ``id_for(n)`` names attempt ``n`` (1 = the base ID). Creating first and reading on 409 keeps
    the common path to one request and is race-free: two tries creating at once meet at the 409.
    """
    for attempt in range(1, MAX_ATTEMPTS + 1):
        job_id = id_for(attempt)
        try:
            return hook.create_job({**body, "jobId": job_id}, project_id)
        except JobAlreadyExistsError as taken:
            existing = hook.get_job(job_id, project_id)
            decision = decide_adoption(body, existing, if_exists=if_exists, first_sent=taken.first_sent)
            log.info("%s", decision.describe(job_id, str(existing.get("state"))))
            if decision.action is Action.ADOPT:
                return existing
            if decision.action is Action.FAIL_EXISTS:
                raise
            if decision.action is Action.FAIL_MISMATCH:
                raise JobSpecMismatchError(job_id, list(decision.differing)) from None
    raise ValidationError("job_id", f"no free attempt ID within {MAX_ATTEMPTS} attempts of {id_for(1)}")

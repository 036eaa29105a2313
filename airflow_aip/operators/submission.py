"""Create a job under its task-derived ID, or do what the model's adoption rule says.

Every try of a task instance asks for the same ID, so what happens when it is taken is the
whole of "retries never duplicate a job and never re-attach to a failed one". Who made the
existing job and what to do about it is decided once, by
:func:`airflow_aip.jobs.decide_adoption` (its module has the table); this only fetches, asks
and acts: adopt, try the next attempt ID (``_r2``...), or raise.

The two backends find a taken ID differently, through the same hook methods:

- ml v1 IDs are the client's: the create is sent first, and a 409 says the ID is taken (one
  request on the common path, and race-free: two tries creating at once meet at the 409);
- Vertex AI assigns its own IDs, so nothing would stop a second create: the ID is looked up
  first (label and displayName), and a create whose answer was lost is settled by lookups
  before it is ever sent again (:mod:`airflow_aip.hooks.vertex`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from airflow_aip.exceptions import JobAlreadyExistsError, JobSpecMismatchError, ValidationError
from airflow_aip.jobs import IF_EXISTS, MAX_ATTEMPTS, Action, Tries, decide_adoption
from airflow_aip.jobs.request import JobRequest
from airflow_aip.jobs.view import JobView

if TYPE_CHECKING:
    from airflow_aip.hooks.job_client import JobClient

__all__ = ["IF_EXISTS", "submit_job"]


def submit_job(
    hook: JobClient,
    request: JobRequest,
    id_for: Callable[[int], str],
    if_exists: str,
    log: Any,
    tries: Tries | None = None,
) -> JobView:
    """Create the job, or adopt/skip past an existing one with the same ID; return its view.

    ``id_for(n)`` names attempt ``n`` (1 = the base ID); ``tries``: this try in Airflow's record,
    which tells a retry (adopts) from a clear (trains anew once the job ended).
    """
    for attempt in range(1, MAX_ATTEMPTS + 1):
        job_id = id_for(attempt)
        taken: JobAlreadyExistsError | None = None
        existing = hook.find_job(job_id, request.kind) if request.backend.server_assigns_ids else None
        if existing is None:
            try:
                return hook.create(request, job_id)
            except JobAlreadyExistsError as err:
                existing, taken = hook.find_job(job_id, request.kind), err
                if existing is None:
                    raise
        first_sent = taken.first_sent if taken is not None else None
        decision = decide_adoption(
            request.compared(job_id), existing, if_exists=if_exists, first_sent=first_sent, tries=tries
        )
        log.info("%s", decision.describe(job_id, str(existing.get("state"))))
        if decision.action is Action.ADOPT:
            return existing
        if decision.action is Action.FAIL_EXISTS:
            raise taken or JobAlreadyExistsError(
                409, f"Training job {job_id} already exists", method="create"
            )
        if decision.action is Action.FAIL_MISMATCH:
            raise JobSpecMismatchError(job_id, list(decision.differing)) from None
    raise ValidationError("job_id", f"no free attempt ID within {MAX_ATTEMPTS} attempts of {id_for(1)}")

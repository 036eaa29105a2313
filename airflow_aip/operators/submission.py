"""Create a job under its run-derived ID, or decide what an existing job with that ID means.

The job ID comes from the run, so every try of a task asks for the same ID; what happens when it
is taken is the whole of "retries never duplicate a job and never re-attach to a failed one":

- ``adopt`` (default): the same trainingInput is our own earlier try's job, and we wait on it;
  a different one is JobSpecMismatchError, listing the differing fields;
- a job that ended FAILED or CANCELLED is never re-adopted: the next attempt ID (``_r2``...);
- ``new``: always the next free attempt ID; ``fail``: JobAlreadyExistsError.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from airflow_aip.exceptions import JobAlreadyExistsError, JobSpecMismatchError, ValidationError
from airflow_aip.hooks.training import TrainingJobHook
from airflow_aip.jobs import JobState, diff_training_input

IF_EXISTS = ("adopt", "fail", "new")
MAX_ATTEMPTS = 100


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
        except JobAlreadyExistsError:
            if if_exists == "fail":
                raise
            existing = hook.get_job(job_id, project_id)
        state = JobState.parse(existing.get("state"))
        if if_exists == "new" or state.is_failure:
            log.info("Training job %s exists (%s): trying the next attempt ID", job_id, state.value)
            continue
        differing = diff_training_input(body["trainingInput"], existing.get("trainingInput") or {})
        if differing:
            raise JobSpecMismatchError(job_id, differing)
        log.info("Adopting existing training job %s (%s) with the same trainingInput", job_id, state.value)
        return existing
    raise ValidationError("job_id", f"no free attempt ID within {MAX_ATTEMPTS} attempts of {id_for(1)}")

"""One study over several jobs: the trial budget left, the trials of all, and each rung's record. Pure.

A tuning job whose rung lost its capacity after some trials finished continues on the next rung
with only what is left of the budget; ml v1's ``resumePreviousJobId`` means the same on Vertex AI
(the earlier job's finished trials count). Vertex AI cannot seed a new study with earlier trials,
so the search itself starts afresh; what carries over is the budget and the choice of the best:

- ``maxTrialCount`` becomes what is left after the earlier jobs' finished trials (SUCCEEDED or
  INFEASIBLE), at least 1; ``parallelTrialCount`` is cut to fit it. ``maxFailedTrialCount`` is
  left as the user set it.
- The continuing job writes below ``{baseOutputDirectory}{label}/`` (and its ``--job-dir``
  argument follows): Vertex AI numbers every job's trials from 1, and ``<output dir>/<trial id>``
  of two jobs would be the same folder.
- The best trial is chosen over the trials of every job; each trial says which job (and rung)
  ran it, and where its output is, so export reads the right folder.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_aip.jobs.cost import estimate
from airflow_aip.jobs.pricing import PriceTable
from airflow_aip.jobs.states import JobState
from airflow_aip.jobs.times import queued_seconds, ran_seconds
from airflow_aip.jobs.trials import best_trial
from airflow_aip.jobs.vertex.body import TRIAL_JOB_SPEC, job_spec_key
from airflow_aip.jobs.vertex.capacity import Ending
from airflow_aip.jobs.vertex.ladder import RUNG_LABEL, Rung

JOB_DIR_FLAGS = ("--job-dir", "--job_dir")
FINISHED = ("SUCCEEDED", "FAILED")  # trial states (AI Platform's vocabulary) that used up budget

Earlier = tuple[str, Mapping[str, Any]]  # (what ran it: a rung label or "previous", the job's view)


def finished_trials(views: Sequence[Mapping[str, Any]]) -> int:
    return sum(1 for view in views for t in view.get("trials") or [] if t.get("state") in FINISHED)


def continue_study(
    body: Mapping[str, Any], earlier: Sequence[Mapping[str, Any]], folder: str
) -> dict[str, Any]:
    """A HyperparameterTuningJob body that runs what ``earlier`` jobs left of its trial budget.

    ``folder`` names the subfolder of the output directory its trials write to (see the module).
    A CustomJob body, or no earlier trials, comes back unchanged.
    """
    if job_spec_key(body) != TRIAL_JOB_SPEC or not earlier:
        return dict(body)
    out = copy.deepcopy(dict(body))
    done = finished_trials(earlier)
    left = max(1, int(out.get("maxTrialCount") or 1) - done)
    out["maxTrialCount"] = left
    out["parallelTrialCount"] = min(int(out.get("parallelTrialCount") or 1), left)
    output = out[TRIAL_JOB_SPEC].get("baseOutputDirectory") or {}
    prefix = str(output.get("outputUriPrefix") or "")
    if prefix:
        moved = f"{prefix.rstrip('/')}/{folder}/"
        output["outputUriPrefix"] = moved
        for pool in out[TRIAL_JOB_SPEC].get("workerPoolSpecs") or []:
            for program in ("pythonPackageSpec", "containerSpec"):
                if (pool.get(program) or {}).get("args"):
                    pool[program]["args"] = _moved_job_dir(pool[program]["args"], prefix, moved)
    return out


def _moved_job_dir(args: list[str], old: str, new: str) -> list[str]:
    """``--job-dir`` (as AI Platform passed it, and the translation appends it) follows the output."""
    out, follows = [], False
    for arg in args:
        flag, _, value = arg.partition("=")
        if follows and arg.rstrip("/") == old.rstrip("/"):
            arg = new.rstrip("/")
        elif flag in JOB_DIR_FLAGS and value.rstrip("/") == old.rstrip("/"):
            arg = f"{flag}={new.rstrip('/')}"
        out.append(arg)
        follows = arg in JOB_DIR_FLAGS
    return out


def annotated_trials(ran_by: str, view: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The job's trials, each saying which job and rung ran it and where its output is."""
    extra = {"job_id": view.get("job_id"), "rung": ran_by, "output_dir": view.get("output_dir")}
    return [{**dict(trial), **extra} for trial in view.get("trials") or []]


def rung_record(
    position: int, rung: Rung, view: Mapping[str, Any] | None, ending: Ending | None, now: float
) -> dict[str, Any]:
    """What the summary says of one rung: its job, how it ended, why, how long it waited and ran."""
    view = view or {}
    waited, ran = queued_seconds(view, now), ran_seconds(view, now)
    return {
        "rung": position + 1,
        "label": rung.label,
        "strategy": rung.strategy,
        "placement": rung.describe(),
        "region": view.get("region") or rung.region,
        "job_id": view.get("job_id"),
        "name": view.get("name"),
        "state": view.get("state") or ("NOT_CREATED" if ending else None),
        "ended_because": ending.reason if ending else None,
        "detail": ending.detail if ending else None,
        "waited_seconds": round(waited, 1) if waited is not None else None,
        "ran_seconds": round(ran, 1) if ran is not None else None,
        "trials_finished": finished_trials([view]) if view.get("is_hyperparameter_tuning_job") else None,
        "cost": estimate(view, PriceTable.load(), now).to_json() if view.get("name") else None,
    }


def with_ladder(
    summary: Mapping[str, Any], rungs: list[dict[str, Any]], earlier: Sequence[Earlier], ran_by: str | None
) -> dict[str, Any]:
    """The job summary with each rung's record and, for a study over several jobs, every trial.

    ``best_trial`` is then chosen over all of them (by the study's goal); ``trials`` lists the
    earlier jobs' first, each trial annotated (:func:`annotated_trials`).
    """
    out = dict(summary)
    if rungs:
        out["ladder"] = rungs
    tuned_before = [(label, view) for label, view in earlier if view.get("is_hyperparameter_tuning_job")]
    out["earlier_jobs"] = [
        str(view.get("name")) for _, view in tuned_before
    ]  # resource names: export reads them
    if not summary.get("is_hyperparameter_tuning_job") or not tuned_before:
        return out
    trials = [t for label, view in tuned_before for t in annotated_trials(label, view)]
    trials += annotated_trials(ran_by or "", {**summary, "trials": summary.get("trials") or []})
    out["trials"] = trials
    out["best_trial"] = best_trial(trials, summary.get("goal"))
    return out


# Each rung's part in a run, in the ladder's records: the rungs passed ended for capacity; the
# rung reached runs, then ran; those after it wait to be needed, and are not needed once it ended.
PASSED, RUNNING, RAN, IF_NEEDED, NOT_NEEDED = "out of capacity", "running", "ran", "if needed", "not needed"


def every_rung(
    rungs: Sequence[Rung],
    passed: Sequence[Mapping[str, Any]],
    current: Mapping[str, Any] | None,
    *,
    ended: bool,
) -> list[dict[str, Any]]:
    """Every configured rung's record, in order, each with its ``status``: a reader of the ladder
    sees the rungs not reached too (a Spot job that ran leaves STANDARD "not needed", not unsaid).

    ``passed``: the records of the rungs that ended for capacity; ``current``: the rung reached
    (None when every rung ran out); ``ended``: whether that rung's job has ended.
    """
    out = [{**dict(record), "status": PASSED} for record in passed]
    if current is not None:
        out.append({**dict(current), "status": RAN if ended else RUNNING})
    for index in range(len(out), len(rungs)):
        rung = rungs[index]
        later = rung_record(index, rung, None, None, 0.0)
        out.append({**later, "state": None, "status": NOT_NEEDED if ended else IF_NEEDED})
    return out


def with_rungs(summary: Mapping[str, Any], ladder: Any, now: float | None = None) -> dict[str, Any]:
    """A running job's summary (read live, without a ladder) with the rungs its task announced,
    brought up to the read: the announced records are as the task saw them when it created the
    job (QUEUED, running), and a page shows the job's header and its row from the same read.

    The job's row (by ID, else by its ``aip_rung`` label) takes the read's state, times and
    part (running; ran once it ended); a rung before it still marked running was passed (a task
    only moves on for capacity); after a job that SUCCEEDED, the rungs after it are not needed.
    """
    if summary.get("ladder") or not isinstance(ladder, list) or not ladder:
        return dict(summary)
    rows = [dict(r) if isinstance(r, Mapping) else r for r in ladder]
    job_id, label = summary.get("job_id"), (summary.get("labels") or {}).get(RUNG_LABEL)
    records = [(i, r) for i, r in enumerate(rows) if isinstance(r, dict)]
    mine = next((i for i, r in records if job_id and r.get("job_id") == job_id), None)
    if mine is None:
        mine = next((i for i, r in records if label and r.get("label") == label), None)
    if mine is not None:
        rows = _brought_up(rows, mine, summary, now)
    return {**summary, "ladder": rows}


def _brought_up(rows: list[Any], mine: int, summary: Mapping[str, Any], now: float | None) -> list[Any]:
    state = JobState.parse(summary.get("state"))
    waited, ran = queued_seconds(summary, now), ran_seconds(summary, now)
    rows[mine] = {
        **rows[mine],
        "job_id": summary.get("job_id"),
        "name": summary.get("name") or rows[mine].get("name"),
        "state": summary.get("state"),
        "status": RAN if state.is_terminal else RUNNING,
        "waited_seconds": round(waited, 1) if waited is not None else None,
        "ran_seconds": round(ran, 1) if ran is not None else None,
    }
    if summary.get("is_hyperparameter_tuning_job"):
        rows[mine]["trials_finished"] = finished_trials([summary])
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or i == mine:
            continue
        if i < mine and row.get("status") == RUNNING:
            rows[i] = {**row, "status": PASSED}
        elif i > mine and state.is_success and row.get("status") == IF_NEEDED:
            rows[i] = {**row, "status": NOT_NEEDED}
    return rows


def rung_position(summary: Mapping[str, Any]) -> dict[str, Any] | None:
    """Which rung, of how many, the summary's job runs (or ran) on, and where: "rung 1 of 2 · SPOT".

    Found by the job's ID in the ladder's records, else by its ``aip_rung`` label; None for a job
    without a ladder. The placement is the rung's strategy, else the rung as its ladder says it.
    """
    ladder = [r for r in summary.get("ladder") or [] if isinstance(r, Mapping)]
    job_id, label = summary.get("job_id"), (summary.get("labels") or {}).get(RUNG_LABEL)
    mine = next((r for r in ladder if job_id and r.get("job_id") == job_id), None)
    mine = mine or next((r for r in ladder if label and r.get("label") == label), None)
    if mine is None:
        return None
    placement = str(mine.get("strategy") or mine.get("placement") or mine.get("label") or "")
    number = mine.get("rung")
    return {
        "rung": number,
        "of": len(ladder),
        "label": mine.get("label"),
        "placement": placement,
        "text": f"rung {number} of {len(ladder)} · {placement}",
    }

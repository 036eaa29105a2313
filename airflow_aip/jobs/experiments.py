"""Which Vertex AI Experiments run a job's trainer logged to, and what it logged: the one rule.

A trainer finds its own job in ``CLOUD_ML_JOB_ID`` (on Vertex AI a tuning trial's is the trial's
own CustomJob, named by ``Trial.customJob``), so a run named after it is the job's, or the
trial's, without any other wiring:

    aiplatform.init(experiment="my-experiment")
    aiplatform.start_run(f"run-{job_id}")   # job_id: the trainer's CLOUD_ML_JOB_ID; or the ID alone

The SDK makes the run a context named ``<experiment>-<run>``, so the rule is: **an experiment run
(schema ``system.ExperimentRun``) whose context ID ends with ``-<job ID>`` is that job's.** Only
runs created after the job was are read (the hook's list filter), so an older job's run of the
same name cannot be taken for it. Vertex's own link (``jobSpec.experimentRun``, which the SDK's
``CustomJob.run(experiment_run=...)`` sets) names a single job's run, and a tuning job's trials
have none of their own; naming by ``CLOUD_ML_JOB_ID`` works for both.

Pure: the hook lists the runs (``hooks/vertex.py``), the worker adds them to the summary, the UI
reads the summary.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

EXPERIMENT_RUN_SCHEMA = "system.ExperimentRun"
METRICS_KEY, PARAMS_KEY = "_metrics", "_params"  # where the SDK keeps a run's (metadata/constants.py)


def _last(name: Any) -> str:
    return str(name or "").rstrip("/").rsplit("/", 1)[-1]


def run_job_ids(summary: Mapping[str, Any]) -> list[str]:
    """The job IDs whose runs to look for: each trial's own CustomJob, or the job's own ID."""
    trials = [t for t in summary.get("trials") or [] if isinstance(t, Mapping)]
    if summary.get("is_hyperparameter_tuning_job"):
        return list(dict.fromkeys(_last(t.get("customJob")) for t in trials if t.get("customJob")))
    job = _last(summary.get("name"))
    return [job] if job else []


def logged_run(context: Mapping[str, Any]) -> dict[str, Any]:
    """What a run context shows: its name, experiment, metrics and parameters (numbers and text)."""
    found = context.get("metadata")
    metadata: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    parents = context.get("parentContexts") or []
    return {
        "run": str(context.get("name", "")),
        "experiment": _last(parents[0]) if parents else None,
        "metrics": dict(metadata.get(METRICS_KEY) or {}),
        "params": dict(metadata.get(PARAMS_KEY) or {}),
    }


def runs_by_job(contexts: Iterable[Mapping[str, Any]], job_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Each job's run among ``contexts`` (oldest first), by the module's rule; the newest wins a tie."""
    wanted = {f"-{job_id}": job_id for job_id in job_ids if job_id}
    found: dict[str, dict[str, Any]] = {}
    for context in contexts:
        if context.get("schemaTitle") != EXPERIMENT_RUN_SCHEMA:
            continue
        context_id = _last(context.get("name"))
        for suffix, job_id in wanted.items():
            if context_id.endswith(suffix):
                found[job_id] = logged_run(context)
    return found


def with_logged_runs(summary: Mapping[str, Any], runs: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The summary with each trial's run (``experimentRun`` on the trial), or the job's
    (``experiment_run``); unchanged when nothing was logged."""
    out = dict(summary)
    if not runs:
        return out
    if summary.get("is_hyperparameter_tuning_job"):
        trials = []
        for trial in summary.get("trials") or []:
            trial = dict(trial)
            run = runs.get(_last(trial.get("customJob"))) if trial.get("customJob") else None
            if run is not None:
                trial["experimentRun"] = dict(run)
            trials.append(trial)
        out["trials"] = trials
    elif (run := runs.get(_last(summary.get("name")))) is not None:
        out["experiment_run"] = dict(run)
    return out

"""The job summary every waiter returns to XCom: one shape for operator, sensor and trigger.

Built from the Job resource alone (no API call), JSON-serialisable, so the trigger can put it
in its event and the extra link can read its URL from XCom while the UI renders.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

from airflow_aip.jobs.states import JobState
from airflow_aip.jobs.trials import DEFAULT_METRIC_TAG, best_trial

CONSOLE_JOB_URL = "https://console.cloud.google.com/ai-platform/jobs/{job_id}?{query}"


def console_url(project_id: str, job_id: str) -> str:
    """The job's page in the Google Cloud console."""
    return CONSOLE_JOB_URL.format(job_id=quote(job_id, safe=""), query=urlencode({"project": project_id}))


def _project_from_name(job: Mapping[str, Any]) -> str | None:
    """Some answers (and the local service) carry ``name: projects/{p}/jobs/{id}``."""
    name = job.get("name")
    if isinstance(name, str) and name.startswith("projects/"):
        return name.split("/")[1] or None
    return None


def summarize_job(job: Mapping[str, Any], project_id: str | None = None) -> dict[str, Any]:
    """What a DAG wants to know about a job, JSON-serialisable.

    Keys: job_id, project_id, state, job_dir, console_url, error_message, create_time,
    start_time, end_time, labels, training_output, is_hyperparameter_tuning_job,
    hyperparameter_metric_tag, goal, parameters, trials, best_trial.

    ``parameters`` is the tuned hyperparameters' names, types and scales (from the spec), so the
    UI can draw a log axis for a log-scaled one without asking the API again.
    """
    job_id = str(job.get("jobId", ""))
    project_id = project_id or _project_from_name(job)
    training_input: Mapping[str, Any] = job.get("trainingInput") or {}
    output: dict[str, Any] = dict(job.get("trainingOutput") or {})
    spec: Mapping[str, Any] = training_input.get("hyperparameters") or {}
    trials = list(output.get("trials") or [])
    tuning = bool(output.get("isHyperparameterTuningJob") or spec)
    goal = spec.get("goal") or "MAXIMIZE"
    return {
        "job_id": job_id,
        "project_id": project_id,
        "state": JobState.parse(job.get("state")).value,
        "job_dir": training_input.get("jobDir"),
        "console_url": console_url(project_id, job_id) if project_id and job_id else None,
        "error_message": job.get("errorMessage") or None,
        "create_time": job.get("createTime"),
        "start_time": job.get("startTime"),
        "end_time": job.get("endTime"),
        "labels": dict(job.get("labels") or {}),
        "training_output": output,
        "is_hyperparameter_tuning_job": tuning,
        "hyperparameter_metric_tag": (
            output.get("hyperparameterMetricTag") or spec.get("hyperparameterMetricTag") or DEFAULT_METRIC_TAG
            if tuning
            else None
        ),
        "goal": goal if tuning else None,
        "parameters": _parameters(spec) if tuning else [],
        "trials": trials,
        "best_trial": best_trial(trials, goal) if tuning else None,
    }


def _parameters(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each tuned hyperparameter's name, type and scale, in the spec's order."""
    out = []
    for param in spec.get("params") or []:
        if isinstance(param, Mapping) and param.get("parameterName"):
            out.append(
                {
                    "name": str(param["parameterName"]),
                    "type": param.get("type"),
                    "scale": param.get("scaleType"),
                }
            )
    return out

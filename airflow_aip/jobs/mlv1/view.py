"""An ml v1 ``Job`` as the neutral job view (:mod:`airflow_aip.jobs.view`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_aip.jobs.states import JobState
from airflow_aip.jobs.trials import DEFAULT_METRIC_TAG, Goal
from airflow_aip.jobs.view import AI_PLATFORM, JobView


def ml_job_name(project_id: str, job_id: str) -> str:
    """``projects/{project}/jobs/{job}``: the resource name every ml v1 job method takes."""
    return f"projects/{project_id}/jobs/{job_id}"


def _ml_project(job: Mapping[str, Any], project_id: str | None) -> str | None:
    name = job.get("name")
    if project_id:
        return project_id
    if isinstance(name, str) and name.startswith("projects/"):
        return name.split("/")[1] or None
    return None


def ml_parameters(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each tuned hyperparameter's name, type and scale (ml v1's HyperparameterSpec), in order."""
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


def view_from_ml(job: Mapping[str, Any], project_id: str | None = None) -> JobView:
    """An ml v1 ``Job`` as the neutral view."""
    job_id = str(job.get("jobId", ""))
    project = _ml_project(job, project_id)
    training_input: Mapping[str, Any] = job.get("trainingInput") or {}
    output: Mapping[str, Any] = job.get("trainingOutput") or {}
    spec: Mapping[str, Any] = training_input.get("hyperparameters") or {}
    tuning = bool(output.get("isHyperparameterTuningJob") or spec)
    return {
        "backend": AI_PLATFORM,
        "job_id": job_id,
        "name": ml_job_name(project or "", job_id) if project else str(job.get("name") or ""),
        "log_id": job_id,
        "project_id": project,
        "region": training_input.get("region"),
        "state": JobState.parse(job.get("state")).value,
        "error_message": job.get("errorMessage") or None,
        "error_code": None,  # ml v1 has no error code: a failed job says why in errorMessage
        "create_time": job.get("createTime"),
        "start_time": job.get("startTime"),
        "end_time": job.get("endTime"),
        "labels": dict(job.get("labels") or {}),
        "output_dir": training_input.get("jobDir"),
        "image_uri": (training_input.get("masterConfig") or {}).get("imageUri"),  # a custom container's
        "is_hyperparameter_tuning_job": tuning,
        "hyperparameter_metric_tag": (
            output.get("hyperparameterMetricTag") or spec.get("hyperparameterMetricTag") or DEFAULT_METRIC_TAG
            if tuning
            else None
        ),
        "goal": Goal.parse(spec.get("goal")).value if tuning else None,
        "parameters": ml_parameters(spec) if tuning else [],
        "trials": [dict(t) for t in output.get("trials") or []],
        "usage": None,  # AI Platform Training is shut down: no price table for its machines
        "spec": {"trainingInput": dict(training_input)},
    }

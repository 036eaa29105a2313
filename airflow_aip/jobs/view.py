"""The backend-neutral job view: what the hooks hand up, whatever API answered.

Wire formats stop at the hooks. ml v1 answers a ``Job`` with ``jobId``, ``trainingInput`` and
``trainingOutput``; Vertex AI a ``CustomJob`` or ``HyperparameterTuningJob`` with a numeric
``name``, ``JOB_STATE_*`` and ``trials[].finalMeasurement``. Each backend's module turns its
answer into this one mapping (:func:`view_from_ml` here, :func:`.vertex_view.view_from_vertex`),
so the wait step, the adoption rule, the summary in XCom, export, links and the UI read one
shape. It is a plain JSON-serialisable dict, because it crosses a trigger's event.

Keys:

- ``backend``: ``vertex`` or ``ai_platform``;
- ``job_id``: our ID (ml v1's ``jobId``; on Vertex the ``displayName``, also a label);
- ``name``: the resource name that addresses the job on its API (``projects/p/jobs/ID`` or
  ``projects/123/locations/us-central1/customJobs/456``); ``log_id``: the ID its Cloud Logging
  entries carry (``resource.labels.job_id``): the last segment of ``name``;
- ``project_id``, ``region``, ``state`` (a :class:`.states.JobState` value), ``error_message``,
  ``create_time``, ``start_time``, ``end_time``, ``labels``;
- ``output_dir``: ml v1's ``jobDir``, Vertex's ``baseOutputDirectory``;
- ``is_hyperparameter_tuning_job``, ``hyperparameter_metric_tag``, ``goal``, ``parameters``
  (name, type and scale of each tuned hyperparameter), ``trials``: in AI Platform's vocabulary
  (``trialId``, ``state``, ``hyperparameters``, ``finalMetric{trainingStep, objectiveValue}``),
  which our users' DAGs already read;
- ``spec``: the job as its API holds it, for the adoption rule's comparison only (never in XCom).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_aip.jobs.states import JobState
from airflow_aip.jobs.trials import DEFAULT_METRIC_TAG

AI_PLATFORM = "ai_platform"
VERTEX = "vertex"
BACKENDS = (VERTEX, AI_PLATFORM)

JobView = dict[str, Any]


def check_backend(value: object) -> str:
    """``backend`` is one we serve; else a ValidationError naming the field."""
    from airflow_aip.exceptions import ValidationError

    if value not in BACKENDS:
        raise ValidationError("backend", f"must be one of {', '.join(BACKENDS)}, got {value!r}")
    return str(value)


def last_segment(name: str) -> str:
    return name.rstrip("/").rsplit("/", 1)[-1]


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
        "create_time": job.get("createTime"),
        "start_time": job.get("startTime"),
        "end_time": job.get("endTime"),
        "labels": dict(job.get("labels") or {}),
        "output_dir": training_input.get("jobDir"),
        "is_hyperparameter_tuning_job": tuning,
        "hyperparameter_metric_tag": (
            output.get("hyperparameterMetricTag") or spec.get("hyperparameterMetricTag") or DEFAULT_METRIC_TAG
            if tuning
            else None
        ),
        "goal": (spec.get("goal") or "MAXIMIZE") if tuning else None,
        "parameters": ml_parameters(spec) if tuning else [],
        "trials": [dict(t) for t in output.get("trials") or []],
        "spec": {"trainingInput": dict(training_input)},
    }

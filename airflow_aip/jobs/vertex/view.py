"""A Vertex AI ``CustomJob`` or ``HyperparameterTuningJob`` as the neutral job view (:mod:`.view`).

Every state is mapped explicitly (``JOB_STATE_*`` names, or proto numbers when a client asked
for them): PENDING is PREPARING, UPDATING is still RUNNING, PAUSED and EXPIRED end the wait
without success, and PARTIALLY_SUCCEEDED ("some results may be missing") is a failure: only a
job that did all its work is a success. Trials come back in AI Platform's vocabulary, which our
users' DAGs read: INFEASIBLE (Vertex's only way for a trial to fail) is FAILED, so it can never
be the best trial; STOPPING (stopped early by the service) is still RUNNING until it ends.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_aip.jobs.states import JobState
from airflow_aip.jobs.trials import DEFAULT_METRIC_TAG, Goal
from airflow_aip.jobs.vertex.enums import ENUM_NUMBERS
from airflow_aip.jobs.vertex.usage import usage_of
from airflow_aip.jobs.view import VERTEX, JobView, last_segment

TUNING_KIND = "hyperparameterTuningJobs"
CUSTOM_KIND = "customJobs"
JOB_STATES: dict[str, JobState] = {
    "JOB_STATE_UNSPECIFIED": JobState.STATE_UNSPECIFIED,
    "JOB_STATE_QUEUED": JobState.QUEUED,
    "JOB_STATE_PENDING": JobState.PREPARING,
    "JOB_STATE_RUNNING": JobState.RUNNING,
    "JOB_STATE_UPDATING": JobState.RUNNING,
    "JOB_STATE_SUCCEEDED": JobState.SUCCEEDED,
    "JOB_STATE_FAILED": JobState.FAILED,
    "JOB_STATE_PARTIALLY_SUCCEEDED": JobState.FAILED,
    "JOB_STATE_CANCELLING": JobState.CANCELLING,
    "JOB_STATE_CANCELLED": JobState.CANCELLED,
    "JOB_STATE_PAUSED": JobState.PAUSED,
    "JOB_STATE_EXPIRED": JobState.EXPIRED,
}
TRIAL_STATES: dict[str, str] = {
    "STATE_UNSPECIFIED": "STATE_UNSPECIFIED",
    "REQUESTED": "QUEUED",
    "ACTIVE": "RUNNING",
    "STOPPING": "RUNNING",
    "SUCCEEDED": "SUCCEEDED",
    "INFEASIBLE": "FAILED",
}
_STATE_NAMES = {
    number: name for name, number in ENUM_NUMBERS["GoogleCloudAiplatformV1CustomJob.state"].items()
}
_TRIAL_NAMES = {number: name for name, number in ENUM_NUMBERS["GoogleCloudAiplatformV1Trial.state"].items()}
_VALUE_SPECS = {
    "doubleValueSpec": "DOUBLE",
    "integerValueSpec": "INTEGER",
    "categoricalValueSpec": "CATEGORICAL",
    "discreteValueSpec": "DISCRETE",
}


# What a watched job's list read must carry (a list's ``readMask``): what the wait step, the log
# stream, the budget guard (the pools, the scheduling, the times) and an ended custom job's summary
# read from :func:`view_from_vertex`, and no more. A mask path stops at a repeated field (FieldMask's
# rule), so a pool comes whole. A tuning job's trials are read with a get once it has ended.
# ``updateTime`` is left out: nothing reads it, and a job whose other fields are as last round's
# then answers byte for byte the same (the poller parses nothing for it).
_WATCHED = "name,displayName,state,createTime,startTime,endTime,error,labels"
WATCHED_FIELDS = {
    CUSTOM_KIND: f"{_WATCHED},jobSpec.workerPoolSpecs,jobSpec.scheduling,jobSpec.baseOutputDirectory",
    TUNING_KIND: f"{_WATCHED},studySpec,maxTrialCount,parallelTrialCount,"
    "trialJobSpec.workerPoolSpecs,trialJobSpec.scheduling,trialJobSpec.baseOutputDirectory",
}


def job_state(value: object) -> JobState:
    """A Vertex ``JobState`` (name or proto number) as the neutral state; unknown reads as unspecified."""
    name = _STATE_NAMES.get(value, value) if isinstance(value, int) else value
    return JOB_STATES.get(str(name), JobState.STATE_UNSPECIFIED)


def kind_of(name: str) -> str:
    """``customJobs`` or ``hyperparameterTuningJobs``, from a resource name."""
    return TUNING_KIND if f"/{TUNING_KIND}/" in name else CUSTOM_KIND


def parse_name(name: str) -> tuple[str, str, str, str]:
    """``(project, location, kind, id)`` of ``projects/P/locations/L/{kind}/ID``; ValueError otherwise."""
    parts = name.strip("/").split("/")
    if (
        len(parts) != 6
        or parts[0] != "projects"
        or parts[2] != "locations"
        or parts[4]
        not in (
            CUSTOM_KIND,
            TUNING_KIND,
        )
    ):
        raise ValueError(f"not a Vertex AI training job name: {name!r}")
    return parts[1], parts[3], parts[4], parts[5]


def _image_uri(job_spec: Mapping[str, Any]) -> str | None:
    """The image the chief runs: a custom container's own, else the pre-built one it installs the
    package into (``executorImageUri``)."""
    pools = [p for p in job_spec.get("workerPoolSpecs") or [] if isinstance(p, Mapping)]
    for pool in pools[:1]:
        image = (pool.get("containerSpec") or {}).get("imageUri")
        image = image or (pool.get("pythonPackageSpec") or {}).get("executorImageUri")
        return str(image) if image else None
    return None


def _parameters(study: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    for param in study.get("parameters") or []:
        kind = next((t for field, t in _VALUE_SPECS.items() if field in param), None)
        out.append({"name": str(param.get("parameterId")), "type": kind, "scale": param.get("scaleType")})
    return out


def _value(value: Any, kind: str | None) -> str:
    """A trial's parameter value as AI Platform wrote hyperparameters: a string.

    An integral number reads the same whichever way it was encoded: Google's proto3 JSON writes
    the double 3.0 as ``3``, a Python server as ``3.0``; the trainer was passed ``3`` either way.
    """
    if kind != "CATEGORICAL" and isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _measurement(point: Mapping[str, Any], metric_id: str) -> dict[str, Any] | None:
    metrics = point.get("metrics") or []
    chosen = next((m for m in metrics if m.get("metricId") == metric_id), metrics[0] if metrics else None)
    if chosen is None or "value" not in chosen:
        return None
    return {"trainingStep": str(point.get("stepCount", "0")), "objectiveValue": chosen["value"]}


def trial_view(trial: Mapping[str, Any], metric_id: str, kinds: Mapping[str, str | None]) -> dict[str, Any]:
    """One Vertex ``Trial`` in AI Platform's trial vocabulary."""
    state = trial.get("state")
    state_name = _TRIAL_NAMES.get(state, state) if isinstance(state, int) else state
    out: dict[str, Any] = {
        "trialId": str(trial.get("id", "")),
        "state": TRIAL_STATES.get(str(state_name), "STATE_UNSPECIFIED"),
        "hyperparameters": {
            str(p.get("parameterId")): _value(p.get("value"), kinds.get(str(p.get("parameterId"))))
            for p in trial.get("parameters") or []
        },
    }
    final = _measurement(trial.get("finalMeasurement") or {}, metric_id)
    if final is not None:
        out["finalMetric"] = final
    points = [_measurement(m, metric_id) for m in trial.get("measurements") or []]
    if any(points):
        out["allMetrics"] = [p for p in points if p is not None]
    if state_name == "STOPPING":
        out["isTrialStoppedEarly"] = True
    for key in ("startTime", "endTime", "infeasibleReason", "customJob"):
        if trial.get(key):
            out[key] = trial[key]
    return out


def view_from_vertex(resource: Mapping[str, Any], *, project_id: str, region: str) -> JobView:
    """A Vertex AI training job resource as the neutral view."""
    name = str(resource.get("name") or "")
    tuning = kind_of(name) == TUNING_KIND or "studySpec" in resource
    job_spec: Mapping[str, Any] = resource.get("trialJobSpec" if tuning else "jobSpec") or {}
    study: Mapping[str, Any] = resource.get("studySpec") or {}
    metric: Mapping[str, Any] = (study.get("metrics") or [{}])[0]
    metric_id = str(metric.get("metricId") or DEFAULT_METRIC_TAG)
    parameters = _parameters(study)
    kinds = {p["name"]: p["type"] for p in parameters}
    error: Mapping[str, Any] = resource.get("error") or {}
    return {
        "backend": VERTEX,
        "job_id": str(resource.get("displayName") or ""),
        "name": name,
        "log_id": last_segment(name) if name else "",
        "project_id": project_id,
        "region": region,
        "state": job_state(resource.get("state")).value,
        "error_message": error.get("message") or None,
        "error_code": error.get("code"),  # google.rpc.Code: 8 (RESOURCE_EXHAUSTED) is capacity
        "create_time": resource.get("createTime"),
        "start_time": resource.get("startTime"),
        "end_time": resource.get("endTime"),
        "labels": dict(resource.get("labels") or {}),
        "output_dir": (job_spec.get("baseOutputDirectory") or {}).get("outputUriPrefix"),
        "image_uri": _image_uri(job_spec),
        "is_hyperparameter_tuning_job": tuning,
        "hyperparameter_metric_tag": metric_id if tuning else None,
        "goal": Goal.parse(metric.get("goal")).value if tuning else None,
        "parameters": parameters if tuning else [],
        "trials": [trial_view(t, metric_id, kinds) for t in resource.get("trials") or []],
        "usage": usage_of(resource) if job_spec else None,
        "spec": dict(resource),
    }

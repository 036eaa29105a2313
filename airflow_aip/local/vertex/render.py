"""How a stored Vertex job is answered: the resource, its trials, and the CustomJob of each trial.

Neutral executor states become ``JOB_STATE_*``; a failed job gets ``error.code`` 3 (what Vertex
reports for a replica that exited non-zero), a cancelled one code 1 (CANCELLED). Trials become
Vertex ``Trial`` objects: ACTIVE while running, SUCCEEDED with a ``finalMeasurement``, and
INFEASIBLE (Vertex has no FAILED trial) with an ``infeasibleReason`` otherwise; each measurement
has its ``elapsedDuration`` since the trial started. Each trial names its own CustomJob, a
19-digit ID like any other (:func:`trial_job_id`: derived from the tuning job's ID and the trial's,
since the executor that starts trials knows nothing of Vertex), which a GET answers as a CustomJob
with the trial's arguments and its ``{base}/{trialId}/`` output directory. A job (or trial) whose
spec sets ``enableWebAccess`` has ``webAccessUris`` while it runs.
"""

from __future__ import annotations

import copy
import functools
import hashlib
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs import JobState
from airflow_aip.jobs.locations import AIPLATFORM_V1
from airflow_aip.jobs.schema import schema
from airflow_aip.jobs.vertex.study import search_spec, trial_parameter_value
from airflow_aip.local.clock import parse_rfc3339
from airflow_aip.local.executor.plans import trial_job_id

CUSTOM_JOBS = "customJobs"
TUNING_JOBS = "hyperparameterTuningJobs"
JOB_STATES = {
    JobState.STATE_UNSPECIFIED: "JOB_STATE_UNSPECIFIED",
    JobState.QUEUED: "JOB_STATE_QUEUED",
    JobState.PREPARING: "JOB_STATE_PENDING",
    JobState.RUNNING: "JOB_STATE_RUNNING",
    JobState.SUCCEEDED: "JOB_STATE_SUCCEEDED",
    JobState.FAILED: "JOB_STATE_FAILED",
    JobState.CANCELLING: "JOB_STATE_CANCELLING",
    JobState.CANCELLED: "JOB_STATE_CANCELLED",
}
CANCELLED_CODE = 1  # google.rpc.Code.CANCELLED
FAILED_CODE = 3  # what Vertex reports for "The replica workerpool0-0 exited with a non-zero status"


def web_access_uris(spec: Mapping[str, Any], job_id: str, location: str) -> dict[str, str]:
    """One URI per replica (``workerpool0-0``, ``workerpool1-0``...): what ``enableWebAccess`` gives.

    Vertex's are ``https://<id>-dot-<region>.aiplatform-training.googleusercontent.com``, each a
    node's interactive shell. Nothing serves them locally (there is no shell to attach to): they
    have Google's form so code that reads them can be tested. [U] unverified: how Google derives
    ``<id>`` per node; a hash of the job ID and the node name here.
    """
    uris = {}
    for index, pool in enumerate(spec.get("workerPoolSpecs") or []):
        for replica in range(int(pool.get("replicaCount", "1" if index == 0 else "0") or 0)):
            node = f"workerpool{index}-{replica}"
            host = hashlib.sha256(f"{job_id}/{node}".encode()).hexdigest()[:16]
            uris[node] = f"https://{host}-dot-{location}.aiplatform-training.googleusercontent.com"
    return uris


def _with_web_access(shown: dict[str, Any], spec: Mapping[str, Any], job_id: str, location: str) -> None:
    # [U] unverified: whether Google keeps webAccessUris after the job ends; given while it runs.
    if spec.get("enableWebAccess"):
        shown["webAccessUris"] = web_access_uris(spec, job_id, location)


def _error(state: JobState, message: str | None, code: int | None = None) -> dict[str, Any] | None:
    if state is JobState.FAILED:  # ``code``: the record's errorCode (8 for quota, stockout: capacity.py)
        return {"code": code or FAILED_CODE, "message": message or "Job failed."}
    if state is JobState.CANCELLED:
        return {"code": CANCELLED_CODE, "message": message or "CANCELED"}
    return None


def render(record: Mapping[str, Any], *, with_trials: bool = True) -> dict[str, Any]:
    """A stored record as the Vertex resource Google would answer."""
    resource = dict(record["resource"])
    state = JobState.parse(record.get("state"))
    resource["state"] = JOB_STATES[state]
    times = [str(record["createTime"])]
    # "startTime: Time when the job first entered JOB_STATE_RUNNING"
    for name, stored in (("startTime", "runningSince"), ("endTime", "endTime")):
        if record.get(stored):
            resource[name] = record[stored]
            times.append(str(record[stored]))
    error = _error(state, record.get("errorMessage"), record.get("errorCode"))
    if error:
        resource["error"] = error
    if state is JobState.RUNNING and record["kind"] == CUSTOM_JOBS:
        _with_web_access(resource, resource["jobSpec"], record["jobId"], record["location"])
    if record["kind"] == TUNING_JOBS:
        trials = (record.get("trainingOutput") or {}).get("trials") or []
        times += [str(t[k]) for t in trials for k in ("startTime", "endTime") if t.get(k)]
        if with_trials and trials:
            resource["trials"] = render_trials(record, trials)
    resource["updateTime"] = max(times)
    return resource


# Vertex trials have no FAILED: a trial that ends without a final measurement is INFEASIBLE.
_TRIAL_STATES = {
    "RUNNING": "ACTIVE",
    "SUCCEEDED": "SUCCEEDED",
    "FAILED": "INFEASIBLE",
    "CANCELLED": "INFEASIBLE",
}


def render_trials(record: Mapping[str, Any], trials: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The executor's trials as Vertex ``Trial`` objects."""
    resource = record["resource"]
    spec = search_spec(resource)
    kinds = {p["parameterName"]: p["type"] for p in spec["params"]}
    parent = resource["name"].split(f"/{TUNING_JOBS}/")[0]
    out = []
    for trial in trials:
        state = _TRIAL_STATES.get(str(trial.get("state")), "REQUESTED")
        metric = trial.get("finalMetric")
        if state == "SUCCEEDED" and not metric:
            state = "INFEASIBLE"  # "done but missing the final_measurement"
        shown: dict[str, Any] = {
            "id": trial["trialId"],
            "state": state,
            "parameters": [
                {"parameterId": name, "value": trial_parameter_value(value, kinds[name])}
                for name, value in trial.get("hyperparameters", {}).items()
            ],
            "startTime": trial.get("startTime"),
            "customJob": f"{parent}/customJobs/{trial_job_id(record['jobId'], trial['trialId'])}",
        }
        if trial.get("endTime"):
            shown["endTime"] = trial["endTime"]
        if state == "ACTIVE":
            job_id = trial_job_id(record["jobId"], trial["trialId"])
            _with_web_access(shown, resource["trialJobSpec"], job_id, record["location"])
        metric_id = spec["hyperparameterMetricTag"]
        if trial.get("allMetrics"):
            shown["measurements"] = [_measurement(point, metric_id, trial) for point in trial["allMetrics"]]
        # A trial stopped with its job never reached its final measurement: INFEASIBLE ("done but
        # missing the final_measurement"), its reports kept as measurements. [U] unverified: the state
        # Vertex gives trials cancelled with their job.
        if metric and trial.get("state") != "CANCELLED":
            shown["finalMeasurement"] = _measurement(metric, metric_id, trial, final=True)
            others = trial.get("otherMetrics") or {}
            shown["finalMeasurement"]["metrics"] += [{"metricId": k, "value": v} for k, v in others.items()]
        if state == "INFEASIBLE":
            shown["infeasibleReason"] = _infeasible_reason(trial)
        out.append(shown)
    return out


def _measurement(
    point: Mapping[str, Any], metric_id: str, trial: Mapping[str, Any], final: bool = False
) -> dict[str, Any]:
    """ml v1's ``{trainingStep, objectiveValue}`` as a Vertex ``Measurement``, with its ``elapsedDuration``.

    The time from the trial's start to the report (``reportTime``, when the executor kept it);
    a final measurement without one is taken at the trial's end. [U] unverified: what Google
    counts from (the trial's start, or its CustomJob's RUNNING).
    """
    shown: dict[str, Any] = {}
    taken = point.get("reportTime") or (trial.get("endTime") if final else None)
    if taken and trial.get("startTime"):
        shown["elapsedDuration"] = _duration(parse_rfc3339(taken) - parse_rfc3339(trial["startTime"]))
    shown["stepCount"] = str(point.get("trainingStep", "0"))
    shown["metrics"] = [{"metricId": metric_id, "value": point["objectiveValue"]}]
    return shown


def _duration(elapsed: timedelta) -> str:
    """proto3 JSON ``Duration``: seconds with 0, 3 or 6 fractional digits (as Google writes them)."""
    seconds, micros = divmod(max(elapsed // timedelta(microseconds=1), 0), 10**6)
    if not micros:
        return f"{seconds}s"
    return f"{seconds}.{micros // 1000:03d}s" if micros % 1000 == 0 else f"{seconds}.{micros:06d}s"


def _infeasible_reason(trial: Mapping[str, Any]) -> str:
    if trial.get("state") == "CANCELLED":
        return "The trial was stopped with its job."
    if trial.get("state") == "FAILED":
        return "The trial's CustomJob failed."
    return "The trial reported no final measurement."


def _camel(segment: str) -> str:
    head, *rest = segment.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _mask_path(path: str, schema_name: str) -> tuple[str, ...]:
    """One ``readMask`` path as the resource's JSON names, or a 400 naming it and what is wrong.

    FieldMask's rules (google/protobuf/field_mask.proto): each segment a field of the message the
    path has reached (snake_case or lowerCamelCase), and "a repeated field is not allowed except
    at the last position": a list or a map ends the path, as does a scalar.
    """
    segments = tuple(_camel(s) for s in path.split("."))
    current: str | None = schema_name
    for index, segment in enumerate(segments):
        message = schema(current, AIPLATFORM_V1) if current else {}
        prop = (message.get("properties") or {}).get(segment)
        if prop is None:
            where = message.get("id", "").removeprefix("GoogleCloudAiplatformV1") or "a scalar"
            raise ValidationError("readMask", f"invalid path {path!r}: {where} has no field {segment!r}")
        repeated = prop.get("type") == "array" or "additionalProperties" in prop
        if repeated and index < len(segments) - 1:
            raise ValidationError(
                "readMask", f"invalid path {path!r}: a path cannot go on past the repeated field {segment!r}"
            )
        current = prop.get("$ref")
    return segments


@functools.lru_cache(maxsize=64)
def read_mask_paths(mask: str | None, schema_name: str) -> tuple[tuple[str, ...], ...]:
    """The mask's paths, each checked (:func:`_mask_path`); () without a mask. A list checks its
    mask before it reads anything, as Google does: a bad mask is a 400 even when nothing matches."""
    return tuple(
        _mask_path(p, schema_name) for p in filter(None, (p.strip() for p in (mask or "").split(",")))
    )


def apply_read_mask(resource: Mapping[str, Any], mask: str | None, schema_name: str) -> dict[str, Any]:
    """Only the fields a ``readMask`` names (``name,state,job_spec.worker_pool_specs``); all without one."""
    if not mask:
        return dict(resource)
    out: dict[str, Any] = {}
    for segments in read_mask_paths(mask, schema_name):
        source: Any = resource
        target = out
        for i, segment in enumerate(segments):
            if not isinstance(source, Mapping) or segment not in source:
                break
            if i == len(segments) - 1:
                target[segment] = source[segment]
            else:
                target = target.setdefault(segment, {})
                source = source[segment]
    return out


def trial_custom_job(record: Mapping[str, Any], trial_id: str) -> dict[str, Any] | None:
    """The CustomJob of one trial of a stored tuning job, as a GET of ``Trial.customJob`` answers it."""
    trials = (record.get("trainingOutput") or {}).get("trials") or []
    trial = next((t for t in trials if t.get("trialId") == trial_id), None)
    if trial is None:
        return None
    resource = record["resource"]
    spec = copy.deepcopy(resource["trialJobSpec"])
    flags = [f"--{name}={value}" for name, value in trial.get("hyperparameters", {}).items()]
    for pool in spec["workerPoolSpecs"]:
        if "pythonPackageSpec" in pool:
            package = pool["pythonPackageSpec"]
            package["args"] = [*package.get("args", []), *flags]
    if "baseOutputDirectory" in spec:
        base = spec["baseOutputDirectory"]["outputUriPrefix"].rstrip("/")
        spec["baseOutputDirectory"] = {"outputUriPrefix": f"{base}/{trial_id}/"}
    state = JobState.parse(trial.get("state"))
    parent = resource["name"].split(f"/{TUNING_JOBS}/")[0]
    job_id = trial_job_id(record["jobId"], trial_id)
    shown: dict[str, Any] = {
        "name": f"{parent}/{CUSTOM_JOBS}/{job_id}",
        "displayName": f"{resource['displayName']}-trial-{trial_id}"[:128],
        "jobSpec": spec,
        "state": JOB_STATES[state],
        "createTime": trial.get("startTime"),
        "startTime": trial.get("startTime"),
        "updateTime": trial.get("endTime") or trial.get("startTime"),
    }
    if resource.get("labels"):
        shown["labels"] = dict(resource["labels"])
    if trial.get("endTime"):
        shown["endTime"] = trial["endTime"]
    if state is JobState.RUNNING:
        _with_web_access(shown, spec, job_id, record["location"])
    error = _error(state, f"Trial {trial_id} of {resource['name']}: {_infeasible_reason(trial)}")
    if error:
        shown["error"] = error
    return shown

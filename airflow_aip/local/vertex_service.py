"""The aiplatform v1 face: Vertex AI ``customJobs`` and ``hyperparameterTuningJobs`` over the one executor.

A job is stored as a record the executor understands (``jobId``, neutral ``state``, times,
``errorMessage``, ``trainingOutput``) around the Vertex resource as created (``resource``), under
the project *number*: names come back as ``projects/<number>/locations/<loc>/customJobs/<id>``,
and a path may give the project ID or the number. IDs are server-assigned, 19 digits. Each answer
is rendered from the record: ``JOB_STATE_*`` names, ``error`` with code 1 for a cancelled job and
3 for a failed one, trials as Vertex ``Trial`` objects (ACTIVE, SUCCEEDED, INFEASIBLE) with typed
parameters and a ``finalMeasurement``; lists leave ``trials`` out, as Google's do.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from airflow_aip.exceptions import JobNotFoundError, ValidationError
from airflow_aip.jobs import JobState
from airflow_aip.jobs.locations import AIPLATFORM_V1, check_location
from airflow_aip.jobs.schema import schema
from airflow_aip.jobs.vertex import (
    CUSTOM_JOB_SCHEMA,
    TUNING_JOB_SCHEMA,
    validate_custom_job,
    validate_tuning_job,
)
from airflow_aip.jobs.vertex_study import search_spec, trial_parameter_value
from airflow_aip.local.clock import rfc3339
from airflow_aip.local.filters import VERTEX_JOB_FILTER_FIELDS, parse_filter
from airflow_aip.local.service import (
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
    FailedPreconditionError,
    TrainingService,
    decode_page_token,
    encode_page_token,
)
from airflow_aip.local.store import project_number, validate_project

CUSTOM_JOBS = "customJobs"
TUNING_JOBS = "hyperparameterTuningJobs"
_RESOURCE_NAMES = {CUSTOM_JOBS: "CustomJob", TUNING_JOBS: "HyperparameterTuningJob"}
_SCHEMAS = {CUSTOM_JOBS: CUSTOM_JOB_SCHEMA, TUNING_JOBS: TUNING_JOB_SCHEMA}
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


def _reject_containers(spec: Mapping[str, Any], path: str) -> None:
    for index, pool in enumerate(spec.get("workerPoolSpecs") or []):
        if "containerSpec" in pool:
            raise ValidationError(
                f"{path}.workerPoolSpecs[{index}].containerSpec",
                "custom containers are not supported by the local training service (there is no container "
                "engine here): use pythonPackageSpec with packageUris and pythonModule instead",
            )


def _job_id() -> str:
    """A 19-digit job ID, as Vertex assigns (never starting with a letter: ml v1 IDs always do)."""
    return str(10**18 + secrets.randbelow(9 * 10**18))


def _trial_job_id(job_id: str, trial_id: str) -> str:
    """The ID named in ``Trial.customJob``: the tuning job's ID plus the trial number."""
    return str(int(job_id) + int(trial_id))


class VertexJobs:
    """create, get, list, cancel and delete for both Vertex job kinds, on a TrainingService."""

    def __init__(self, service: TrainingService) -> None:
        self.service = service
        self.store = service.store

    # -- names --------------------------------------------------------------------------------

    @staticmethod
    def parent(project: str, location: str) -> tuple[str, str]:
        """``(project number, location)`` of a request path; a location Vertex does not serve is a 400."""
        validate_project(project)
        check_location(location, "parent")
        return project_number(project), location

    def _record(self, kind: str, project: str, location: str, job_id: str) -> dict[str, Any]:
        number, location = self.parent(project, location)
        name = f"projects/{number}/locations/{location}/{kind}/{job_id}"
        try:
            job = self.store.get(number, job_id) if job_id.isdigit() else None
        except JobNotFoundError:
            job = None
        if job is None or job.get("kind") != kind or job.get("location") != location:
            raise JobNotFoundError(404, f"The {_RESOURCE_NAMES[kind]} {name} does not exist.")
        return job

    # -- the API -------------------------------------------------------------------------------

    def create(self, kind: str, project: str, location: str, body: Any) -> dict[str, Any]:
        number, location = self.parent(project, location)
        if kind == CUSTOM_JOBS:
            resource = validate_custom_job(body)
            _reject_containers(resource["jobSpec"], "jobSpec")
        else:
            resource = validate_tuning_job(body)
            _reject_containers(resource["trialJobSpec"], "trialJobSpec")
        job_id = _job_id()
        created = rfc3339()
        resource.update(name=f"projects/{number}/locations/{location}/{kind}/{job_id}", createTime=created)
        record = {
            "jobId": job_id,
            "kind": kind,
            "location": location,
            "projectNumber": number,
            "projectId": project if not project.isdigit() else number,
            "resource": resource,
            "state": JobState.QUEUED.value,
            "createTime": created,
        }
        return render(self.service.submit(number, record))

    def get(self, kind: str, project: str, location: str, job_id: str) -> dict[str, Any]:
        return render(self._record(kind, project, location, job_id))

    def list(
        self,
        kind: str,
        project: str,
        location: str,
        filter_text: str | None,
        page_size: int | None,
        page_token: str | None,
        read_mask: str | None,
    ) -> dict[str, Any]:
        number, location = self.parent(project, location)
        node = parse_filter(filter_text, VERTEX_JOB_FILTER_FIELDS)
        if page_size is not None and page_size < 0:
            raise ValidationError("pageSize", f"must not be negative, got {page_size}")
        size = min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        before = decode_page_token(page_token)
        matching: list[tuple[int, dict[str, Any]]] = []
        for seq, job in self.store.list_jobs(number):
            if (before is not None and seq >= before) or job.get("kind") != kind:
                continue
            if job.get("location") != location:
                continue
            shown = render(job, with_trials=False)
            if node is None or node.matches(shown):
                matching.append((seq, apply_read_mask(shown, read_mask, _SCHEMAS[kind])))
                if len(matching) > size:
                    break
        response: dict[str, Any] = {}
        if matching:
            response[kind] = [job for _, job in matching[:size]]
        if len(matching) > size:
            response["nextPageToken"] = encode_page_token(matching[size - 1][0])
        return response

    def cancel(self, kind: str, project: str, location: str, job_id: str) -> dict[str, Any]:
        record = self._record(kind, project, location, job_id)
        state = JobState.parse(record.get("state"))
        if state.is_terminal:
            raise FailedPreconditionError(
                f"The {_RESOURCE_NAMES[kind]} {record['resource']['name']} is already {JOB_STATES[state]} "
                "and cannot be cancelled."
            )
        self.service.cancel_job(record["projectNumber"], job_id)
        return {}

    def delete(self, kind: str, project: str, location: str, job_id: str) -> dict[str, Any]:
        record = self._record(kind, project, location, job_id)
        state = JobState.parse(record.get("state"))
        if not state.is_terminal:
            raise FailedPreconditionError(
                f"The {_RESOURCE_NAMES[kind]} {record['resource']['name']} is {JOB_STATES[state]}: "
                "cancel it and wait until it ends before deleting it."
            )
        self.store.delete(record["projectNumber"], job_id)
        now = rfc3339()
        operation = f"{record['resource']['name']}/operations/{_job_id()}"
        return {
            "name": operation,
            "done": True,
            "metadata": {
                "@type": "type.googleapis.com/google.cloud.aiplatform.v1.DeleteOperationMetadata",
                "genericMetadata": {"createTime": now, "updateTime": now},
            },
            "response": {"@type": "type.googleapis.com/google.protobuf.Empty"},
        }


def render(record: Mapping[str, Any], *, with_trials: bool = True) -> dict[str, Any]:
    """A stored record as the Vertex resource Google would answer."""
    resource = dict(record["resource"])
    state = JobState.parse(record.get("state"))
    resource["state"] = JOB_STATES[state]
    times = [str(record["createTime"])]
    for name in ("startTime", "endTime"):
        if record.get(name):
            resource[name] = record[name]
            times.append(str(record[name]))
    if state is JobState.FAILED:
        resource["error"] = {"code": FAILED_CODE, "message": record.get("errorMessage") or "Job failed."}
    elif state is JobState.CANCELLED:
        resource["error"] = {"code": CANCELLED_CODE, "message": record.get("errorMessage") or "CANCELED"}
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
            "customJob": f"{parent}/customJobs/{_trial_job_id(record['jobId'], trial['trialId'])}",
        }
        if trial.get("endTime"):
            shown["endTime"] = trial["endTime"]
        if metric:
            shown["finalMeasurement"] = {
                "stepCount": str(metric.get("trainingStep", "0")),
                "metrics": [{"metricId": spec["hyperparameterMetricTag"], "value": metric["objectiveValue"]}],
            }
        if state == "INFEASIBLE":
            shown["infeasibleReason"] = _infeasible_reason(trial)
        out.append(shown)
    return out


def _infeasible_reason(trial: Mapping[str, Any]) -> str:
    if trial.get("state") == "CANCELLED":
        return "The trial was stopped with its job."
    if trial.get("state") == "FAILED":
        return "The trial's CustomJob failed."
    return "The trial reported no final measurement."


def _camel(segment: str) -> str:
    head, *rest = segment.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def apply_read_mask(resource: Mapping[str, Any], mask: str | None, schema_name: str) -> dict[str, Any]:
    """Only the fields a ``readMask`` names (``name,state,job_spec.worker_pool_specs``); all without one."""
    if not mask:
        return dict(resource)
    known = schema(schema_name, AIPLATFORM_V1)["properties"]
    out: dict[str, Any] = {}
    for path in filter(None, (p.strip() for p in mask.split(","))):
        segments = [_camel(s) for s in path.split(".")]
        if segments[0] not in known:
            raise ValidationError("readMask", f"unknown field {path!r}")
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

"""``trainingPipelines`` for custom training: what Google's SDK training classes call.

``CustomTrainingJob``, ``CustomPythonPackageTrainingJob`` and ``CustomContainerTrainingJob``
``.run()`` create a TrainingPipeline (python-aiplatform ``training_jobs.py``, ``_run_job``) and
poll it until ``PIPELINE_STATE_SUCCEEDED``; then they read ``modelToUpload.name`` and
``versionId`` for the ``Model`` they return. Here a pipeline is a thin record over the parts that
exist already:

- its ``trainingTaskInputs`` (``worker_pool_specs``, ``base_output_directory``,
  ``service_account``... as the SDK writes them, snake_case in a Struct) are the ``jobSpec`` of one
  CustomJob, created through the ``customJobs`` path (same validation, same executor), named in
  ``trainingTaskMetadata.backingCustomJob``;
- once that job succeeds, a ``modelToUpload`` is uploaded to the Model Registry from
  ``{base_output_directory}/model/`` (where ``AIP_MODEL_DIR`` pointed), under ``modelId`` or
  ``parentModel``; the pipeline succeeds when the upload's import does, and fails with the
  import's error if it fails.

Like the Model Registry's operations, nothing is timed: a read of the pipeline moves it on. Only
the custom task definition is served; AutoML definitions and ``inputDataConfig`` (managed
datasets) are a 400 naming the field. [U] unverified: the backing CustomJob's display name, and
whether Vertex shows ``PIPELINE_STATE_QUEUED`` or ``PENDING`` while the job waits.
"""

from __future__ import annotations

import contextlib
import copy
import json
import secrets
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from airflow_aip.exceptions import ApiError, JobNotFoundError, ValidationError
from airflow_aip.jobs.vertex.translate import CUSTOM_JOBS
from airflow_aip.local.clock import rfc3339
from airflow_aip.local.service import FailedPreconditionError
from airflow_aip.local.store import safe_child, write_json_atomic
from airflow_aip.local.vertex.models import ModelRegistry
from airflow_aip.local.vertex.models_query import check_upload
from airflow_aip.local.vertex.pipelines_list import delete_operation, list_page
from airflow_aip.local.vertex.service import VertexJobs

CUSTOM_TASK = "gs://google-cloud-aiplatform/schema/trainingjob/definition/custom_task_1.0.0.yaml"
# The backing job's state as the pipeline's (SUCCEEDED waits for the model's upload, if any).
STATES = {
    "JOB_STATE_QUEUED": "PIPELINE_STATE_QUEUED",
    "JOB_STATE_PENDING": "PIPELINE_STATE_PENDING",
    "JOB_STATE_RUNNING": "PIPELINE_STATE_RUNNING",
    "JOB_STATE_SUCCEEDED": "PIPELINE_STATE_SUCCEEDED",
    "JOB_STATE_FAILED": "PIPELINE_STATE_FAILED",
    "JOB_STATE_CANCELLING": "PIPELINE_STATE_CANCELLING",
    "JOB_STATE_CANCELLED": "PIPELINE_STATE_CANCELLED",
}
TERMINAL = {"PIPELINE_STATE_SUCCEEDED", "PIPELINE_STATE_FAILED", "PIPELINE_STATE_CANCELLED"}
_ACCEPTED = {
    "displayName",
    "trainingTaskDefinition",
    "trainingTaskInputs",
    "modelToUpload",
    "modelId",
    "parentModel",
}
_IGNORED = {
    "labels",
    "encryptionSpec",
    "name",
    "state",
    "createTime",
    "startTime",
    "endTime",
    "updateTime",
    "error",
}


def _whole_numbers(value: Any) -> Any:
    """A Struct's numbers are doubles (``replica_count: 1.0``); the job's fields are integers."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _whole_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(item) for item in value]
    return value


def _checked(body: Any) -> dict[str, Any]:
    if not isinstance(body, Mapping):
        raise ValidationError("body", "must be a JSON object (a TrainingPipeline)")
    for key in body:
        if key == "inputDataConfig":
            raise ValidationError(key, "managed datasets are not served by the local training service")
        if key not in _ACCEPTED | _IGNORED:
            raise ValidationError(key, "is not a field of TrainingPipeline the local training service takes")
    if body.get("trainingTaskDefinition") != CUSTOM_TASK:
        raise ValidationError(
            "trainingTaskDefinition",
            f"only custom training ({CUSTOM_TASK}) is served locally; "
            f"got {body.get('trainingTaskDefinition')!r}",
        )
    if not body.get("displayName"):
        raise ValidationError("displayName", "is required")
    inputs = body.get("trainingTaskInputs")
    if not isinstance(inputs, Mapping):
        raise ValidationError("trainingTaskInputs", "is required: the custom job's spec")
    return dict(body)


def _upload_request(pipeline: Mapping[str, Any], job_spec: Mapping[str, Any]) -> dict[str, Any]:
    """The ``models.upload`` body for a pipeline's model: from ``{base output directory}/model/``."""
    base_dir = job_spec.get("baseOutputDirectory") or job_spec.get("base_output_directory") or {}
    prefix = base_dir.get("outputUriPrefix") or base_dir.get("output_uri_prefix")
    if not prefix:
        raise ValidationError(
            "trainingTaskInputs.base_output_directory",
            "is required to upload a model: the model is read there",
        )
    model = {
        **copy.deepcopy(dict(pipeline["modelToUpload"])),
        "artifactUri": str(prefix).rstrip("/") + "/model/",
    }
    body: dict[str, Any] = {"model": model}
    for key in ("modelId", "parentModel"):
        if pipeline.get(key):
            body[key] = pipeline[key]
    return body


class TrainingPipelines:
    """Pipelines of one service, one JSON file each under ``data_dir/pipelines/``."""

    def __init__(self, jobs: VertexJobs, registry: ModelRegistry, root: Path) -> None:
        self.jobs = jobs
        self.registry = registry
        self.root = root
        self.lock = threading.Lock()

    def _path(self, number: str, location: str, pipeline_id: str) -> Path:
        return safe_child(safe_child(safe_child(self.root, number), location), f"{pipeline_id}.json")

    def _load(self, project: str, location: str, pipeline_id: str) -> dict[str, Any]:
        number, location = VertexJobs.parent(project, location)
        name = f"projects/{number}/locations/{location}/trainingPipelines/{pipeline_id}"
        try:
            path = self._path(number, location, pipeline_id)
            record: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, ValidationError):
            raise JobNotFoundError(404, f"The TrainingPipeline {name} does not exist.") from None
        return record

    def _save(self, record: dict[str, Any]) -> None:
        self._path(record["projectNumber"], record["location"], record["pipelineId"]).parent.mkdir(
            parents=True, exist_ok=True
        )
        write_json_atomic(
            self._path(record["projectNumber"], record["location"], record["pipelineId"]), record
        )

    def create(self, project: str, location: str, body: Any) -> dict[str, Any]:
        pipeline = _checked(body)
        number, location = VertexJobs.parent(project, location)
        spec = _whole_numbers(dict(pipeline["trainingTaskInputs"]))
        if pipeline.get("modelToUpload"):  # a bad model is the create's 400, not a failure after training
            check_upload(_upload_request(pipeline, spec), number, location)
        job = self.jobs.create(
            CUSTOM_JOBS,
            project,
            location,
            {"displayName": f"{pipeline['displayName']}-custom-job", "jobSpec": spec},
        )
        pipeline_id = str(10**18 + secrets.randbelow(9 * 10**18))
        stamp = rfc3339()
        resource = {
            **{k: copy.deepcopy(v) for k, v in pipeline.items() if k in _ACCEPTED or k == "labels"},
            "name": f"projects/{number}/locations/{location}/trainingPipelines/{pipeline_id}",
            "state": "PIPELINE_STATE_QUEUED",
            "createTime": stamp,
            "updateTime": stamp,
            "trainingTaskMetadata": {"backingCustomJob": job["name"]},
        }
        record = {
            "projectNumber": number,
            "location": location,
            "pipelineId": pipeline_id,
            "resource": resource,
        }
        with self.lock:
            self._save(record)
        return copy.deepcopy(resource)

    def get(self, project: str, location: str, pipeline_id: str) -> dict[str, Any]:
        with self.lock:
            record = self._load(project, location, pipeline_id)
            if record["resource"]["state"] not in TERMINAL:
                self._advance(record)
                self._save(record)
            return copy.deepcopy(record["resource"])

    def list(
        self,
        project: str,
        location: str,
        filter_text: str | None,
        page_size: int | None,
        page_token: str | None,
        read_mask: str | None,
    ) -> dict[str, Any]:
        """A page of the location's pipelines, newest first; each read moves an unfinished one on."""
        number, location = VertexJobs.parent(project, location)
        folder = safe_child(safe_child(self.root, number), location)
        resources = []
        with self.lock:
            for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
                with contextlib.suppress(OSError, ValueError):  # deleted meanwhile, or torn: not listed
                    record = json.loads(path.read_text(encoding="utf-8"))
                    if record["resource"]["state"] not in TERMINAL:
                        self._advance(record)
                        self._save(record)
                    resources.append(copy.deepcopy(record["resource"]))
        return list_page(resources, filter_text, page_size, page_token, read_mask)

    def delete(self, project: str, location: str, pipeline_id: str) -> dict[str, Any]:
        """Remove a finished pipeline (its backing CustomJob and model stay); a running one is refused.

        [U] unverified: that Google refuses to delete an unfinished pipeline, and with which words
        (these follow its cancel answer's, "is in state ... and cannot be canceled" [O]); whether
        the backing CustomJob goes with it (kept here: the side that loses nothing).
        """
        resource = self.get(project, location, pipeline_id)
        if resource["state"] not in TERMINAL:
            raise _in_state(resource, "deleted")
        number, location = VertexJobs.parent(project, location)
        with self.lock:
            self._path(number, location, pipeline_id).unlink(missing_ok=True)
        return delete_operation(resource["name"], str(10**18 + secrets.randbelow(9 * 10**18)))

    def cancel(self, project: str, location: str, pipeline_id: str) -> dict[str, Any]:
        resource = self.get(project, location, pipeline_id)
        if resource["state"] in TERMINAL:
            # Google's words [O]: GoogleCloudPlatform/java-docs-samples#9281, FAILED_PRECONDITION:
            # The TrainingPipeline "projects/…/trainingPipelines/2719905928454340608" is in state
            # PIPELINE_STATE_FAILED and cannot be canceled.
            raise _in_state(resource, "canceled")
        job_id = resource["trainingTaskMetadata"]["backingCustomJob"].rsplit("/", 1)[-1]
        with contextlib.suppress(FailedPreconditionError):  # it ended meanwhile: the next read shows how
            self.jobs.cancel(CUSTOM_JOBS, project, location, job_id)
        return {}

    def _advance(self, record: dict[str, Any]) -> None:
        """Move the pipeline on from its job's state and its upload's operation (lock held)."""
        resource = record["resource"]
        job_name = resource["trainingTaskMetadata"]["backingCustomJob"]
        _, number, _, location, _, job_id = job_name.split("/")
        job = self.jobs.get(CUSTOM_JOBS, number, location, job_id)
        stamp = rfc3339()
        resource["updateTime"] = stamp
        if "startTime" in job:
            resource.setdefault("startTime", job["startTime"])
        if job["state"] == "JOB_STATE_SUCCEEDED" and resource.get("modelToUpload"):
            self._upload_step(record, number, location, job, stamp)
            return
        resource["state"] = STATES.get(job["state"], "PIPELINE_STATE_UNSPECIFIED")
        if job["state"] == "JOB_STATE_FAILED":
            resource["error"] = job.get("error") or {"code": 13, "message": "The custom job failed."}
        elif job["state"] == "JOB_STATE_CANCELLED":
            # training_pipeline.proto: ``error`` is "populated when the pipeline's state is
            # PIPELINE_STATE_FAILED or PIPELINE_STATE_CANCELLED"; the SDK's run() raises on it.
            resource["error"] = job.get("error") or {"code": 1, "message": "CANCELED"}
        if resource["state"] in TERMINAL:
            resource["endTime"] = job.get("endTime", stamp)

    def _upload_step(self, record: dict[str, Any], number: str, location: str, job: Any, stamp: str) -> None:
        resource = record["resource"]
        if "uploadOperation" not in record:
            body = _upload_request(resource, job["jobSpec"])
            try:
                record["uploadOperation"] = self.registry.upload(number, location, body)["name"]
            except ApiError as exc:  # the model ID taken meanwhile, or the parent model deleted
                # [U] unverified: Google's code for these; the upload's own status here.
                code = {404: 5, 409: 6}.get(exc.status, 9)
                resource.update(
                    state="PIPELINE_STATE_FAILED", endTime=stamp, error={"code": code, "message": exc.message}
                )
                return
        operation_id = record["uploadOperation"].rsplit("/", 1)[-1]
        operation = self.registry.get_operation(number, location, None, operation_id)
        resource["state"] = "PIPELINE_STATE_RUNNING"
        if not operation.get("done"):
            return
        resource["endTime"] = stamp
        if operation.get("error"):
            resource.update(state="PIPELINE_STATE_FAILED", error=operation["error"])
            return
        response = operation["response"]
        resource["modelToUpload"] = self.registry.get(
            number, location, f"{response['model'].rsplit('/', 1)[-1]}@{response['modelVersionId']}"
        )
        resource["state"] = "PIPELINE_STATE_SUCCEEDED"


def _in_state(resource: Mapping[str, Any], verb: str) -> FailedPreconditionError:
    """Google's refusal of a pipeline in the wrong state [O] (cancel's words; delete's follow them)."""
    return FailedPreconditionError(
        f'The TrainingPipeline "{resource["name"]}" is in state {resource["state"]} and cannot be {verb}.'
    )

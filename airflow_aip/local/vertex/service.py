"""The aiplatform v1 face: Vertex AI ``customJobs`` and ``hyperparameterTuningJobs`` over the one executor.

A job is stored as a record the executor understands (``jobId``, neutral ``state``, times,
``errorMessage``, ``trainingOutput``) around the Vertex resource as created (``resource``), under
the project *number*: names come back as ``projects/<number>/locations/<loc>/customJobs/<id>``,
and a path may give the project ID or the number. IDs are server-assigned, 19 digits. Each answer
is rendered from the record: ``JOB_STATE_*`` names, ``error`` with code 1 for a cancelled job and
3 for a failed one, trials as Vertex ``Trial`` objects (ACTIVE, SUCCEEDED, INFEASIBLE) with typed
parameters and a ``finalMeasurement``; lists leave ``trials`` out, as Google's do.

A trial's CustomJob ID is derived, not stored (:func:`~.render.trial_job_id`): a GET on it is
answered through an index of those IDs per project, built from the store on the first such GET
and extended whenever a tuning job is rendered with its trials (the only way a client learns
one). As Google's server does, ``outputUriPrefix`` gets its trailing ``/`` at create.
"""

from __future__ import annotations

import copy
import secrets
import threading
from collections.abc import Mapping
from typing import Any

from airflow_aip.exceptions import JobNotFoundError, ValidationError
from airflow_aip.jobs import JobState
from airflow_aip.jobs.labels import JOB_ID_LABEL
from airflow_aip.jobs.locations import check_location
from airflow_aip.jobs.permissions import custom_code_agent
from airflow_aip.jobs.vertex.body import (
    CUSTOM_JOB_SCHEMA,
    TUNING_JOB_SCHEMA,
    job_spec_key,
    validate_custom_job,
    validate_tuning_job,
)
from airflow_aip.local import pages
from airflow_aip.local.clock import rfc3339
from airflow_aip.local.deployment import check_vertex_job, no_engine
from airflow_aip.local.executor.plans import trial_job_id
from airflow_aip.local.logs.filter_pruning import FilterPlan
from airflow_aip.local.logs.filters import VERTEX_JOB_FILTER_FIELDS, Node, parse_filter
from airflow_aip.local.service import NO_ENGINE, FailedPreconditionError, TrainingService
from airflow_aip.local.store import (
    VERTEX_DISPLAY_NAME_FIELD,
    VERTEX_JOB_ID_LABEL_FIELD,
    FieldPath,
    JobView,
    project_number,
    validate_project,
)
from airflow_aip.local.vertex.render import (
    CUSTOM_JOBS,
    JOB_STATES,
    TUNING_JOBS,
    apply_read_mask,
    read_mask_paths,
    render,
    trial_custom_job,
)

_RESOURCE_NAMES = {CUSTOM_JOBS: "CustomJob", TUNING_JOBS: "HyperparameterTuningJob"}
_SCHEMAS = {CUSTOM_JOBS: CUSTOM_JOB_SCHEMA, TUNING_JOBS: TUNING_JOB_SCHEMA}
# Filter fields (on the resource as answered) the store indexes (on the record as stored).
_INDEXED = {("labels", JOB_ID_LABEL): VERTEX_JOB_ID_LABEL_FIELD, ("displayName",): VERTEX_DISPLAY_NAME_FIELD}


def _reject_containers(spec: Mapping[str, Any], path: str, deployment: str) -> None:
    """A 400 naming the pool, where this machine has no container engine to run it in."""
    for index, pool in enumerate(spec.get("workerPoolSpecs") or []):
        if "containerSpec" in pool:
            raise ValidationError(
                f"{path}.workerPoolSpecs[{index}].containerSpec",
                f"{no_engine(deployment, NO_ENGINE)}: use pythonPackageSpec with packageUris and "
                "pythonModule instead",
            )


def _narrowest_lookup(node: Node | None) -> tuple[FilterPlan, FieldPath | None]:
    """The indexed field the filter pins to the fewest values (a poller's label OR): its plan and stored
    field; with none pinned, a plan that scans."""
    plans = [(FilterPlan(node, path), stored) for path, stored in _INDEXED.items()]
    pinned = [(plan, stored) for plan, stored in plans if plan.candidates is not None]
    if not pinned:
        return plans[0][0], None
    return min(pinned, key=lambda found: len(found[0].candidates or ()))


def _output_prefix_with_slash(spec: dict[str, Any]) -> None:
    """io.proto GcsDestination: "If the uri doesn't end with '/', a '/' will be automatically appended"."""
    base = spec.get("baseOutputDirectory")
    if base and not base["outputUriPrefix"].endswith("/"):
        base["outputUriPrefix"] += "/"


def _add_trials(index: dict[str, tuple[str, str]], records: list[Mapping[str, Any]]) -> None:
    for record in records:
        for trial in (record.get("trainingOutput") or {}).get("trials") or []:
            index[trial_job_id(record["jobId"], trial["trialId"])] = (record["jobId"], trial["trialId"])


def _job_id() -> str:
    """A 19-digit job ID, as Vertex assigns (never starting with a letter: ml v1 IDs always do)."""
    return str(10**18 + secrets.randbelow(9 * 10**18))


class VertexJobs:
    """create, get, list, cancel and delete for both Vertex job kinds, on a TrainingService."""

    def __init__(self, service: TrainingService) -> None:
        self.service = service
        self.store = service.store
        # project number -> {trial CustomJob ID: (tuning job ID, trial ID)}, each built on first use.
        self._trial_jobs: dict[str, dict[str, tuple[str, str]]] = {}
        self._trial_lock = threading.Lock()

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

    def find(self, kind: str, project: str, location: str, job_id: str) -> dict[str, Any]:
        """The stored record of a job of ``kind`` (for the console page); JobNotFoundError if none."""
        return self._record(kind, project, location, job_id)

    # -- the API -------------------------------------------------------------------------------

    def create(self, kind: str, project: str, location: str, body: Any) -> dict[str, Any]:
        number, location = self.parent(project, location)
        if kind == CUSTOM_JOBS:
            resource = validate_custom_job(body, region=location)
        else:
            resource = validate_tuning_job(body, region=location)
        key = job_spec_key(resource)
        deployment = self.service.config.deployment
        if self.service.engine is None:
            _reject_containers(resource[key], key, deployment)
        check_vertex_job(deployment, key, resource[key], kind == TUNING_JOBS)
        spec = resource[key]
        _output_prefix_with_slash(spec)
        packages = [
            uri
            for pool in spec["workerPoolSpecs"]
            for uri in (pool.get("pythonPackageSpec") or {}).get("packageUris", [])
        ]
        self.service.permissions.check_create(custom_code_agent(number), spec.get("serviceAccount"), packages)
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
        try:
            record = self._record(kind, project, location, job_id)
        except JobNotFoundError:
            trial_job = self._trial_custom_job(kind, project, location, job_id)
            if trial_job is None:
                raise
            return trial_job
        if kind == TUNING_JOBS:
            self._index_trials(record["projectNumber"], [record])
        return render(record)

    def _index_trials(self, number: str, records: list[Mapping[str, Any]]) -> None:
        """Add the trials of these tuning jobs to the project's index, if it is built (else it will be)."""
        with self._trial_lock:
            if number in self._trial_jobs:
                _add_trials(self._trial_jobs[number], records)

    def _trial_custom_job(self, kind: str, project: str, location: str, job_id: str) -> dict[str, Any] | None:
        """The CustomJob a tuning job's trial names (``Trial.customJob``), found through the index."""
        if kind != CUSTOM_JOBS or not job_id.isdigit():
            return None
        number, location = self.parent(project, location)
        with self._trial_lock:
            index = self._trial_jobs.get(number)
            if index is None:  # once per project: the trials of every tuning job stored so far
                index = self._trial_jobs[number] = {}
                views = self.store.job_views([number])
                _add_trials(index, [view.job for view in views if view.job.get("kind") == TUNING_JOBS])
            found = index.get(job_id)
        if found is None:
            return None
        try:
            record = self.store.get(number, found[0])
        except JobNotFoundError:  # deleted since
            return None
        if record.get("kind") != TUNING_JOBS or record.get("location") != location:
            return None
        return trial_custom_job(record, found[1])

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
        read_mask_paths(read_mask, _SCHEMAS[kind])  # a bad mask is a 400 before anything is read
        size = pages.page_size(page_size)
        plan, field = _narrowest_lookup(node)

        def shown(view: JobView) -> dict[str, Any] | None:
            job = view.job
            if job.get("kind") != kind or job.get("location") != location:
                return None
            rendered = render(job, with_trials=False)
            if not plan.matches(rendered):
                return None
            return copy.deepcopy(apply_read_mask(rendered, read_mask, _SCHEMAS[kind]))

        views = reversed(self.store.job_views([number], field, plan.candidates))
        return pages.newest_stored_page(views, kind, page_token, size, shown)

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

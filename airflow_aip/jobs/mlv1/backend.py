"""ml v1 (AI Platform Training) as a :class:`~airflow_aip.jobs.backend.Backend`.

IDs are the client's: an attempt's ID is the body's ``jobId``, and a create of a taken ID meets
409. The spec compared before adopting a job is its ``trainingInput``, with the API's defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.backend import Backend
from airflow_aip.jobs.mlv1.diff import diff_training_input
from airflow_aip.jobs.mlv1.view import view_from_ml
from airflow_aip.jobs.request import JobRequest, RequestInputs
from airflow_aip.jobs.training_input import build_training_input, validate_job
from airflow_aip.jobs.view import AI_PLATFORM, JobView, last_segment

ML_JOBS = "jobs"
CONSOLE_JOB_URL = "https://console.cloud.google.com/ai-platform/jobs/{job_id}?{query}"


def console_url(project_id: str, job_id: str) -> str:
    """An AI Platform job's page in the Google Cloud console."""
    return CONSOLE_JOB_URL.format(job_id=quote(job_id, safe=""), query=urlencode({"project": project_id}))


class MlV1Backend(Backend):
    name = AI_PLATFORM
    title = "AI Platform Training"
    output_dir_field = "trainingInput.jobDir"
    model_subdir = ""
    server_assigns_ids = False
    schedules_capacity = False
    endpoint_env = "CLOUDSDK_API_ENDPOINT_OVERRIDES_ML"

    def view(self, resource: Mapping[str, Any], *, project_id: str | None, region: str | None) -> JobView:
        return view_from_ml(resource, project_id)

    def labels_for(self, labels: Mapping[str, str], job_id: str) -> dict[str, str]:
        return dict(labels)

    def for_attempt(self, body: Mapping[str, Any], job_id: str) -> dict[str, Any]:
        return {**body, "jobId": job_id}

    def compared_spec(self, body: Mapping[str, Any]) -> dict[str, Any]:
        return {"trainingInput": body.get("trainingInput") or {}}

    def spec_differences(self, ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> list[str]:
        return diff_training_input(ours.get("trainingInput") or {}, theirs.get("trainingInput") or {})

    def package_uris(self, spec: Mapping[str, Any]) -> list[str]:
        return list((spec.get("trainingInput") or {}).get("packageUris") or [])

    def console_url(self, project: str, name: str, view: Mapping[str, Any]) -> str:
        return console_url(project, str(view.get("job_id") or last_segment(name)))

    def build_request(self, asked: RequestInputs) -> JobRequest:
        """trainingInput from the layered config and the named arguments, the whole Job validated."""
        for field, value in (
            ("vertex_job", asked.vertex_job),
            ("executor_image_uri", asked.executor_image_uri),
        ):
            if value:
                raise ValidationError(field, "is Vertex AI's vocabulary: set backend='vertex' to use it")
        for field, value in (asked.placement or {}).items():
            if value is not None:  # given at all: AI Platform has no Spot, Flex-Start or reservations
                raise ValidationError(field, "is Vertex AI's vocabulary: set backend='vertex' to use it")
        ml_input = build_training_input({"trainingInput": dict(asked.layered_input)}, **asked.named)
        validate_job({"jobId": asked.first_id, "trainingInput": ml_input, "labels": asked.labels})
        return JobRequest(self, ML_JOBS, {"trainingInput": ml_input, "labels": asked.labels})


MLV1 = MlV1Backend()

"""Vertex AI custom training (aiplatform v1) as a :class:`~airflow_aip.jobs.backend.Backend`.

Vertex assigns numeric IDs and takes neither a client ID nor a request ID, so our ID is the
``displayName`` and the :data:`~airflow_aip.jobs.labels.JOB_ID_LABEL` label, which is how a job
is found again before any create. AI Platform's vocabulary is translated
(:mod:`.translate`), and ``vertex_job`` (Vertex's own vocabulary) goes on top.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.backend import Backend
from airflow_aip.jobs.labels import JOB_ID_LABEL, sanitize_label_value
from airflow_aip.jobs.locations import check_location
from airflow_aip.jobs.request import JobRequest, RequestInputs
from airflow_aip.jobs.training_input import build_training_input
from airflow_aip.jobs.vertex.body import job_spec_of
from airflow_aip.jobs.vertex.capacity import why_waiting
from airflow_aip.jobs.vertex.diff import diff_vertex_spec
from airflow_aip.jobs.vertex.translate import to_vertex
from airflow_aip.jobs.vertex.usage import usage_of
from airflow_aip.jobs.vertex.view import parse_name, view_from_vertex
from airflow_aip.jobs.view import VERTEX, JobView, last_segment

# Airflow's own VertexAITrainingLink (CustomJob and HyperparameterTuningJob alike).
VERTEX_CONSOLE_URL = (
    "https://console.cloud.google.com/vertex-ai/locations/{region}/training/{job}/cpu?{query}"
)
# AIP_MODEL_DIR is <base>/model/, or <base>/<trial id>/model/ for a trial.
VERTEX_MODEL_DIR = "model"


def _given(layered: Mapping[str, Any], named: Mapping[str, Any]) -> bool:
    """Did the user write any of AI Platform's vocabulary (a region alone does not count)?"""
    return bool(layered) or any(v is not None for k, v in named.items() if k != "region")


class VertexBackend(Backend):
    name = VERTEX
    title = "Vertex AI"
    output_dir_field = "jobSpec.baseOutputDirectory"
    model_subdir = VERTEX_MODEL_DIR
    server_assigns_ids = True
    schedules_capacity = True
    endpoint_env = "CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM"

    def view(self, resource: Mapping[str, Any], *, project_id: str | None, region: str | None) -> JobView:
        return view_from_vertex(resource, project_id=project_id or "", region=region or "")

    def location_of(self, name: str) -> str | None:
        """``projects/P/locations/L/...``: L, the endpoint of the job (ValueError when malformed)."""
        return parse_name(name)[1]

    def usage(self, body: Mapping[str, Any]) -> dict[str, Any] | None:
        return usage_of(body)

    def labels_for(self, labels: Mapping[str, str], job_id: str) -> dict[str, str]:
        return {**labels, JOB_ID_LABEL: sanitize_label_value(job_id)}

    def for_attempt(self, body: Mapping[str, Any], job_id: str) -> dict[str, Any]:
        return {**body, "displayName": job_id, "labels": self.labels_for(body.get("labels") or {}, job_id)}

    def why_waiting(self, view: Mapping[str, Any]) -> str | None:
        return why_waiting(view)

    def compared_spec(self, body: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in body.items() if k not in ("displayName", "labels")}

    def spec_differences(self, ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> list[str]:
        return diff_vertex_spec(ours, theirs)

    def package_uris(self, spec: Mapping[str, Any]) -> list[str]:
        """Every pool's packages (a tuning job's in its ``trialJobSpec``), once each."""
        job_spec = job_spec_of(spec)
        uris: list[str] = []
        for pool in job_spec.get("workerPoolSpecs") or []:
            for uri in (pool.get("pythonPackageSpec") or {}).get("packageUris") or []:
                if uri not in uris:
                    uris.append(uri)
        return uris

    def console_url(self, project: str, name: str, view: Mapping[str, Any]) -> str:
        return VERTEX_CONSOLE_URL.format(
            region=quote(str(view.get("region") or ""), safe=""),
            job=quote(last_segment(name), safe=""),
            query=urlencode({"project": project}),
        )

    def build_request(self, asked: RequestInputs) -> JobRequest:
        """AI Platform's vocabulary translated, ``vertex_job`` on top, the region checked."""
        vertex_job, layered, named = asked.vertex_job, asked.layered_input, asked.named
        if vertex_job is not None and not isinstance(vertex_job, Mapping):
            raise ValidationError("vertex_job", f"must be a mapping, got {type(vertex_job).__name__}")
        named_region = named.get("region") or layered.get("region") or asked.default_region
        training_input: dict[str, Any] | None = None
        if _given(layered, named) or not vertex_job:
            training_input = build_training_input(
                {"trainingInput": dict(layered)}, **{**named, "region": named_region}
            )
        region = check_location(str((training_input or {}).get("region") or named_region or ""), "region")
        translated = to_vertex(
            training_input,  # its region picks the container registry (us, europe, asia); not in the body
            display_name=asked.first_id,
            labels=self.labels_for(asked.labels, asked.first_id),
            executor_image_uri=asked.executor_image_uri,
            framework=asked.framework,
            vertex_job=vertex_job,
            placement=asked.placement,
        )
        body = {**translated.body, "labels": asked.labels}
        return JobRequest(self, translated.kind, body, region, translated.resume_from)


VERTEX_AI = VertexBackend()

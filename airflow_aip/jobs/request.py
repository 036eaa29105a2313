"""What a submit asks for, on either backend: the body to send for each attempt ID, and what to compare.

The operator builds one :class:`JobRequest` before any side effect (everything validated), and
the submit path asks it, per attempt ID (``_r2``...), for the body to send and for the view the
adoption rule compares an existing job with. On ml v1 the ID is the job's ``jobId``; on Vertex
AI, which assigns numeric IDs and takes neither a client ID nor a request ID, our ID is the
``displayName`` and the :data:`JOB_ID_LABEL` label, which is how the job is found again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.labels import JOB_ID_LABEL, sanitize_label_value
from airflow_aip.jobs.locations import check_location
from airflow_aip.jobs.mlv1.training_input import build_training_input, validate_job
from airflow_aip.jobs.vertex.translate import to_vertex
from airflow_aip.jobs.view import AI_PLATFORM, VERTEX, check_backend

ML_JOBS = "jobs"


@dataclass(frozen=True)
class JobRequest:
    """A validated job, ready to send under any attempt ID.

    ``kind``: ``jobs`` (ml v1), ``customJobs`` or ``hyperparameterTuningJobs`` (Vertex AI).
    ``body``: ml v1: ``{"trainingInput", "labels"}``; Vertex: the CustomJob or
    HyperparameterTuningJob body as validated for the first attempt's ID.
    ``region``: where it runs (Vertex: the regional endpoint and the parent's location).
    """

    backend: str
    kind: str
    body: dict[str, Any]
    region: str | None = None

    def labels_for(self, job_id: str) -> dict[str, str]:
        labels = dict(self.body.get("labels") or {})
        if self.backend == VERTEX:
            labels[JOB_ID_LABEL] = sanitize_label_value(job_id)
        return labels

    def for_attempt(self, job_id: str) -> dict[str, Any]:
        """The body to send for ``job_id``."""
        if self.backend == AI_PLATFORM:
            return {**self.body, "jobId": job_id}
        return {**self.body, "displayName": job_id, "labels": self.labels_for(job_id)}

    def compared(self, job_id: str) -> dict[str, Any]:
        """What the adoption rule compares an existing job's view with (see ``jobs.adoption``)."""
        if self.backend == AI_PLATFORM:
            spec = {"trainingInput": self.body.get("trainingInput") or {}}
        else:
            spec = {k: v for k, v in self.body.items() if k not in ("displayName", "labels")}
        return {"backend": self.backend, "spec": spec, "labels": self.labels_for(job_id)}


def _given(layered: Mapping[str, Any], named: Mapping[str, Any]) -> bool:
    """Did the user write any of AI Platform's vocabulary (a region alone does not count)?"""
    return bool(layered) or any(v is not None for k, v in named.items() if k != "region")


def build_request(
    backend: str,
    *,
    layered_input: Mapping[str, Any],
    named: Mapping[str, Any],
    labels: dict[str, str],
    first_id: str,
    default_region: str | None = None,
    executor_image_uri: str | None = None,
    framework: str | None = None,
    vertex_job: Mapping[str, Any] | None = None,
) -> JobRequest:
    """The request for ``backend``, every field checked (nothing is sent before this returns).

    ``layered_input`` is the trainingInput of config file and ``training_input`` merged;
    ``named`` the operator's named arguments in the API's names (``None``: not given).
    On Vertex AI, AI Platform's vocabulary is translated (:mod:`airflow_aip.jobs.vertex.translate`) and
    ``vertex_job`` (Vertex's own vocabulary) goes on top; on ml v1 ``vertex_job`` is an error.
    """
    check_backend(backend)
    if backend == AI_PLATFORM:
        for name, value in (("vertex_job", vertex_job), ("executor_image_uri", executor_image_uri)):
            if value:
                raise ValidationError(name, "is Vertex AI's vocabulary: set backend='vertex' to use it")
        ml_input = build_training_input({"trainingInput": dict(layered_input)}, **named)
        validate_job({"jobId": first_id, "trainingInput": ml_input, "labels": labels})
        return JobRequest(AI_PLATFORM, ML_JOBS, {"trainingInput": ml_input, "labels": labels})
    if vertex_job is not None and not isinstance(vertex_job, Mapping):
        raise ValidationError("vertex_job", f"must be a mapping, got {type(vertex_job).__name__}")
    named_region = named.get("region") or layered_input.get("region") or default_region
    training_input: dict[str, Any] | None = None
    if _given(layered_input, named) or not vertex_job:
        training_input = build_training_input(
            {"trainingInput": dict(layered_input)}, **{**named, "region": named_region}
        )
    region = check_location(str((training_input or {}).get("region") or named_region or ""), "region")
    translated = to_vertex(
        training_input,  # its region picks the container registry (us, europe, asia); not in the body
        display_name=first_id,
        labels={**labels, JOB_ID_LABEL: sanitize_label_value(first_id)},
        executor_image_uri=executor_image_uri,
        framework=framework,
        vertex_job=vertex_job,
    )
    body = {**translated.body, "labels": labels}
    return JobRequest(VERTEX, translated.kind, body, region)

"""What a submit asks for, on either backend: the body to send for each attempt ID, and what to compare.

The operator builds one :class:`JobRequest` before any side effect (everything validated; see
:func:`airflow_aip.jobs.backends.build_request`), and the submit path asks it, per attempt ID
(``_r2``...), for the body to send and for the view the adoption rule compares an existing job
with. Where the ID goes, which labels carry it and what is compared are the backend's
(:class:`~airflow_aip.jobs.backend.Backend`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_aip.jobs.backend import Backend


@dataclass(frozen=True)
class JobRequest:
    """A validated job, ready to send under any attempt ID.

    ``kind``: ``jobs`` (ml v1), ``customJobs`` or ``hyperparameterTuningJobs`` (Vertex AI).
    ``body``: ml v1: ``{"trainingInput", "labels"}``; Vertex: the CustomJob or
    HyperparameterTuningJob body as validated for the first attempt's ID.
    ``region``: where it runs (Vertex: the regional endpoint and the parent's location).
    """

    backend: Backend
    kind: str
    body: dict[str, Any]
    region: str | None = None
    resume_from: str | None = None  # a finished tuning job whose trials count (resumePreviousJobId)

    def labels_for(self, job_id: str) -> dict[str, str]:
        return self.backend.labels_for(self.body.get("labels") or {}, job_id)

    def for_attempt(self, job_id: str) -> dict[str, Any]:
        """The body to send for ``job_id``."""
        return self.backend.for_attempt(self.body, job_id)

    def compared(self, job_id: str) -> dict[str, Any]:
        """What the adoption rule compares an existing job's view with (see ``jobs.adoption``)."""
        spec = self.backend.compared_spec(self.body)
        return {"backend": self.backend.name, "spec": spec, "labels": self.labels_for(job_id)}


@dataclass(frozen=True)
class RequestInputs:
    """What the operator asks for: ``layered_input`` is the trainingInput of config file and
    ``training_input`` merged; ``named`` the operator's named arguments in the API's names
    (``None``: not given); ``vertex_job`` Vertex AI's own vocabulary, which goes on top."""

    layered_input: Mapping[str, Any]
    named: Mapping[str, Any]
    labels: dict[str, str]
    first_id: str
    default_region: str | None = None
    executor_image_uri: str | None = None
    framework: str | None = None
    vertex_job: Mapping[str, Any] | None = None
    placement: Mapping[str, Any] | None = None  # Vertex AI only: see jobs.placement

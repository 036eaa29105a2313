"""A wire format as a type: what the model asks of Vertex AI or ml v1, answered by attribute reads.

The model (request, adoption, summary, export) and the adapters never branch on a backend's
name. They hold a :class:`Backend` and read its attributes: which field holds the output
directory, where the model lies below it, whether the server assigns job IDs, how an attempt's
ID goes into a body, how two specs are compared. Each wire format defines its object in its own
folder (:mod:`airflow_aip.jobs.vertex.backend`, :mod:`airflow_aip.jobs.mlv1.backend`); a view
or a task names its backend by :attr:`Backend.name`, which is what crosses XCom and triggers, and
:mod:`airflow_aip.jobs.backends` finds the object by that name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_aip.jobs.view import JobView

if TYPE_CHECKING:
    from airflow_aip.jobs.request import JobRequest, RequestInputs


class Backend(ABC):
    """One job API's wire format, as the neutral model needs it."""

    #: The name a task and a view carry (``vertex``, ``ai_platform``).
    name: str
    #: How the task log names the API.
    title: str
    #: The job's output directory, as the API's field path (for errors that name it).
    output_dir_field: str
    #: Where a trainer writes its model below the output directory (a trial's, for tuning).
    model_subdir: str
    #: True when the server assigns job IDs, so a taken ID is found by a lookup before create.
    server_assigns_ids: bool
    #: Spot, Flex-Start, reservations and quota queues exist (a capacity ladder can climb them)
    schedules_capacity: bool
    #: The environment variable gcloud reads to override this API's endpoint.
    endpoint_env: str

    @abstractmethod
    def view(self, resource: Mapping[str, Any], *, project_id: str | None, region: str | None) -> JobView:
        """A job as its API answered it, as the neutral view (:mod:`airflow_aip.jobs.view`)."""

    def why_waiting(self, view: Mapping[str, Any]) -> str | None:
        """Why a job that has not started waits (quota, a search for machines), one sentence; None
        when the API does not say, or once the job runs. The wait step logs it, the UI shows it."""
        return None

    def location_of(self, name: str) -> str | None:
        """The location a resource name carries (None when the API's names carry none)."""
        return None

    def usage(self, body: Mapping[str, Any]) -> dict[str, Any] | None:
        """What a job of this body bills for (:mod:`airflow_aip.jobs.vertex.usage`), for its worst
        case before submit; None where the API has no price table."""
        return None

    @abstractmethod
    def labels_for(self, labels: Mapping[str, str], job_id: str) -> dict[str, str]:
        """The labels a job created under ``job_id`` carries."""

    @abstractmethod
    def for_attempt(self, body: Mapping[str, Any], job_id: str) -> dict[str, Any]:
        """The body to send for an attempt's ID (``_r2``...): where the ID goes is the API's."""

    @abstractmethod
    def compared_spec(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """What of a body the adoption rule compares with an existing job's ``spec``."""

    @abstractmethod
    def spec_differences(self, ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> list[str]:
        """The fields in which a spec we would send and one the server holds differ."""

    @abstractmethod
    def package_uris(self, spec: Mapping[str, Any]) -> list[str]:
        """The trainer packages a job's spec runs, once each."""

    @abstractmethod
    def console_url(self, project: str, name: str, view: Mapping[str, Any]) -> str:
        """The job's page in the Google Cloud console."""

    @abstractmethod
    def build_request(self, asked: RequestInputs) -> JobRequest:
        """The validated request (see :func:`airflow_aip.jobs.backends.build_request`)."""

    def __repr__(self) -> str:
        return f"<backend {self.name}>"

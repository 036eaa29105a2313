"""Vertex AI's API (aiplatform v1) at one region: what its training and Model Registry hooks share.

Its endpoint is regional (``https://{region}-aiplatform.googleapis.com/``: there is no global
endpoint for training or for models) unless overridden by the hook argument, the connection
extra ``api_endpoint`` or gcloud's ``CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM``; resources
live under ``projects/P/locations/REGION``. The rest is the shared core's
(:class:`~airflow_aip.hooks.google_api.GoogleApiHook`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from airflow_aip.hooks.google_api import GoogleApiHook
from airflow_aip.jobs.locations import check_location
from airflow_aip.jobs.vertex.backend import VERTEX_AI

if TYPE_CHECKING:
    from airflow_aip.hooks.job_reference import JobApi

Hook = TypeVar("Hook", bound="RegionalAiplatformHook")


class RegionalAiplatformHook(GoogleApiHook):
    """aiplatform v1 in one region: its host, its parent, and how long a lost write is looked for.

    Other arguments are the core's (:class:`~airflow_aip.hooks.google_api.GoogleApiHook`).

    :param region: the location (``us-central1``): the endpoint and the resources' parent.
    """

    api_label = "aiplatform v1"
    default_host = "aiplatform"
    endpoint_extra = "api_endpoint"
    endpoint_env = VERTEX_AI.endpoint_env
    # Seconds between the lookups that follow a write whose answer was lost (a list may lag a
    # create or an upload): see the subclasses' exactly-once rules.
    settle_delays: tuple[float, ...] = (1.0, 2.0, 4.0)

    def __init__(self, *args: Any, region: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.region = check_location(region, "region")

    @classmethod
    def for_api(cls: type[Hook], api: JobApi, **retry: Any) -> Hook:
        """This hook for a task's (or trigger's) job API: its connection, endpoint, identity,
        project and region (``retry``: the core's retry arguments)."""
        return cls(
            api.gcp_conn_id,
            project_id=api.project_id,
            api_endpoint=api.api_endpoint,
            impersonation_chain=api.impersonation_chain,
            region=api.region or "",  # refused by the region check, as any unknown location
            **retry,
        )

    def google_host(self) -> str:
        return f"{self.region}-aiplatform"

    def parent(self, project_id: str | None = None) -> str:
        return f"projects/{project_id or self.project_id}/locations/{self.region}"

"""Vertex AI Model Registry (aiplatform v1 ``models``): the only place that talks to it.

The endpoint, credentials and typed errors are the shared core's
(:class:`~airflow_aip.hooks.google_api.GoogleApiHook`), regional as for training.

Exactly once without a request ID (see :mod:`airflow_aip.registry.upload`): an upload is sent
once per decision. When its answer is lost (5xx, 429, a dropped connection), the version may
exist: the model's versions are listed by the upload's source label over :attr:`settle_delays`
(the operation may still be importing), and only when none shows up is it sent again. An upload
of a first version (``modelId``) that meets 409 lost a race with another first upload: it is
sent again as a version of that model.

The upload's long-running operation is read with :meth:`aread` by the triggerer's shared poller
(:mod:`airflow_aip.triggers.job_polling`), as a job is: its state is RUNNING until ``done``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_aip.exceptions import JobAlreadyExistsError, JobNotFoundError
from airflow_aip.hooks.google_api import GoogleApiHook
from airflow_aip.hooks.http_shared import is_transient, settled_lookup
from airflow_aip.jobs.locations import check_location
from airflow_aip.jobs.vertex.backend import VERTEX_AI
from airflow_aip.jobs.vertex.models import operation_state
from airflow_aip.jobs.watch import Listed, WatchBatch
from airflow_aip.registry.upload import SOURCE_LABEL

UPLOAD_SENDS = 3


class ModelRegistryHook(GoogleApiHook):
    """Upload versions, find them, read their operations and move their aliases.

    :param region: the models' location (``us-central1``): the endpoint and the parent.
    Other arguments are the core's (:class:`~airflow_aip.hooks.google_api.GoogleApiHook`).
    """

    hook_name = "Vertex AI Model Registry (airflow_aip)"
    api_label = "aiplatform v1"
    default_host = "aiplatform"
    endpoint_extra = "api_endpoint"
    endpoint_env = VERTEX_AI.endpoint_env
    settle_delays: tuple[float, ...] = (1.0, 2.0, 4.0)

    def __init__(self, *args: Any, region: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.region = check_location(region, "region")

    def google_host(self) -> str:
        return f"{self.region}-aiplatform"

    def parent(self) -> str:
        return f"projects/{self.project_id}/locations/{self.region}"

    # -- reads ---------------------------------------------------------------------------------

    def get_model(self, name: str) -> dict[str, Any] | None:
        """The version ``name`` addresses (``model``, ``model@3``, ``model@champion``); None if none."""
        try:
            return self.request("models.get", "GET", f"v1/{name}")
        except JobNotFoundError:
            return None

    def list_versions(self, model: str, filter: str | None = None) -> list[dict[str, Any]]:
        """Every version of ``model`` (matching ``filter``); [] when the model does not exist."""
        params: dict[str, Any] = {"pageSize": 100, **({"filter": filter} if filter else {})}
        try:
            return self.list_all("models.listVersions", f"v1/{model}:listVersions", "models", params)
        except JobNotFoundError:
            return []

    def find_version(self, model: str, key: str) -> dict[str, Any] | None:
        """The version of ``model`` uploaded from the source ``key``; the oldest if a race made two."""
        found = self.list_versions(model, f'labels.{SOURCE_LABEL}="{key}"')
        return min(found, key=lambda v: int(str(v.get("versionId") or 0))) if found else None

    def read_operation(self, name: str) -> dict[str, Any]:
        return self.request("models.operations.get", "GET", f"v1/{name}")

    # -- writes --------------------------------------------------------------------------------

    def upload(self, body: dict[str, Any], *, model: str, key: str) -> dict[str, Any]:
        """Send the upload once per decision: ``{"operation": ...}``, or ``{"version": ...}`` when a
        lost answer's version turned up. Raises what the API answered otherwise."""
        body = dict(body)
        for send in range(1, UPLOAD_SENDS + 1):
            try:
                operation = self.request(
                    "models.upload", "POST", f"v1/{self.parent()}/models:upload", body=body, retry=False
                )
                return {"operation": operation}
            except JobAlreadyExistsError:
                if "modelId" not in body:
                    raise
                self.log.info("%s was created meanwhile: uploading as its next version", model)
                body = {**{k: v for k, v in body.items() if k != "modelId"}, "parentModel": model}
            except Exception as err:
                if not is_transient(err):
                    raise
                self.log.warning("Upload to %s got no answer (%s): looking for the version", model, err)
                found = self._settled_lookup(model, key)
                if found is not None:
                    return {"version": found}
                if send == UPLOAD_SENDS:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _settled_lookup(self, model: str, key: str) -> dict[str, Any] | None:
        return settled_lookup(lambda: self.find_version(model, key), self.settle_delays)

    def merge_aliases(self, version_name: str, aliases: Sequence[str]) -> dict[str, Any]:
        """Add (``champion``) or remove (``-champion``) aliases of one version, in one call.

        Idempotent: merging an alias onto the version that holds it changes nothing, so the
        retry policy may resend it.
        """
        return self.request(
            "models.mergeVersionAliases",
            "POST",
            f"v1/{version_name}:mergeVersionAliases",
            body={"versionAliases": list(aliases)},
        )

    # -- the shared poller's interface (an operation read as a job) ------------------------------

    def watch_batches(self, watched: Sequence[tuple[str, str]]) -> list[WatchBatch]:
        """Operations are read one by one: there is no list that answers for a set of them."""
        return []

    async def alist_batch(self, batch: WatchBatch) -> dict[str, Listed]:  # pragma: no cover
        return {}

    async def aread(self, name: str) -> dict[str, Any]:
        """The operation as the poller reads a job: ``{name, state, operation}``."""
        operation = await self.arequest("models.operations.get", "GET", f"v1/{name}")
        return {"name": name, "state": operation_state(operation), "operation": operation}

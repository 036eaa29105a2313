"""Vertex AI Model Registry (aiplatform v1 ``models``): the only place that talks to it.

The regional endpoint and parent are Vertex AI's, as for training
(:class:`~airflow_aip.hooks.aiplatform.RegionalAiplatformHook`); credentials and typed errors
the shared core's.

Exactly once without a request ID (see :mod:`airflow_aip.registry.upload`): an upload is sent
once per decision. When its answer is lost (5xx, 429, a dropped connection), the version may
exist: the model's versions are listed by the upload's source label over :attr:`settle_delays`
(the operation may still be importing), and only when none shows up is it sent again. An upload
of a first version (``modelId``) that meets 409 lost a race with another first upload: it is
sent again as a version of that model.

The upload's long-running operation is waited for as a job is, by the one wait step
(:mod:`airflow_aip.jobs.waiting`): :meth:`read` (the worker's runner) and :meth:`aread` (the
triggerer's shared poller, :mod:`airflow_aip.triggers.job_polling`) read it as a small view,
:func:`operation_view`, whose state is RUNNING until ``done``, then SUCCEEDED or FAILED.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow_aip.exceptions import JobAlreadyExistsError, JobNotFoundError
from airflow_aip.hooks.aiplatform import RegionalAiplatformHook
from airflow_aip.hooks.http_shared import is_transient, settled_lookup
from airflow_aip.jobs.vertex.models import operation_state
from airflow_aip.jobs.watch import Listed, WatchBatch
from airflow_aip.registry.upload import SOURCE_LABEL

UPLOAD_SENDS = 3


def operation_view(name: str, operation: Mapping[str, Any]) -> dict[str, Any]:
    """A long-running operation as the wait step reads a job: ``{name, state, operation}``."""
    return {"name": name, "state": operation_state(operation), "operation": dict(operation)}


class ModelRegistryHook(RegionalAiplatformHook):
    """Upload versions, find them, read their operations and move their aliases.

    Arguments are :class:`~airflow_aip.hooks.aiplatform.RegionalAiplatformHook`'s (``region``:
    the models' location, the endpoint and the parent).
    """

    hook_name = "Vertex AI Model Registry (airflow_aip)"

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

    def read(self, name: str) -> dict[str, Any]:
        """The operation as the worker's wait reads a job (:func:`operation_view`)."""
        return operation_view(name, self.read_operation(name))

    async def aread(self, name: str) -> dict[str, Any]:
        """As :meth:`read`, without blocking the event loop (the triggerer's shared poller)."""
        return operation_view(name, await self.arequest("models.operations.get", "GET", f"v1/{name}"))

"""What completing a Model Registry upload does: Vertex's import, as far as it can be checked here.

Vertex copies ``artifactUri`` and, for a pre-built prediction container, needs there exactly one
of the files that container loads (:mod:`airflow_aip.jobs.vertex.serving`). The directory is
listed through the service's Cloud Storage emulator (the one jobs read packages from), directly
below ``artifactUri`` (a file in a sub-directory is not loaded). A missing bucket is a directory
holding nothing (code 9, FAILED_PRECONDITION, as any missing file: Vertex raises
``FailedPrecondition: 400 Model directory gs://... is expected to contain exactly one of:
[...]``); an emulator that does not answer fails the import with code 13 (INTERNAL): the
upload was not at fault. A custom container is not looked into, as Vertex does not (it only
copies the directory).

Also the operation records every kind of operation shares (upload, delete and deleteVersion), and the
19-digit IDs Vertex gives models and operations.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Mapping
from typing import Any

from airflow_aip.jobs.vertex.serving import missing_artifact, serving_of
from airflow_aip.local.clock import rfc3339
from airflow_aip.local.vertex.models_store import ModelKey, model_name

FAILED_PRECONDITION = 9  # google.rpc.Code: what a failed import's operation error carries
INTERNAL = 13
# The object names directly below a gs:// directory (raises ArtifactsUnreadable).
ArtifactLister = Callable[[str], list[str]]
_log = logging.getLogger(__name__)


class ArtifactsUnreadable(Exception):
    """Cloud Storage could not be asked what ``artifactUri`` holds (not: it holds nothing)."""


def numeric_id() -> str:
    """A 19-digit ID, as Vertex assigns models and operations (a modelId never starts with a digit)."""
    return str(10**18 + secrets.randbelow(9 * 10**18))


def gcs_artifact_lister(storage_url: str | None) -> ArtifactLister:
    """Object names directly below a gs:// directory, read from the service's Cloud Storage emulator."""

    def names(uri: str) -> list[str]:
        from google.api_core import exceptions as gexc
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        from airflow_aip.uris import parse_gcs_uri

        if not storage_url:
            raise ArtifactsUnreadable("no Cloud Storage emulator is configured for the local service")
        parsed = parse_gcs_uri(uri, "model.artifactUri")
        prefix = parsed.name.rstrip("/") + "/" if parsed.name.strip("/") else ""
        client = storage.Client(
            project="aip-local",
            credentials=AnonymousCredentials(),
            client_options={"api_endpoint": storage_url},
        )
        try:
            blobs = list(client.list_blobs(parsed.bucket, prefix=prefix, delimiter="/"))
        except gexc.NotFound:
            return []  # no bucket: a directory holding nothing
        except (gexc.GoogleAPIError, OSError) as exc:  # requests' ConnectionError is an OSError
            raise ArtifactsUnreadable(f"cannot list {uri}: {exc}") from exc
        return [blob.name[len(prefix) :] for blob in blobs]

    return names


def import_error(model: Mapping[str, Any], artifacts: ArtifactLister) -> dict[str, Any] | None:
    """What Vertex's import of ``model`` would fail with (``{code, message}``); None if it succeeds."""
    serving = serving_of(str(model["containerSpec"]["imageUri"]))
    if serving is None:
        return None
    uri = str(model["artifactUri"])
    try:
        names = artifacts(uri)
    except ArtifactsUnreadable as exc:
        _log.warning("Model upload: %s", exc)
        return {"code": INTERNAL, "message": f"Could not read the model directory {uri}: {exc}"}
    reason = missing_artifact(serving, uri, names)
    return {"code": FAILED_PRECONDITION, "message": reason} if reason else None


def new_operation(kind: str, key: ModelKey, **fields: Any) -> dict[str, Any]:
    """A stored operation of the model ``key`` (``kind``: upload or deleteVersion), named under it."""
    operation_id = numeric_id()
    stamp = rfc3339()
    return {
        "name": f"{model_name(key)}/operations/{operation_id}",
        "kind": kind,
        "projectNumber": key[0],
        "location": key[1],
        "modelId": key[2],
        "operationId": operation_id,
        "createTime": stamp,
        "updateTime": stamp,
        **fields,
    }

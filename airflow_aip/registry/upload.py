"""One export, one Model Registry version: the upload request, built from the export's manifest.

Exactly once without a request ID. ``models.upload`` takes none, and a re-sent upload makes a
second version. So every version carries the label :data:`SOURCE_LABEL`, a digest of its
``artifactUri``: before uploading, and after an upload whose answer was lost, the register
operator lists the model's versions filtered on it. One artifact directory (one job, one trial:
the export's destination never changes for them) is therefore one version, however often a task
is retried.

The labels and the version description tie the version to its job, trial, metric, trainer
package (the staged URI's sha256 segment), training data and Airflow run. Labels are lossy
(lowercase, 63 characters): a gate never reads a metric from them, only from the manifest.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.labels import VERTEX_LABELS, sanitize_label_value, validate_labels
from airflow_aip.jobs.trials import Goal
from airflow_aip.jobs.vertex.models import ModelRef, validate_alias
from airflow_aip.uris import parse_gcs_uri

SOURCE_LABEL = "aip_model_src"
_SHA256 = re.compile(r"[0-9a-f]{64}")
MAX_DISPLAY_NAME = 128


def source_key(artifact_uri: str) -> str:
    """The label value that finds the version of ``artifact_uri`` (16 hex digits of its sha256)."""
    normalized = artifact_uri.rstrip("/") + "/"
    return hashlib.sha256(normalized.encode()).hexdigest()[:16]


def package_sha256(uri: str) -> str | None:
    """The sha256 a staged package's URI carries (``{staging}/{sha256}/{name}``), None otherwise."""
    parts = uri.rstrip("/").split("/")
    return parts[-2] if len(parts) >= 2 and _SHA256.fullmatch(parts[-2]) else None


@dataclass(frozen=True)
class VersionSource:
    """What a version is uploaded from: the manifest's facts, checked."""

    artifact_uri: str
    job_id: str
    trial_id: str | None
    metric: float | None
    metric_tag: str | None
    goal: str
    packages: tuple[str, ...]
    airflow: Mapping[str, Any]
    manifest_uri: str
    eval_data: str | None = None
    """The fingerprint of the evaluation data the metric was measured on (``md5:<hex>``)."""
    eval_uri: str | None = None

    @property
    def package_sha256s(self) -> list[str]:
        return [sha for sha in (package_sha256(uri) for uri in self.packages) if sha]


def version_source(manifest: Mapping[str, Any], manifest_uri: str) -> VersionSource:
    """The export manifest at ``manifest_uri`` as an upload's source; ValidationError if it is not one."""
    model_uri = manifest.get("model_uri")
    if not isinstance(model_uri, str) or not model_uri:
        raise ValidationError("manifest_uri", f"{manifest_uri} has no model_uri: is it an export manifest?")
    artifact = parse_gcs_uri(model_uri, "manifest_uri").uri.rstrip("/") + "/"
    metric = manifest.get("metric") or {}
    value = metric.get("value")
    return VersionSource(
        artifact_uri=artifact,
        job_id=str(manifest.get("job_id") or ""),
        trial_id=str(manifest["trial_id"]) if manifest.get("trial_id") else None,
        metric=float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None,
        metric_tag=str(metric["tag"]) if metric.get("tag") else None,
        goal=Goal.parse(metric.get("goal"), "manifest_uri").value,
        packages=tuple(str(p.get("uri")) for p in manifest.get("packages") or [] if p.get("uri")),
        airflow=dict(manifest.get("airflow") or {}),
        manifest_uri=manifest_uri,
        eval_data=str(metric["eval_data"]) if metric.get("eval_data") else None,
        eval_uri=str(metric["eval_uri"]) if metric.get("eval_uri") else None,
    )


def version_labels(source: VersionSource, user_labels: Mapping[str, str] | None = None) -> dict[str, str]:
    """The version's labels: the user's, then ours (the source key first: it finds the version)."""
    labels = dict(user_labels or {})
    ours = {
        SOURCE_LABEL: source_key(source.artifact_uri),
        "aip_job_id": source.job_id,
        "aip_trial": source.trial_id or "",
        "aip_dag_id": str(source.airflow.get("dag_id") or ""),
        "aip_run_id": str(source.airflow.get("run_id") or ""),
        "aip_package_sha256": (source.package_sha256s or [""])[0][:63],
        # what the metric was measured on: the eval data's md5, so versions on the same data group
        "aip_eval_md5": (source.eval_data or "").removeprefix("md5:")[:63],
    }
    labels.update({key: sanitize_label_value(value) for key, value in ours.items() if value})
    return validate_labels(labels, "labels", rule=VERTEX_LABELS)


def version_description(source: VersionSource, data_uris: Sequence[str]) -> str:
    """A few lines a person reads in the console: where this version came from, exactly."""
    metric = (
        f"{source.metric_tag or 'metric'} = {source.metric!r} ({source.goal})"
        if source.metric is not None
        else "no metric"
    )
    trial = f", trial {source.trial_id}" if source.trial_id else ""
    run = source.airflow
    lines = [
        f"Job {source.job_id}{trial}: {metric}.",
        f"Exported to {source.artifact_uri} (manifest {source.manifest_uri}).",
        *(f"Package {uri}" for uri in source.packages),
        *(f"Data {uri}" for uri in data_uris),
    ]
    if source.eval_data:
        lines.insert(1, f"Measured on {source.eval_uri or 'evaluation data'} ({source.eval_data}).")
    if run.get("dag_id"):
        lines.append(f"Airflow: dag {run.get('dag_id')}, run {run.get('run_id')}, task {run.get('task_id')}.")
    return "\n".join(lines)


def upload_request(
    source: VersionSource,
    *,
    model: ModelRef,
    display_name: str,
    serving_image: str,
    parent_exists: bool,
    aliases: Sequence[str] = (),
    labels: Mapping[str, str] | None = None,
    data_uris: Sequence[str] = (),
    description: str | None = None,
) -> dict[str, Any]:
    """The ``models.upload`` body: a new version of ``model`` (its first one unless ``parent_exists``)."""
    if not display_name or len(display_name) > MAX_DISPLAY_NAME:
        raise ValidationError(
            "display_name", f"must be 1-{MAX_DISPLAY_NAME} characters, got {display_name!r}"
        )
    body: dict[str, Any] = {
        "model": {
            "displayName": display_name,
            "artifactUri": source.artifact_uri,
            "containerSpec": {"imageUri": serving_image},
            "labels": version_labels(source, labels),
            "versionDescription": version_description(source, data_uris),
            "versionAliases": [validate_alias(a, "version_aliases") for a in aliases],
            **({"description": description} if description else {}),
        }
    }
    if parent_exists:
        body["parentModel"] = model.name
    else:
        body["modelId"] = model.model_id
    return body

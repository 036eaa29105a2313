"""What to export from a finished training job, where to, and whether it may be promoted.

Pure: the export operator fetches the job and lists objects through hooks, then asks this
module every question of policy (:mod:`airflow_aip.export_plan` applies these rules to one
export, as a plan the storage hook carries out). Whether it may be promoted is the champion
gate's answer (:func:`airflow_aip.registry.gate.judge`, the Model Registry store's rule too);
this module says what the gate reads of an export and of a champion manifest. The best trial
comes from :func:`airflow_aip.jobs.best_trial` (via the job summary), so "best" means the same
thing here as in XCom and in the local service.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs import JobState, objective_value
from airflow_aip.jobs.backends import backend_of
from airflow_aip.jobs.trials import Goal
from airflow_aip.jobs.view import AI_PLATFORM
from airflow_aip.registry.gate import Measurement, Standing
from airflow_aip.uris import GcsUri, parse_gcs_uri, validate_object_name

MANIFEST_NAME = "manifest.json"
MANIFEST_VERSION = 1


@dataclass(frozen=True)
class ExportSource:
    """The model to export: a job (and for tuning jobs, its best trial) and its output prefix."""

    job_id: str
    prefix: GcsUri
    trial_id: str | None = None
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    metric_tag: str | None = None
    metric: float | None = None
    goal: str = Goal.MAXIMIZE.value
    backend: str = AI_PLATFORM
    resource_name: str | None = None
    eval_data: str | None = None
    """The fingerprint of the data ``metric`` was measured on (``md5:<hex>``; None: not recorded)."""
    eval_uri: str | None = None
    """Where those data were read from, for people: the gate compares fingerprints."""

    @property
    def version(self) -> str:
        """The destination folder name: one job (and trial) always exports to the same place."""
        return f"{self.job_id}_trial{self.trial_id}" if self.trial_id else self.job_id


def export_source(summary: Mapping[str, Any], source_subdir: str | None = None) -> ExportSource:
    """Where a SUCCEEDED job's model lies: ``{output dir}[/<best trial id>][/source_subdir]``.

    The output dir is ml v1's ``jobDir`` or Vertex AI's ``baseOutputDirectory``. Tuning trials
    write below ``<output dir>/<trialId>`` (Google's convention on both, and the local
    service's), so the best trial's output is chosen by the spec's goal. ``source_subdir``
    None means the backend's own place: ``model`` on Vertex AI (where ``AIP_MODEL_DIR``
    points), the output dir itself on ml v1. Raises ValidationError naming the field when the
    job cannot be exported.
    """
    job_id = str(summary.get("job_id") or "")
    state = JobState.parse(summary.get("state"))
    if state is not JobState.SUCCEEDED:
        raise ValidationError("job_id", f"job {job_id} is {state.value}; only a SUCCEEDED job is exported")
    source_backend = backend_of(summary)
    backend = source_backend.name
    output_dir = summary.get("output_dir")
    field_name = source_backend.output_dir_field
    if not output_dir:
        raise ValidationError("job_id", f"job {job_id} has no {field_name} to export from")
    prefix = parse_gcs_uri(str(output_dir), field_name)
    if source_subdir is None:
        source_subdir = source_backend.model_subdir
    parts = [source_subdir.strip("/")] if source_subdir.strip("/") else []
    if parts:
        validate_object_name(parts[0], "source_subdir")
    name = str(summary["name"]) if summary.get("name") else None
    if not summary.get("is_hyperparameter_tuning_job"):
        return ExportSource(
            job_id=job_id,
            prefix=prefix.join(*parts, field="source_subdir"),
            backend=backend,
            resource_name=name,
        )
    best = summary.get("best_trial")
    if not best:
        raise ValidationError("job_id", f"tuning job {job_id} has no trial with a final metric to export")
    trial_id = str(best.get("trialId"))
    if best.get(
        "output_dir"
    ):  # a study over several jobs (a capacity ladder, a resumed job): the trial's own
        prefix = parse_gcs_uri(str(best["output_dir"]), field_name)
        job_id = str(best.get("job_id") or job_id)
    return ExportSource(
        job_id=job_id,
        prefix=prefix.join(trial_id, *parts, field="source_subdir"),
        trial_id=trial_id,
        hyperparameters=dict(best.get("hyperparameters") or {}),
        metric_tag=summary.get("hyperparameter_metric_tag"),
        metric=objective_value(best),
        goal=Goal.parse(summary.get("goal")).value,
        backend=backend,
        resource_name=name,
    )


def metric_from_file(data: bytes, key: str, field_name: str = "metrics_file") -> float:
    """The metric ``key`` of a JSON metrics file a trainer wrote (for jobs that are not tuned)."""
    try:
        value = json.loads(data)[key]
        number = float(value)
    except (ValueError, KeyError, TypeError):
        raise ValidationError(field_name, f"must be a JSON object with a numeric {key!r}") from None
    if not math.isfinite(number):
        raise ValidationError(field_name, f"{key!r} must be a finite number")
    return number


def eval_data_from_file(data: bytes) -> tuple[str | None, str | None]:
    """``(fingerprint, uri)`` of the evaluation data a trainer's metrics file records (or Nones).

    The trainer writes ``"eval_data": {"uri": ..., "md5": <hex of the bytes it scored>}``; the
    fingerprint, not the URI, says whether two metrics were measured on the same rows.
    """
    try:
        recorded = json.loads(data).get("eval_data")
    except (ValueError, AttributeError):
        return None, None
    if not isinstance(recorded, Mapping):
        return None, None
    md5, uri = recorded.get("md5"), recorded.get("uri")
    return (f"md5:{md5}" if isinstance(md5, str) and md5 else None, str(uri) if uri else None)


def measurement_from_file(data: bytes, key: str, field_name: str) -> Measurement:
    """What an evaluation-only job's metrics file says: which model it scored, how, on what data."""
    metric = metric_from_file(data, key, field_name)
    model_uri = json.loads(data).get("evaluated_model_uri")
    if not isinstance(model_uri, str) or not model_uri:
        raise ValidationError(field_name, "must name the model it scored (evaluated_model_uri)")
    return Measurement(model_uri, metric, key, eval_data_from_file(data)[0])


def champion_metric(manifest: Mapping[str, Any]) -> float | None:
    """The metric a current model's manifest records, or None when it records none."""
    value = (manifest.get("metric") or {}).get("value")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def source_standing(source: ExportSource, destination: GcsUri) -> Standing:
    """The export as the champion gate reads it, named by where it is exported to."""
    return Standing(
        destination.uri,
        source.metric,
        source.metric_tag,
        Goal.parse(source.goal),
        eval_data=source.eval_data,
        label=source.job_id,
        model_uri=destination.uri,
    )


def champion_standing(manifest: Mapping[str, Any], champion_uri: str) -> Standing:
    """The champion manifest as the gate reads it, named by the model it points at.

    A manifest the export wrote names its model (``model_uri``), so a re-run of the champion's
    own export is recognised as the champion; a goal that is neither MAXIMIZE nor MINIMIZE is a
    ValidationError on ``champion_manifest_uri``.
    """
    metric = manifest.get("metric") or {}
    model_uri = str(manifest["model_uri"]) if manifest.get("model_uri") else None
    return Standing(
        model_uri or champion_uri,
        champion_metric(manifest),
        str(metric["tag"]) if metric.get("tag") else None,
        Goal.parse(metric.get("goal"), "champion_manifest_uri"),
        eval_data=str(metric["eval_data"]) if metric.get("eval_data") else None,
        label=str(manifest["job_id"]) if manifest.get("job_id") else None,
        model_uri=model_uri,
    )


def relative_names(prefix: GcsUri, object_uris: Sequence[str]) -> list[str]:
    """Object names below ``prefix``, relative to it; all but the root ``manifest.json``.

    Only the root one is left out: the export writes its own manifest there, last, as the mark
    of a complete copy, so a copied one would claim completeness too early and then be replaced.
    A ``manifest.json`` deeper down is part of the model (a tokenizer's, a saved model's) and
    is copied like any other file.
    """
    base = prefix.uri.rstrip("/") + "/"
    names = sorted(uri[len(base) :] for uri in object_uris if uri.startswith(base))
    return [name for name in names if name and name != MANIFEST_NAME]


def build_manifest(
    source: ExportSource,
    destination: GcsUri,
    objects: Sequence[Mapping[str, Any]],
    packages: Sequence[Mapping[str, Any]],
    run: Mapping[str, Any],
    exported_at: str,
) -> dict[str, Any]:
    """The manifest written beside the copy, last, so that its presence means "complete"."""
    return {
        "manifest_version": MANIFEST_VERSION,
        "model_uri": destination.uri,
        "job_id": source.job_id,
        "backend": source.backend,
        "resource_name": source.resource_name,
        "trial_id": source.trial_id,
        "hyperparameters": source.hyperparameters,
        "metric": {
            "tag": source.metric_tag,
            "value": source.metric,
            "goal": source.goal,
            "eval_data": source.eval_data,
            "eval_uri": source.eval_uri,
        },
        "source_uri": source.prefix.uri,
        "objects": list(objects),
        "packages": list(packages),
        "airflow": dict(run),
        "exported_at": exported_at,
    }


def same_export(existing: Mapping[str, Any], manifest: Mapping[str, Any]) -> bool:
    """An earlier export of the same source with the same content: a re-run rewrites nothing."""
    keys = ("model_uri", "job_id", "trial_id", "source_uri", "objects")
    return all(existing.get(k) == manifest.get(k) for k in keys)


def package_uris(view: Mapping[str, Any]) -> list[str]:
    """The trainer packages a job ran (ml v1's ``packageUris``; every Vertex AI pool's), once each."""
    return backend_of(view).package_uris(view.get("spec") or {})


def describe_source(source: ExportSource) -> str:
    """One line for the task log: what is exported, from where, and why it is the one."""
    where = f"{source.backend} job {source.resource_name or source.job_id}"
    if source.trial_id is None:
        metric = f"; {source.metric_tag} = {source.metric}" if source.metric is not None else ""
        return f"Exporting the model of {where} from {source.prefix.uri}{metric}"
    return (
        f"Exporting trial {source.trial_id} of {where} from {source.prefix.uri}: the best "
        f"{source.metric_tag} = {source.metric} ({source.goal}), hyperparameters {source.hyperparameters}"
    )

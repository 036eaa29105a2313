"""Lineage of a model: the export task (job output in, exported copy out) and the register task.

The naming spec has no entry for Vertex AI: a registered model is namespace
``vertexai://{project}/{location}``, name ``models/{model_id}`` (its resource name below the
location), its version in the standard ``version`` facet, so every version of one model is one
dataset with versions. The scheme is the platform name DataHub gives Vertex AI (``vertexai``), as
``gs`` names Cloud Storage.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_aip.lineage.facets import (
    MODEL_FACET,
    MODEL_VERSION_FACET,
    PRODUCER,
    VERTEX_SCHEME,
    dataset,
    facet,
    float_or_none,
    gcs_dataset,
    operator_lineage,
    operator_lineage_type,
    str_or_none,
)
from airflow_aip.lineage.uris import is_below

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import Dataset

__all__ = ["export_lineage", "register_lineage"]

_MODEL_NAME = re.compile(
    r"projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/(?P<model>models/[^/@]+)"
)


def export_lineage(result: Any) -> OperatorLineage[Any, Any] | None:
    """ExportArtifactsOperator: the job's model in; the exported copy out, only when it was exported.

    ``result`` is the task's XCom with ``source_uri`` (the manifest's key: the folder the model
    was copied from) and ``job_output_dir``, which the operator keeps beside it. The job's output
    directory is an input too when the model lies in it: it is the dataset the training task
    wrote, so the graph joins the model to the job, its data and its code. A champion that was
    not beaten leaves the inputs alone.
    """
    try:
        operator_lineage_type()
    except ImportError:
        return None
    result = result if isinstance(result, Mapping) else {}
    output = None
    if result.get("exported"):
        model = facet(
            "AipModelDatasetFacet",
            jobId=str_or_none(result.get("job_id")),
            trialId=str_or_none(result.get("trial_id")),
            metric=float_or_none(result.get("metric")),
            metricTag=str_or_none(result.get("metric_tag")),
            manifestUri=str_or_none(result.get("manifest_uri")),
            promoted=result.get("promoted"),
        )
        output = gcs_dataset(result.get("destination"), {MODEL_FACET: model})
    source, job_dir = result.get("source_uri"), result.get("job_output_dir")
    inputs = [gcs_dataset(source)]
    if isinstance(source, str) and isinstance(job_dir, str) and is_below(source, job_dir.rstrip("/") + "/"):
        inputs.append(gcs_dataset(job_dir))
    return operator_lineage(inputs=inputs, outputs=[output])


def register_lineage(result: Mapping[str, Any]) -> Any:
    """RegisterModelOperator: the exported model (``artifact_uri``) in; the registry version out.

    The output is namespace ``vertexai://{project}/{location}``, name ``models/{model_id}``, with
    the version in the standard ``version`` facet and its names, aliases and metric in ours.
    None when the OpenLineage provider is not installed.
    """
    try:
        operator_lineage_type()
    except ImportError:
        return None
    result = result if isinstance(result, Mapping) else {}
    version_id = str_or_none(result.get("version_id"))
    aliases = result.get("aliases")
    facets: dict[str, Any] = {
        MODEL_VERSION_FACET: facet(
            "AipModelVersionDatasetFacet",
            model=str_or_none(result.get("model")),
            versionId=version_id,
            versionName=str_or_none(result.get("version_name")),
            aliases=[str(a) for a in aliases] if isinstance(aliases, list | tuple) else [],
            metric=float_or_none(result.get("metric")),
            metricTag=str_or_none(result.get("metric_tag")),
            promoted=result.get("promoted"),
            jobId=str_or_none(result.get("job_id")),
            manifestUri=str_or_none(result.get("manifest_uri")),
        )
    }
    if version_id:
        from openlineage.client.facet_v2 import dataset_version_dataset

        facets["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(
            datasetVersion=version_id, producer=PRODUCER
        )
    model = _model_dataset(result.get("model"), facets)
    return operator_lineage(inputs=[gcs_dataset(result.get("artifact_uri"))], outputs=[model])


def _model_dataset(model: Any, facets: Mapping[str, Any]) -> Dataset | None:
    """``projects/P/locations/L/models/M`` -> ``vertexai://P/L`` + ``models/M``."""
    if not isinstance(model, str) or not model:
        return None
    match = _MODEL_NAME.fullmatch(model.split("@", 1)[0])
    if match is None:  # not a resource name: keep what was given, in the Vertex AI namespace
        return dataset(VERTEX_SCHEME.rstrip(":/"), model, facets)
    return dataset(f"{VERTEX_SCHEME}{match['project']}/{match['location']}", match["model"], facets)

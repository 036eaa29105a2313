"""The OpenLineage objects the builders return: datasets, our facets, one OperatorLineage each.

OpenLineage and Airflow's OpenLineage provider are optional (the ``lineage`` extra) and DAG files
import the operators, so both are imported inside these functions, never at module level: a
builder first calls ``operator_lineage_type`` and reports nothing when it raises ImportError. Our
facet classes derive from OpenLineage's, so they live in ``facet_types``, which ``facet`` imports.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from airflow_aip.lineage.uris import gcs_dataset_id
from airflow_aip.lineage.urns import PRODUCER, SCHEMA_URL

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import Dataset

__all__ = [
    "FILE_NAMESPACE",
    "JOB_FACET",
    "MODEL_FACET",
    "MODEL_VERSION_FACET",
    "PACKAGE_FACET",
    "PRODUCER",
    "SCHEMA_URL",
    "VERTEX_SCHEME",
    "dataset",
    "facet",
    "float_or_none",
    "gcs_dataset",
    "operator_lineage",
    "operator_lineage_type",
    "package_facets",
    "str_or_none",
]

FILE_NAMESPACE = "file"
VERTEX_SCHEME = "vertexai://"
PACKAGE_FACET = "aipPackage"
JOB_FACET = "aipTrainingJob"
MODEL_FACET = "aipModel"
MODEL_VERSION_FACET = "aipModelVersion"


def operator_lineage_type() -> Any:
    """The provider's OperatorLineage; ImportError when the provider is not installed."""
    from airflow.providers.openlineage.extractors import OperatorLineage

    return OperatorLineage


def facet(kind: str, /, **fields: Any) -> Any:
    """One of our facets (``kind`` is its class name, in ``facet_types``), stamped with our producer."""
    from airflow_aip.lineage.facet_types import FACET_TYPES

    return FACET_TYPES[kind](**fields, producer=PRODUCER)


def dataset(namespace: str, name: str, facets: Mapping[str, Any] | None = None) -> Dataset:
    from openlineage.client.event_v2 import Dataset

    return Dataset(namespace=namespace, name=name, facets=dict(facets or {}))


def gcs_dataset(uri: Any, facets: Mapping[str, Any] | None = None) -> Dataset | None:
    """The dataset a gs:// URI names (see ``gcs_dataset_id``); None for anything else."""
    ids = gcs_dataset_id(uri)
    return dataset(*ids, facets) if ids else None


def package_facets(sha256: Any, built: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The standard ``version`` facet (the sha256: the content is the version) and ours."""
    if not isinstance(sha256, str) or not sha256:
        return {}
    from openlineage.client.facet_v2 import dataset_version_dataset

    built = built or {}
    size = built.get("size")
    return {
        "version": dataset_version_dataset.DatasetVersionDatasetFacet(
            datasetVersion=sha256, producer=PRODUCER
        ),
        PACKAGE_FACET: facet(
            "AipPackageDatasetFacet",
            sha256=sha256,
            packageName=str_or_none(built.get("name")),
            packageVersion=str_or_none(built.get("version")),
            size=size if isinstance(size, int) and not isinstance(size, bool) else None,
        ),
    }


def str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def float_or_none(value: Any) -> float | None:
    from airflow_aip.jobs.trials import finite_number

    return finite_number(value)


def operator_lineage(
    inputs: Iterable[Dataset | None] = (),
    outputs: Iterable[Dataset | None] = (),
    run_facets: Mapping[str, Any] | None = None,
) -> OperatorLineage[Any, Any]:
    """One OperatorLineage, each dataset once (by namespace and name), in order."""
    lineage: OperatorLineage[Any, Any] = operator_lineage_type()(
        inputs=_unique(inputs), outputs=_unique(outputs), run_facets=dict(run_facets or {})
    )
    return lineage


def _unique(datasets: Iterable[Dataset | None]) -> list[Dataset]:
    seen: dict[tuple[str, str], Dataset] = {}
    for item in datasets:
        if item is not None:
            seen.setdefault((item.namespace, item.name), item)
    return list(seen.values())

"""Lineage of the trainer's code: the build task (source in, sdist out) and the stage task.

A built sdist is a local file: namespace ``file`` (the naming spec's local file system), name its
absolute path as the build task reported it. The stage task names the same dataset even when it
ran on another worker and rebuilt the file, and the sha256 facet says the bytes are the same.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_aip.lineage.facets import (
    FILE_NAMESPACE,
    dataset,
    gcs_dataset,
    operator_lineage,
    operator_lineage_type,
    package_facets,
)
from airflow_aip.lineage.uris import staged_sha256

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

__all__ = ["build_lineage", "stage_lineage"]


def build_lineage(built: Any) -> OperatorLineage[Any, Any] | None:
    """BuildTrainerPackageOperator: source directory in; the sdist (and its staged URI) out."""
    try:
        operator_lineage_type()
    except ImportError:
        return None
    if not isinstance(built, Mapping):
        return operator_lineage()
    facets = package_facets(built.get("sha256"), built)
    source, path = built.get("source"), built.get("path")
    return operator_lineage(
        inputs=[dataset(FILE_NAMESPACE, str(source)) if source else None],
        outputs=[
            dataset(FILE_NAMESPACE, str(path), facets) if path else None,
            gcs_dataset(built.get("uri"), facets),
        ],
    )


def stage_lineage(packages: Any, staged: Any) -> OperatorLineage[Any, Any] | None:
    """StagePackagesOperator: each package in (a built sdist, a path, a gs:// URI), its staged URI out.

    ``packages`` is the operator's (rendered) argument, ``staged`` its result: the same order.
    The sha256 comes from the build's result, else from the staged URI, which is named by it.
    """
    try:
        operator_lineage_type()
    except ImportError:
        return None
    items = [packages] if isinstance(packages, str | os.PathLike | Mapping) else list(packages or [])
    uris = list(staged) if isinstance(staged, list | tuple) else []
    uris += [None] * (len(items) - len(uris))
    inputs, outputs = [], []
    for item, uri in zip(items, uris, strict=False):
        built = item if isinstance(item, Mapping) else None
        given = (built.get("uri") or built.get("path")) if built else item
        sha256 = (built or {}).get("sha256") or staged_sha256(uri)
        facets = package_facets(sha256, built)
        if isinstance(given, str) and given.startswith("gs://"):
            inputs.append(gcs_dataset(given, facets))  # staged already (or given as a URI): used as is
            continue
        if isinstance(given, str | os.PathLike) and str(given):
            path = str(given) if built else os.path.abspath(given)
            inputs.append(dataset(FILE_NAMESPACE, path, facets))
        outputs.append(gcs_dataset(uri, facets))
    return operator_lineage(inputs, outputs)

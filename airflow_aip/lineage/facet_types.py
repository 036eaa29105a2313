"""Our OpenLineage facet classes: a trainer package, a training job, an exported model, a version.

They derive from OpenLineage's facets, so this module imports OpenLineage at its top: unlike every
other module of airflow_aip it is never imported at import time, only by ``facets.facet`` when a
task reports lineage (tests/unit/test_provider.py checks both). Defined at module level, they
pickle like any class. Field names are camelCase, as OpenLineage's own facets' are.
"""

from __future__ import annotations

from typing import Any

import attrs
from openlineage.client.facet_v2 import DatasetFacet, RunFacet

from airflow_aip.lineage.urns import SCHEMA_URL

__all__ = [
    "FACET_TYPES",
    "AipModelDatasetFacet",
    "AipModelVersionDatasetFacet",
    "AipPackageDatasetFacet",
    "AipTrainingJobRunFacet",
]


@attrs.define
class AipPackageDatasetFacet(DatasetFacet):
    """A trainer package's content: its sha256 ties a model to the exact code that made it."""

    sha256: str | None = None
    packageName: str | None = None
    packageVersion: str | None = None
    size: int | None = None

    @staticmethod
    def _get_schema() -> str:
        return f"{SCHEMA_URL}#/$defs/AipPackageDatasetFacet"


@attrs.define
class AipTrainingJobRunFacet(RunFacet):
    """The training job this task ran: which one, how it ended, and its best trial's metric."""

    jobId: str | None = None
    name: str | None = None
    backend: str | None = None
    state: str | None = None
    projectId: str | None = None
    region: str | None = None
    consoleUrl: str | None = None
    hyperparameterTuning: bool = False
    metricTag: str | None = None
    goal: str | None = None
    bestTrialId: str | None = None
    bestMetric: float | None = None

    @staticmethod
    def _get_schema() -> str:
        return f"{SCHEMA_URL}#/$defs/AipTrainingJobRunFacet"


@attrs.define
class AipModelDatasetFacet(DatasetFacet):
    """An exported model: the job (and trial) it came from, and its metric."""

    jobId: str | None = None
    trialId: str | None = None
    metric: float | None = None
    metricTag: str | None = None
    manifestUri: str | None = None
    promoted: bool | None = None

    @staticmethod
    def _get_schema() -> str:
        return f"{SCHEMA_URL}#/$defs/AipModelDatasetFacet"


@attrs.define
class AipModelVersionDatasetFacet(DatasetFacet):
    """A Model Registry version: its names, aliases, metric and whether it became champion."""

    model: str | None = None
    versionId: str | None = None
    versionName: str | None = None
    aliases: list[str] = attrs.Factory(list)
    metric: float | None = None
    metricTag: str | None = None
    promoted: bool | None = None
    jobId: str | None = None
    manifestUri: str | None = None

    @staticmethod
    def _get_schema() -> str:
        return f"{SCHEMA_URL}#/$defs/AipModelVersionDatasetFacet"


# By class name: what ``facets.facet`` is given (its callers name the kind, importing nothing).
FACET_TYPES: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (
        AipPackageDatasetFacet,
        AipTrainingJobRunFacet,
        AipModelDatasetFacet,
        AipModelVersionDatasetFacet,
    )
}

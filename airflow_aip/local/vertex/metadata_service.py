"""Vertex AI Metadata and TensorBoard handlers of one service, made once and shared by both faces."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from airflow_aip.local.vertex.metadata import MetadataService
from airflow_aip.local.vertex.metadata_links import MetadataLinks
from airflow_aip.local.vertex.tensorboards import Tensorboards


@dataclass(frozen=True)
class MetadataHandlers:
    """Metadata stores and their nodes, the links between nodes, and tensorboards: one set of records."""

    metadata: MetadataService
    links: MetadataLinks
    tensorboards: Tensorboards

    @classmethod
    def at(cls, root: Path) -> MetadataHandlers:
        metadata = MetadataService(root)
        return cls(metadata, MetadataLinks(metadata), Tensorboards(metadata))

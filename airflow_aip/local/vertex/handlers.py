"""The aiplatform v1 handlers of one service, made once and shared by its REST and gRPC faces.

Both faces must call the same objects: a training pipeline's lock, and the index of trials'
CustomJob IDs, live on them; so do the metadata records' lock and memory.
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_aip.local.service import TrainingService
from airflow_aip.local.vertex.metadata_service import MetadataHandlers
from airflow_aip.local.vertex.models import ModelRegistry, registry_of
from airflow_aip.local.vertex.pipelines import TrainingPipelines
from airflow_aip.local.vertex.service import VertexJobs


@dataclass(frozen=True)
class VertexHandlers:
    """Custom and tuning jobs, the Model Registry, custom training pipelines, and Vertex AI Metadata
    (with the TensorBoard calls Experiments makes)."""

    jobs: VertexJobs
    registry: ModelRegistry
    pipelines: TrainingPipelines
    metadata: MetadataHandlers

    @classmethod
    def of(cls, service: TrainingService) -> VertexHandlers:
        jobs = VertexJobs(service)
        registry = registry_of(service)
        pipelines = TrainingPipelines(jobs, registry, service.config.data_dir / "pipelines")
        metadata = MetadataHandlers.at(service.config.data_dir / "metadata")
        return cls(jobs, registry, pipelines, metadata)

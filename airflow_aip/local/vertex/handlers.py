"""The aiplatform v1 handlers of one service, made once and shared by its REST and gRPC faces.

Both faces must call the same objects: a training pipeline's lock, and the index of trials'
CustomJob IDs, live on them.
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_aip.local.service import TrainingService
from airflow_aip.local.vertex.models import ModelRegistry, registry_of
from airflow_aip.local.vertex.pipelines import TrainingPipelines
from airflow_aip.local.vertex.service import VertexJobs


@dataclass(frozen=True)
class VertexHandlers:
    """Custom and tuning jobs, the Model Registry, and custom training pipelines."""

    jobs: VertexJobs
    registry: ModelRegistry
    pipelines: TrainingPipelines

    @classmethod
    def of(cls, service: TrainingService) -> VertexHandlers:
        jobs = VertexJobs(service)
        registry = registry_of(service)
        pipelines = TrainingPipelines(jobs, registry, service.config.data_dir / "pipelines")
        return cls(jobs, registry, pipelines)

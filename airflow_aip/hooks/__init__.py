"""Hooks: the only Google I/O. Client libraries are imported inside their methods."""

from __future__ import annotations

from airflow_aip.hooks.logs import JobLogsHook
from airflow_aip.hooks.registry import ModelRegistryHook
from airflow_aip.hooks.storage import StorageHook
from airflow_aip.hooks.training import TrainingJobHook
from airflow_aip.hooks.vertex import VertexJobHook

__all__ = ["JobLogsHook", "ModelRegistryHook", "StorageHook", "TrainingJobHook", "VertexJobHook"]

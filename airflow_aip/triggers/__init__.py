"""Triggers run in the triggerer; their classpaths live under this installed package."""

from __future__ import annotations

from airflow_aip.triggers.training import TrainingJobTrigger

__all__ = ["TrainingJobTrigger"]

"""Sensors: wait on a training job (poke, reschedule or deferrable)."""

from __future__ import annotations

from airflow_aip.sensors.training import TrainingJobSensor

__all__ = ["TrainingJobSensor"]

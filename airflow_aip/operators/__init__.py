"""Operators: build, stage, train (and cancel), export, register (and roll back). Cheap to import."""

from __future__ import annotations

from airflow_aip.operators.cancel import CancelTrainingJobOperator
from airflow_aip.operators.export import ExportArtifactsOperator
from airflow_aip.operators.image import BuildTrainerImageOperator
from airflow_aip.operators.package import BuildTrainerPackageOperator
from airflow_aip.operators.registry import RegisterModelOperator, RollbackChampionOperator
from airflow_aip.operators.staging import StagePackagesOperator
from airflow_aip.operators.training import Placement, SubmitTrainingJobOperator, TrainingInput

__all__ = [
    "BuildTrainerImageOperator",
    "BuildTrainerPackageOperator",
    "CancelTrainingJobOperator",
    "ExportArtifactsOperator",
    "Placement",
    "RegisterModelOperator",
    "RollbackChampionOperator",
    "StagePackagesOperator",
    "SubmitTrainingJobOperator",
    "TrainingInput",
]

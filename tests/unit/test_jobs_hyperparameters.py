"""Hyperparameter spec rules, each named by its field path."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs import validate_training_input

HP = "trainingInput.hyperparameters"


def with_hp(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "packageUris": ["gs://bucket/trainer.tar.gz"],
        "pythonModule": "trainer.task",
        "region": "us-central1",
        "hyperparameters": spec,
    }


def double(name: str = "lr", **extra: Any) -> dict[str, Any]:
    return {"parameterName": name, "type": "DOUBLE", "minValue": 0.001, "maxValue": 0.1, **extra}


def test_full_spec_is_valid() -> None:
    spec = {
        "goal": "MINIMIZE",
        "hyperparameterMetricTag": "rmse",
        "maxTrials": 10,
        "maxParallelTrials": 2,
        "maxFailedTrials": 3,
        "enableTrialEarlyStopping": True,
        "algorithm": "RANDOM_SEARCH",
        "params": [
            double(scaleType="UNIT_LOG_SCALE"),
            {"parameterName": "layers", "type": "INTEGER", "minValue": 1, "maxValue": 4},
            {"parameterName": "batch", "type": "DISCRETE", "discreteValues": [16, 32, 64]},
            {"parameterName": "opt", "type": "CATEGORICAL", "categoricalValues": ["adam", "sgd"]},
        ],
    }
    assert validate_training_input(with_hp(spec))["hyperparameters"]["maxTrials"] == 10


@pytest.mark.parametrize(
    ("spec", "field", "rule"),
    [
        ({"params": []}, f"{HP}.params", "at least one"),
        ({"goal": "BEST", "params": [double()]}, f"{HP}.goal", "must be one of"),
        ({"params": [double(minValue=0.5, maxValue=0.5)]}, f"{HP}.params[0].minValue", "less than maxValue"),
        ({"params": [double(minValue=1, maxValue=0)]}, f"{HP}.params[0].minValue", "less than maxValue"),
        (
            {"params": [{"parameterName": "x", "type": "DOUBLE", "maxValue": 1}]},
            f"{HP}.params[0].minValue",
            "required",
        ),
        (
            {"params": [double(minValue=0, scaleType="UNIT_LOG_SCALE")]},
            f"{HP}.params[0].minValue",
            "positive for UNIT_LOG_SCALE",
        ),
        (
            {"params": [double(minValue=-1, scaleType="UNIT_REVERSE_LOG_SCALE")]},
            f"{HP}.params[0].minValue",
            "positive",
        ),
        (
            {"params": [{"parameterName": "n", "type": "INTEGER", "minValue": 1.5, "maxValue": 4}]},
            f"{HP}.params[0].minValue",
            "whole number",
        ),
        (
            {"params": [{"parameterName": "b", "type": "DISCRETE", "discreteValues": [1, 3, 2]}]},
            f"{HP}.params[0].discreteValues[2]",
            "strictly increasing",
        ),
        (
            {"params": [{"parameterName": "b", "type": "DISCRETE", "discreteValues": [1, 1]}]},
            f"{HP}.params[0].discreteValues[1]",
            "strictly increasing",
        ),
        (
            {"params": [{"parameterName": "b", "type": "DISCRETE", "discreteValues": []}]},
            f"{HP}.params[0].discreteValues",
            "required",
        ),
        (
            {
                "params": [
                    {
                        "parameterName": "b",
                        "type": "DISCRETE",
                        "discreteValues": [0, 1],
                        "scaleType": "UNIT_LOG_SCALE",
                    }
                ]
            },
            f"{HP}.params[0].discreteValues[0]",
            "positive",
        ),
        (
            {"params": [{"parameterName": "c", "type": "CATEGORICAL", "categoricalValues": ["a", "a"]}]},
            f"{HP}.params[0].categoricalValues[1]",
            "duplicate",
        ),
        (
            {
                "params": [
                    {"parameterName": "c", "type": "CATEGORICAL", "categoricalValues": ["a"], "minValue": 1}
                ]
            },
            f"{HP}.params[0].minValue",
            "unset",
        ),
        (
            {
                "params": [
                    {
                        "parameterName": "c",
                        "type": "CATEGORICAL",
                        "categoricalValues": ["a"],
                        "scaleType": "UNIT_LINEAR_SCALE",
                    }
                ]
            },
            f"{HP}.params[0].scaleType",
            "unset",
        ),
        ({"params": [{"parameterName": "x"}]}, f"{HP}.params[0].type", "required"),
        ({"params": [{"type": "DOUBLE"}]}, f"{HP}.params[0].parameterName", "required"),
        ({"params": [double(), double()]}, f"{HP}.params[1].parameterName", "duplicate"),
        (
            {"params": [double()], "maxTrials": 2, "maxParallelTrials": 3},
            f"{HP}.maxParallelTrials",
            "maxTrials",
        ),
        ({"params": [double()], "maxParallelTrials": 2}, f"{HP}.maxParallelTrials", "maxTrials (2 > 1)"),
        ({"params": [double()], "maxTrials": 0}, f"{HP}.maxTrials", "at least 1"),
        ({"params": [double()], "maxFailedTrials": -1}, f"{HP}.maxFailedTrials", "at least 0"),
        ({"params": [double()], "algorithm": "GRID_SEARCH"}, f"{HP}.params[0].type", "GRID_SEARCH"),
        ({"params": [double()], "hyperparameterMetricTag": ""}, f"{HP}.hyperparameterMetricTag", "empty"),
        ({"params": [double(minValue="0.1")]}, f"{HP}.params[0].minValue", "must be a number"),
    ],
)
def test_rejects(spec: dict[str, Any], field: str, rule: str) -> None:
    with pytest.raises(ValidationError) as err:
        validate_training_input(with_hp(spec))
    assert err.value.field == field
    assert rule in err.value.rule

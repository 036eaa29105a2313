"""The Vertex AI rules of the pure model: enum numbers, image names, locations, studySpec translation."""

from __future__ import annotations

import enum
import inspect
from typing import Any

import pytest

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.locations import check_location, vertex_locations
from airflow_aip.jobs.schema import schema
from airflow_aip.jobs.vertex.body import check_executor_image, validate_tuning_job
from airflow_aip.jobs.vertex.enums import ENUM_NUMBERS
from airflow_aip.jobs.vertex.study import search_spec, trial_parameter_value
from airflow_aip.local.executor.tuning import HyperparameterSearch
from tests.fixtures.tools import need_module


def _sdk_enums() -> dict[frozenset[str], dict[str, int]]:
    proto = need_module("proto")
    types = need_module("google.cloud.aiplatform_v1.types")
    found: dict[frozenset[str], dict[str, int]] = {}
    seen: set[type] = set()

    def walk(owner: Any) -> None:
        for member in vars(owner).values():
            if not inspect.isclass(member) or member in seen:
                continue
            seen.add(member)
            if issubclass(member, enum.IntEnum):
                found.setdefault(frozenset(m.name for m in member), {m.name: m.value for m in member})
            elif issubclass(member, proto.Message):
                walk(member)

    walk(types)
    return found


def test_enum_numbers_match_the_sdk_protos_and_the_discovery_document() -> None:
    sdk = _sdk_enums()
    for key, numbers in ENUM_NUMBERS.items():
        schema_name, prop = key.split(".")
        declared = schema(schema_name, "aiplatform.v1.json")["properties"][prop]
        names = declared.get("enum") or declared["items"]["enum"]
        assert set(numbers) <= set(names), key
        match = next(v for k, v in sdk.items() if set(numbers) <= k)
        assert {name: match[name] for name in numbers} == numbers, key


@pytest.mark.parametrize(
    "uri",
    [
        "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-14.py310:latest",
        "europe-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-4.py310:latest",
        "asia-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-0:latest",
        "us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest",
        "gcr.io/cloud-aiplatform/training/xgboost-cpu.1-1:latest",
    ],
)
def test_prebuilt_training_images_are_accepted(uri: str) -> None:
    assert check_executor_image(uri, "image")["major"]


@pytest.mark.parametrize(
    "uri",
    [
        "python:3.11",
        "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-14.py310",  # no :latest
        "us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-14:latest",
        "eu-docker.pkg.dev/vertex-ai/training/tf-cpu.2-14:latest",
        "gcr.io/my-project/trainer:latest",
    ],
)
def test_other_images_are_refused(uri: str) -> None:
    with pytest.raises(ValidationError, match="pre-built training container"):
        check_executor_image(uri, "image")


def test_locations_come_from_the_regional_endpoints() -> None:
    assert {"us-central1", "europe-west4", "asia-northeast1"} <= vertex_locations()
    assert check_location("us-central1") == "us-central1"
    with pytest.raises(ValidationError, match="mars-central1"):
        check_location("mars-central1", "trainingInput.region")


def _tuning_job(algorithm: str = "RANDOM_SEARCH", **study: Any) -> dict[str, Any]:
    pool = {
        "machineSpec": {"machineType": "n1-standard-4"},
        "pythonPackageSpec": {
            "executorImageUri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-14.py310:latest",
            "packageUris": ["gs://bucket/t.tar.gz"],
            "pythonModule": "t.task",
        },
    }
    parameters = [
        {
            "parameterId": "optimizer",
            "categoricalValueSpec": {"values": ["adam", "sgd"]},
            "conditionalParameterSpecs": [
                {
                    "parentCategoricalValues": {"values": ["sgd"]},
                    "parameterSpec": {"parameterId": "momentum", "discreteValueSpec": {"values": [0.5, 0.9]}},
                }
            ],
        },
        {"parameterId": "layers", "integerValueSpec": {"minValue": "1", "maxValue": "3"}},
    ]
    spec = {
        "metrics": [{"metricId": "loss", "goal": "MINIMIZE"}],
        "parameters": parameters,
        "algorithm": algorithm,
    }
    return validate_tuning_job(
        {
            "displayName": "t",
            "maxTrialCount": 6,
            "parallelTrialCount": 2,
            "studySpec": spec | study,
            "trialJobSpec": {"workerPoolSpecs": [pool]},
        }
    )


def test_search_spec_flattens_conditional_parameters() -> None:
    spec = search_spec(
        _tuning_job(measurementSelectionType="BEST_MEASUREMENT", medianAutomatedStoppingSpec={})
    )
    assert spec["goal"] == "MINIMIZE"
    assert spec["hyperparameterMetricTag"] == "loss"
    assert spec["measurementSelection"] == "BEST"
    assert spec["enableTrialEarlyStopping"] is True
    assert [p["parameterName"] for p in spec["params"]] == ["optimizer", "momentum", "layers"]
    assert spec["params"][1] == {
        "parameterName": "momentum",
        "type": "DISCRETE",
        "discreteValues": [0.5, 0.9],
        "parent": "optimizer",
        "parentValues": ["sgd"],
    }
    assert spec["params"][2]["minValue"] == 1


def test_the_tuner_tries_a_conditional_parameter_only_under_its_parent_value() -> None:
    search = HyperparameterSearch(search_spec(_tuning_job("GRID_SEARCH")), "p/j")
    asked = [search.ask(str(i)) for i in range(1, 7)]
    for hyperparameters in asked:
        assert ("momentum" in hyperparameters) == (hyperparameters["optimizer"] == "sgd")
    assert {h["optimizer"] for h in asked} == {"adam", "sgd"}


def test_trial_parameter_values_are_typed() -> None:
    assert trial_parameter_value("3", "INTEGER") == 3
    assert trial_parameter_value("0.5", "DISCRETE") == 0.5
    assert trial_parameter_value("adam", "CATEGORICAL") == "adam"


def test_a_grid_search_over_a_double_is_refused() -> None:
    job = _tuning_job()
    job["studySpec"]["parameters"].append(
        {"parameterId": "lr", "doubleValueSpec": {"minValue": 0.1, "maxValue": 1}}
    )
    job["studySpec"]["algorithm"] = "GRID_SEARCH"
    for name in ("name", "createTime"):
        job.pop(name, None)
    with pytest.raises(ValidationError, match="GRID_SEARCH"):
        validate_tuning_job(job)

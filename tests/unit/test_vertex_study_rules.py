"""The tuning spec's last rules, each as study.proto states it or, where Google's answer is
unknown ([U]), on the side that refuses nothing Google takes.

- Same-named conditional parameters under disjoint parent values: allowed ("If two items in
  conditional_parameter_specs have the same name, they must have disjoint
  parent_value_condition"); overlapping values are refused.
- Parent values outside the parent's space: refused ("All values must exist in" / "must lie in").
- DISCRETE values: increasing and at least 1e-10 apart.
- [U] ``min == max`` and ``parallelTrialCount > maxTrialCount``: accepted.
- [U] Vizier-only ``defaultValue`` and ``observationNoise``: accepted (and ignored).
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.vertex.body import validate_tuning_job
from airflow_aip.jobs.vertex.study import search_spec
from airflow_aip.local.executor.tuning import HyperparameterSearch

POOL = {
    "machineSpec": {"machineType": "n1-standard-4"},
    "pythonPackageSpec": {
        "executorImageUri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-14.py310:latest",
        "packageUris": ["gs://bucket/t.tar.gz"],
        "pythonModule": "t.task",
    },
}


def job(parameters: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    study = {"metrics": [{"metricId": "loss", "goal": "MINIMIZE"}], "parameters": parameters}
    return {
        "displayName": "t",
        "maxTrialCount": 4,
        "parallelTrialCount": 2,
        "studySpec": study | fields.pop("study", {}),
        "trialJobSpec": {"workerPoolSpecs": [POOL]},
        **fields,
    }


def child(condition: str, values: list[Any], spec: dict[str, Any]) -> dict[str, Any]:
    return {condition: {"values": values}, "parameterSpec": spec}


def lr(low: float, high: float, **more: Any) -> dict[str, Any]:
    return {"parameterId": "lr", "doubleValueSpec": {"minValue": low, "maxValue": high}, **more}


def optimizer(*children: dict[str, Any]) -> dict[str, Any]:
    return {
        "parameterId": "optimizer",
        "categoricalValueSpec": {"values": ["adam", "sgd", "rmsprop"]},
        "conditionalParameterSpecs": list(children),
    }


def refused(body: dict[str, Any]) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        validate_tuning_job(body)
    return caught.value


C = "parentCategoricalValues"


def test_same_named_children_under_disjoint_parent_values_are_accepted() -> None:
    body = job([optimizer(child(C, ["adam"], lr(1e-4, 1e-2)), child(C, ["sgd", "rmsprop"], lr(0.1, 1)))])
    params = search_spec(validate_tuning_job(body))["params"]
    assert [(p["parameterName"], p.get("parentValues")) for p in params] == [
        ("optimizer", None),
        ("lr", ["adam"]),
        ("lr", ["sgd", "rmsprop"]),
    ]


def test_same_named_children_with_a_shared_parent_value_are_refused() -> None:
    error = refused(job([optimizer(child(C, ["adam", "sgd"], lr(1e-4, 1)), child(C, ["sgd"], lr(0.1, 1)))]))
    assert error.field == "studySpec.parameters[0].conditionalParameterSpecs[1].parameterSpec.parameterId"
    assert "disjoint parent values" in error.rule


@pytest.mark.parametrize(
    "parameters",
    [
        [optimizer(child(C, ["adam"], lr(1e-4, 1))), lr(0.1, 1)],  # a child and a top-level parameter
        [optimizer(child(C, ["adam"], {**lr(1e-4, 1), "parameterId": "optimizer"}))],  # its own parent
        [
            optimizer(
                child(C, ["adam"], {**lr(1e-4, 1), "conditionalParameterSpecs": []}),
                child(C, ["sgd"], {"parameterId": "x", "doubleValueSpec": {"minValue": 0, "maxValue": 1}}),
                child(
                    C, ["rmsprop"], {"parameterId": "x", "doubleValueSpec": {"minValue": 0, "maxValue": 1}}
                ),
            ),
            {"parameterId": "x", "doubleValueSpec": {"minValue": 0, "maxValue": 1}},
        ],
    ],
)
def test_other_repeated_ids_are_still_duplicates(parameters: list[dict[str, Any]]) -> None:
    assert "duplicate" in refused(job(parameters)).rule


@pytest.mark.parametrize(
    ("parent", "condition", "values", "bad"),
    [
        ({"categoricalValueSpec": {"values": ["a", "b"]}}, C, ["a", "c"], "'c'"),
        ({"integerValueSpec": {"minValue": 1, "maxValue": 4}}, "parentIntValues", [4, 5], "5"),
        ({"discreteValueSpec": {"values": [0.5, 1.0]}}, "parentDiscreteValues", [0.75], "0.75"),
    ],
)
def test_parent_values_outside_the_parent_s_space_are_refused(
    parent: dict[str, Any], condition: str, values: list[Any], bad: str
) -> None:
    parameters = [
        {"parameterId": "p", **parent, "conditionalParameterSpecs": [child(condition, values, lr(0, 1))]}
    ]
    error = refused(job(parameters))
    assert error.field.startswith(f"studySpec.parameters[0].conditionalParameterSpecs[0].{condition}.values[")
    assert error.rule.startswith(f"{bad} is not in the feasible space of the parent parameter 'p'")


def test_a_discrete_parent_value_matches_within_1e_10() -> None:
    parent = {"parameterId": "p", "discreteValueSpec": {"values": [0.5, 1.0]}}
    nearly = child("parentDiscreteValues", [0.5 + 1e-11], lr(0, 1))
    validate_tuning_job(job([parent | {"conditionalParameterSpecs": [nearly]}]))


@pytest.mark.parametrize("values", [[1.0, 1.0 + 1e-12], [2.0, 1.0]])
def test_discrete_values_closer_than_1e_10_or_out_of_order_are_refused(values: list[float]) -> None:
    error = refused(job([{"parameterId": "d", "discreteValueSpec": {"values": values}}]))
    assert error.field == "studySpec.parameters[0].discreteValueSpec.values[1]"
    assert "at least 1e-10 apart" in error.rule


@pytest.mark.parametrize(
    "body",
    [
        job([lr(0.5, 0.5)]),  # [U] min == max
        job([{"parameterId": "n", "integerValueSpec": {"minValue": 3, "maxValue": 3}}]),
        job([lr(0, 1)], maxTrialCount=2, parallelTrialCount=5),  # [U] more in parallel than in all
        job([lr(0, 1, doubleValueSpec={"minValue": 0, "maxValue": 1, "defaultValue": 0.5})]),  # [U] Vizier
        job([lr(0, 1)], study={"observationNoise": "HIGH"}),
    ],
)
def test_what_google_may_take_is_accepted(body: dict[str, Any]) -> None:
    validate_tuning_job(body)


TUNING = "/v1/projects/proj/locations/us-central1/hyperparameterTuningJobs"


def test_the_local_service_creates_same_named_children_it_can_search(client: TestClient) -> None:
    body = job([optimizer(child(C, ["adam"], lr(1e-4, 1e-2)), child(C, ["sgd"], lr(0.1, 1)))])
    response = client.post(TUNING, json=body)
    assert response.status_code == 200, response.text
    client.post(f"/v1/{response.json()['name']}:cancel", json={})


@pytest.mark.parametrize(
    ("second", "algorithm"),
    [
        ({"parameterId": "lr", "categoricalValueSpec": {"values": ["a", "b"]}}, "RANDOM_SEARCH"),
        (lr(0.1, 1, scaleType="UNIT_LOG_SCALE"), "ALGORITHM_UNSPECIFIED"),
        ({"parameterId": "lr", "integerValueSpec": {"minValue": 7, "maxValue": 9}}, "GRID_SEARCH"),
    ],
)
def test_same_named_children_of_other_types_and_ranges_are_searched_each_in_its_own_space(
    client: TestClient, second: dict[str, Any], algorithm: str
) -> None:
    """study.proto's same-named children under disjoint parent values, each with its own type, scale
    or values: the local tuner searches each in its own space and passes it under the shared ID."""
    first = {"parameterId": "lr", "integerValueSpec": {"minValue": 1, "maxValue": 2}}
    if algorithm != "GRID_SEARCH":
        first = lr(1e-4, 1e-2)
    body = job(
        [optimizer(child(C, ["adam"], first), child(C, ["sgd"], second))],
        study={"algorithm": algorithm},
        maxTrialCount=12,
    )
    validate_tuning_job(body)
    response = client.post(TUNING, json=body)
    assert response.status_code == 200, response.text
    client.post(f"/v1/{response.json()['name']}:cancel", json={})
    search = HyperparameterSearch(search_spec(body), "p/same-named")
    seen: dict[str, set[str]] = {"adam": set(), "sgd": set()}
    for trial in range(12):
        chosen = search.ask(str(trial))
        if chosen["optimizer"] in seen:
            seen[chosen["optimizer"]].add(chosen["lr"])
        else:
            assert set(chosen) == {"optimizer"}  # rmsprop has no lr
        search.tell(str(trial), float(trial))
    assert seen["adam"], "no trial chose adam"
    assert seen["sgd"], "no trial chose sgd"
    adam = {float(v) for v in seen["adam"]}
    if algorithm == "GRID_SEARCH":
        assert adam <= {1.0, 2.0}
        assert {float(v) for v in seen["sgd"]} <= {7.0, 8.0, 9.0}
    elif algorithm == "RANDOM_SEARCH":
        assert all(1e-4 <= v <= 1e-2 for v in adam)
        assert seen["sgd"] <= {"a", "b"}
    else:
        assert all(1e-4 <= v <= 1e-2 for v in adam)
        assert all(0.1 <= float(v) <= 1 for v in seen["sgd"])

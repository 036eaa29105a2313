"""AI Platform trainingInput -> Vertex AI bodies: the seeds' golden translations, then one row per rule."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.schema import TRAINING_INPUT_SCHEMA, schema
from airflow_aip.jobs.training_input import build_training_input
from airflow_aip.jobs.vertex.body import validate_custom_job, validate_tuning_job
from airflow_aip.jobs.vertex.translate import TUNING_JOBS, to_vertex
from tests.fixtures.tools import need_module

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "fixtures" / "golden"
CASES = sorted(p.name.removesuffix(".input.yaml") for p in GOLDEN.glob("*.input.yaml"))


# --- golden translations ------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_golden_translation(case: str) -> None:
    given = yaml.safe_load((GOLDEN / f"{case}.input.yaml").read_text(encoding="utf-8"))
    expected = json.loads((GOLDEN / f"{case}.expected.json").read_text(encoding="utf-8"))
    if "error" in expected:
        with pytest.raises(ValidationError) as caught:
            to_vertex(build_training_input(given["config"], **given["flags"]), **given["call"])
        assert caught.value.field == expected["error"]["field"]
        assert expected["error"]["rule_contains"] in caught.value.rule
        return
    request = to_vertex(build_training_input(given["config"], **given["flags"]), **given["call"])
    assert request.kind == expected["kind"]
    assert request.body == expected["body"]
    validate = validate_tuning_job if request.kind == TUNING_JOBS else validate_custom_job
    assert validate(json.loads(json.dumps(request.body))) == request.body  # canonical: a fixed point


def test_golden_cases_cover_the_seed_examples_and_the_example_dag() -> None:
    assert {
        "seed002_example1_basic",
        "seed002_example2_config_yaml",
        "seed002_python_dict",
        "seed003_custom_container",
        "seed003_distributed_containers",
        "dag_aip_training_pipeline",
    } <= set(CASES)
    assert all((GOLDEN / f"{case}.expected.json").is_file() for case in CASES)


def test_the_dag_golden_input_is_the_example_dags_spec() -> None:
    dags = ROOT / "dags"
    sys.path.insert(0, str(dags))
    try:
        examples = need_module("aip_examples")
    finally:
        sys.path.remove(str(dags))
    given = yaml.safe_load((GOLDEN / "dag_aip_training_pipeline.input.yaml").read_text(encoding="utf-8"))
    flags = given["flags"]
    assert flags["hyperparameters"]["params"] == examples.TUNING_PARAMS
    assert flags["hyperparameters"]["hyperparameterMetricTag"] == examples.METRIC_TAG
    assert flags["pythonModule"] == examples.TRAINER_MODULE
    params = examples.job_params()
    for flag, param in (("scaleTier", "scale_tier"), ("runtimeVersion", "runtime_version")):
        assert flags[flag] == params[param].value
    assert flags["pythonVersion"] == params["python_version"].value


def _field_paths(schema_name: str, prefix: str) -> set[str]:
    paths: set[str] = set()
    for name, prop in schema(schema_name)["properties"].items():
        ref = prop.get("$ref") or prop.get("items", {}).get("$ref")
        if ref == "GoogleCloudMlV1__ReplicaConfig":
            paths |= {"<role>Config"} | _field_paths(ref, "<role>Config.")
        elif ref:
            paths |= {prefix + name} | _field_paths(ref, prefix + name + ("[]." if "items" in prop else "."))
        else:
            paths.add(prefix + name)
    return paths


def test_the_migration_doc_maps_every_training_input_field() -> None:
    doc = (ROOT / "docs" / "vertex-migration.md").read_text(encoding="utf-8")
    paths = _field_paths(TRAINING_INPUT_SCHEMA, "")
    assert len(paths) > 50
    missing = sorted(path for path in paths if f"| `{path}` |" not in doc)
    assert missing == []

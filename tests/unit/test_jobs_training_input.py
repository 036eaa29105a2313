"""trainingInput and Job bodies: the discovery document's shape plus the seeds' rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs import (
    build_training_input,
    discovery_document,
    load_job_config,
    validate_job,
    validate_training_input,
)


def minimal(**extra: Any) -> dict[str, Any]:
    return {
        "packageUris": ["gs://bucket/trainer-0.1.tar.gz"],
        "pythonModule": "trainer.task",
        "region": "us-central1",
        **extra,
    }


def test_discovery_document_is_googles() -> None:
    doc = discovery_document()
    assert doc["name"] == "ml"
    assert doc["version"] == "v1"
    assert "GoogleCloudMlV1__TrainingInput" in doc["schemas"]


def test_seed_example_is_valid_and_canonical() -> None:
    seed = minimal(
        scaleTier="CUSTOM",
        masterType="complex_model_m",
        workerType="complex_model_m",
        parameterServerType="large_model",
        workerCount=9,
        parameterServerCount=3,
        args=["--arg1", "value1"],
        jobDir="gs://my-bucket/training/job/directory",
        runtimeVersion="2.4",
        pythonVersion="3.7",
        scheduling={"maxWaitTime": "3600s", "maxRunningTime": "7200s"},
    )
    ti = validate_training_input(seed)
    # int64 fields come back as the API answers them: decimal strings.
    assert ti["workerCount"] == "9"
    assert ti["parameterServerCount"] == "3"
    assert ti["scheduling"] == {"maxWaitTime": "3600s", "maxRunningTime": "7200s"}


@pytest.mark.parametrize(
    ("extra", "field", "rule"),
    [
        ({"scaleTierX": "BASIC"}, "trainingInput.scaleTierX", "unknown field"),
        ({"scaleTier": "HUGE"}, "trainingInput.scaleTier", "must be one of BASIC"),
        ({"args": "--a"}, "trainingInput.args", "must be a list"),
        ({"args": [1]}, "trainingInput.args[0]", "must be a string"),
        ({"runtimeVersion": 2.4}, "trainingInput.runtimeVersion", "quote it in YAML"),
        ({"workerCount": "many"}, "trainingInput.workerCount", "must be an integer"),
        ({"workerCount": True}, "trainingInput.workerCount", "must be an integer"),
        ({"enableWebAccess": "yes"}, "trainingInput.enableWebAccess", "true or false"),
        ({"scheduling": {"maxWaitTime": "3600"}}, "trainingInput.scheduling.maxWaitTime", "ending in 's'"),
        ({"scheduling": {"maxWaitTime": "1799s"}}, "trainingInput.scheduling.maxWaitTime", "at least 1800s"),
        ({"scheduling": {"maxRunningTime": "0s"}}, "trainingInput.scheduling.maxRunningTime", "positive"),
        ({"scheduling": {"priority": 1001}}, "trainingInput.scheduling.priority", "[0, 1000]"),
        ({"scaleTier": "CUSTOM"}, "trainingInput.masterType", "required when scaleTier is CUSTOM"),
        ({"workerCount": 2, "workerType": "n1"}, "trainingInput.workerCount", "only be set when scaleTier"),
        (
            {"scaleTier": "CUSTOM", "masterType": "n1", "workerCount": 2},
            "trainingInput.workerType",
            "required when workerCount is 2",
        ),
        ({"region": ""}, "trainingInput.region", "is required"),
        ({"pythonModule": "trainer/task.py"}, "trainingInput.pythonModule", "dotted Python module"),
        ({"packageUris": ["/tmp/x.tar.gz"]}, "trainingInput.packageUris[0]", "gs:// URI"),
        ({"packageUris": ["gs://ab/x.tar.gz"]}, "trainingInput.packageUris[0]", "3-63 characters"),
        ({"packageUris": ["gs://bucket"]}, "trainingInput.packageUris[0]", "must name an object"),
        ({"packageUris": [f"gs://b/{i}" for i in range(101)]}, "trainingInput.packageUris", "at most 100"),
        ({"jobDir": "s3://x"}, "trainingInput.jobDir", "gs:// URI"),
        ({"serviceAccount": "me"}, "trainingInput.serviceAccount", "email"),
        (
            {"masterConfig": {"imageUri": "gcr.io/p/i"}},
            "trainingInput.packageUris",
            "must be unset when masterConfig.imageUri",
        ),
        (
            {"masterConfig": {"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": 0}}},
            "trainingInput.masterConfig.acceleratorConfig.count",
            "at least 1",
        ),
        (
            {"masterConfig": {"acceleratorConfig": {"count": 1}}},
            "trainingInput.masterConfig.acceleratorConfig.type",
            "required",
        ),
        (
            {"workerConfig": {"containerArgs": ["x"]}},
            "trainingInput.workerConfig.containerArgs",
            "needs a custom container",
        ),
    ],
)
def test_rejects_with_field_and_rule(extra: dict[str, Any], field: str, rule: str) -> None:
    with pytest.raises(ValidationError) as err:
        validate_training_input(minimal(**extra))
    assert err.value.field == field
    assert rule in err.value.rule


def test_missing_module_and_package() -> None:
    with pytest.raises(ValidationError) as err:
        validate_training_input({"region": "us-central1", "pythonModule": "t.task"})
    assert err.value.field == "trainingInput.packageUris"
    with pytest.raises(ValidationError) as err:
        validate_training_input({"region": "us-central1", "packageUris": ["gs://b/p"]})
    assert err.value.field == "trainingInput.pythonModule"


def test_custom_container_without_package() -> None:
    ti = validate_training_input(
        {
            "region": "us-central1",
            "scaleTier": "CUSTOM",
            "masterType": "n1-standard-4",
            "masterConfig": {"imageUri": "gcr.io/p/trainer:1", "containerArgs": ["--epochs", "2"]},
        }
    )
    assert ti["masterConfig"]["imageUri"] == "gcr.io/p/trainer:1"


def test_container_args_and_args_are_exclusive() -> None:
    with pytest.raises(ValidationError, match="mutually exclusive") as err:
        validate_training_input(
            {
                "region": "us-central1",
                "args": ["--a"],
                "masterConfig": {"imageUri": "gcr.io/p/i", "containerArgs": ["x"]},
            }
        )
    assert err.value.field == "trainingInput.masterConfig.containerArgs"


def test_validate_job() -> None:
    body = validate_job({"jobId": "job_1", "trainingInput": minimal(), "labels": {"team": "ml"}})
    assert body["jobId"] == "job_1"
    assert body["labels"] == {"team": "ml"}


@pytest.mark.parametrize(
    ("job", "field"),
    [
        ({"trainingInput": minimal()}, "jobId"),
        ({"jobId": "1job", "trainingInput": minimal()}, "jobId"),
        ({"jobId": "j"}, "trainingInput"),
        (
            {"jobId": "j", "trainingInput": minimal(), "trainingOutput": {"trials": "x"}},
            "trainingOutput.trials",
        ),
        ({"jobId": "j", "trainingInput": minimal(), "labels": {"A": "b"}}, "labels.A"),
        ({"jobId": "j", "trainingInput": minimal(), "predictionInput": {}}, "predictionInput"),
        ({"jobId": "j", "trainingInput": minimal(), "owner": "me"}, "owner"),
        (
            {"jobId": "j", "trainingInput": minimal(hyperparameters={"params": []})},
            "trainingInput.hyperparameters.params",
        ),
    ],
)
def test_validate_job_rejects(job: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as err:
        validate_job(job)
    assert err.value.field == field


def test_output_only_fields_the_schema_marks_are_dropped() -> None:
    """field_behavior.proto: the server "must ignore it and must not throw an error"."""
    job = {
        "jobId": "j",
        "trainingInput": minimal(),
        "state": "SUCCEEDED",
        "createTime": "2024-01-01T00:00:00Z",
    }
    assert set(validate_job(job)) == {"jobId", "trainingInput"}


def test_the_job_s_output_is_dropped_from_a_create_as_output_only() -> None:
    """job_service.proto (ml v1): the ``output`` oneof is "Output only"; a job read with GET and sent
    back to create (a clone) is taken, its result and etag ignored. [U] AI Platform's own answer."""
    job = {
        "jobId": "j",
        "trainingInput": minimal(),
        "trainingOutput": {"completedTrialCount": "2", "consumedMLUnits": 1.5},
        "predictionOutput": {"outputPath": "gs://b/o"},
        "etag": "YWJj",
    }
    assert set(validate_job(job)) == {"jobId", "trainingInput"}


def test_validate_job_allows_server_fields_when_asked() -> None:
    job = {
        "jobId": "j",
        "trainingInput": minimal(),
        "state": "RUNNING",
        "createTime": "2024-01-01T00:00:00Z",
        "trainingOutput": {"completedTrialCount": 2},
    }
    assert validate_job(job, allow_output_only=True)["trainingOutput"] == {"completedTrialCount": "2"}


def test_build_merges_config_and_arguments_arguments_win(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "trainingInput:\n"
        "  scaleTier: CUSTOM\n"
        "  masterType: complex_model_m\n"
        "  region: europe-west1\n"
        "  runtimeVersion: '2.4'\n"
        "  scheduling:\n"
        "    maxWaitTime: 3600s\n"
        "    maxRunningTime: 7200s\n"
    )
    ti = build_training_input(
        str(config),
        package_uris=["gs://bkt/p.tar.gz"],
        python_module="trainer.task",
        region="us-central1",
        scheduling={"maxRunningTime": "600s"},
        job_dir=None,
    )
    assert ti["region"] == "us-central1"
    assert ti["masterType"] == "complex_model_m"
    assert ti["scheduling"] == {"maxWaitTime": "3600s", "maxRunningTime": "600s"}
    assert "jobDir" not in ti


def test_build_from_json_file_and_dict(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"trainingInput": minimal(args=["--x"])}))
    assert build_training_input(path)["args"] == ["--x"]
    assert build_training_input({"trainingInput": minimal()}, args=["--y"])["args"] == ["--y"]
    assert build_training_input(None, **minimal())["pythonModule"] == "trainer.task"


def test_build_rejects_unknown_argument_and_bad_config(tmp_path: Path) -> None:
    with pytest.raises(ValidationError) as err:
        build_training_input(None, **minimal(), python_moduel="x")
    assert err.value.field == "trainingInput.pythonModuel"
    with pytest.raises(ValidationError) as err:
        load_job_config({"trainingInputs": {}})
    assert err.value.field == "config.trainingInputs"
    with pytest.raises(ValidationError) as err:
        load_job_config(str(tmp_path / "missing.yaml"))
    assert err.value.field == "config"
    bad = tmp_path / "bad.yaml"
    bad.write_text("trainingInput: [unclosed\n")
    with pytest.raises(ValidationError, match="not valid YAML"):
        load_job_config(bad)
    listing = tmp_path / "list.yaml"
    listing.write_text("- a\n")
    with pytest.raises(ValidationError, match="must be a mapping"):
        load_job_config(listing)

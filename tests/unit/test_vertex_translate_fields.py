"""AI Platform job fields, hyperparameters and vertex_job -> a Vertex AI body: one row per rule."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from airflow_aip.jobs.vertex.body import validate_custom_job
from airflow_aip.jobs.vertex.translate import CUSTOM_JOBS, TUNING_JOBS, VertexRequest, to_vertex
from tests.fixtures.translate import TF_CPU, error_of, make_ti, pools_of, vertex

# --- job-level fields ---------------------------------------------------------------------------


def test_job_dir_is_the_base_output_directory_and_a_flag() -> None:
    request = vertex(make_ti(jobDir="gs://bkt-x/out/run1", args=["--epochs=3"]))
    assert request.body["jobSpec"]["baseOutputDirectory"] == {"outputUriPrefix": "gs://bkt-x/out/run1"}
    assert pools_of(request)[0]["pythonPackageSpec"]["args"] == [
        "--epochs=3",
        "--job-dir=gs://bkt-x/out/run1",
    ]


@pytest.mark.parametrize(
    "args",
    [["--job-dir=gs://bkt-x/elsewhere"], ["--job-dir", "gs://bkt-x/elsewhere"], ["--job_dir=gs://bkt-x/e"]],
)
def test_job_dir_is_not_added_twice(args: list[str]) -> None:
    [pool] = pools_of(vertex(make_ti(jobDir="gs://bkt-x/out", args=args)))
    assert pool["pythonPackageSpec"]["args"] == args


def test_job_dir_reaches_custom_containers_too() -> None:
    ti = make_ti(masterConfig={"imageUri": "us-docker.pkg.dev/p/r/img:1"}, jobDir="gs://bkt-x/out")
    [pool] = pools_of(vertex(ti))
    assert pool["containerSpec"]["args"] == ["--job-dir=gs://bkt-x/out"]


def test_no_job_dir_no_output_directory() -> None:
    request = vertex(make_ti())
    assert "baseOutputDirectory" not in request.body["jobSpec"]
    assert "args" not in pools_of(request)[0]["pythonPackageSpec"]


def test_job_settings_and_encryption() -> None:
    kms = "projects/p/locations/us-central1/keyRings/r/cryptoKeys/k"
    ti = make_ti(
        serviceAccount="trainer@p.iam.gserviceaccount.com",
        network="projects/12345/global/networks/vpc",
        enableWebAccess=True,
        encryptionConfig={"kmsKeyName": kms},
        scheduling={"maxRunningTime": "7200s", "priority": 0},
        useChiefInTfConfig=False,
    )
    body = vertex(ti).body
    spec = body["jobSpec"]
    assert spec["serviceAccount"] == "trainer@p.iam.gserviceaccount.com"
    assert spec["network"] == "projects/12345/global/networks/vpc"
    assert spec["enableWebAccess"] is True
    assert spec["scheduling"] == {"timeout": "7200s"}
    assert body["encryptionSpec"] == {"kmsKeyName": kms}
    assert "region" not in json.dumps(body)  # the region is the URL's location, not a body field


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"scheduling": {"priority": 10}}, "trainingInput.scheduling.priority"),
        ({"useChiefInTfConfig": True}, "trainingInput.useChiefInTfConfig"),
        ({"scheduling": {"maxWaitTime": "3600s"}}, "trainingInput.scheduling.maxWaitTime"),
    ],
)
def test_fields_vertex_cannot_take_are_errors(fields: dict[str, Any], field: str) -> None:
    assert error_of(make_ti(**fields)).field == field


@pytest.mark.parametrize("strategy", ["FLEX_START", 6])
def test_max_wait_time_becomes_max_wait_duration_under_flex_start(strategy: Any) -> None:
    a100 = {"acceleratorConfig": {"type": "NVIDIA_TESLA_A100", "count": "1"}}  # FLEX_START needs a GPU
    ti = make_ti(
        scheduling={"maxWaitTime": "7200s"}, scaleTier="CUSTOM", masterType="a2-highgpu-1g", masterConfig=a100
    )
    body = vertex(ti, vertex_job={"jobSpec": {"scheduling": {"strategy": strategy}}}).body
    assert body["jobSpec"]["scheduling"] == {"maxWaitDuration": "7200s", "strategy": "FLEX_START"}


# --- hyperparameters ----------------------------------------------------------------------------

PARAMS = [
    {
        "parameterName": "lr",
        "type": "DOUBLE",
        "minValue": 0.001,
        "maxValue": 0.1,
        "scaleType": "UNIT_LOG_SCALE",
    },
    {"parameterName": "layers", "type": "INTEGER", "minValue": 1, "maxValue": 8, "scaleType": "NONE"},
    {"parameterName": "optimizer", "type": "CATEGORICAL", "categoricalValues": ["adam", "sgd"]},
    {"parameterName": "batch", "type": "DISCRETE", "discreteValues": [32, 64, 128]},
]


def test_hyperparameters_make_a_tuning_job() -> None:
    request = vertex(
        make_ti(
            hyperparameters={
                "goal": "MINIMIZE",
                "params": PARAMS,
                "algorithm": "RANDOM_SEARCH",
                "maxFailedTrials": 3,
            }
        )
    )
    assert request.kind == TUNING_JOBS
    body = request.body
    assert body["studySpec"] == {
        "metrics": [{"metricId": "training/hptuning/metric", "goal": "MINIMIZE"}],
        "parameters": [
            {
                "parameterId": "lr",
                "doubleValueSpec": {"minValue": 0.001, "maxValue": 0.1},
                "scaleType": "UNIT_LOG_SCALE",
            },
            {"parameterId": "layers", "integerValueSpec": {"minValue": "1", "maxValue": "8"}},
            {"parameterId": "optimizer", "categoricalValueSpec": {"values": ["adam", "sgd"]}},
            {"parameterId": "batch", "discreteValueSpec": {"values": [32.0, 64.0, 128.0]}},
        ],
        "algorithm": "RANDOM_SEARCH",
    }
    assert (body["maxTrialCount"], body["parallelTrialCount"], body["maxFailedTrialCount"]) == (1, 1, 3)
    assert "jobSpec" not in body
    assert body["trialJobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["pythonModule"] == "trainer.task"


def test_tuning_defaults_and_unspecified_goal() -> None:
    body = vertex(make_ti(hyperparameters={"goal": "GOAL_TYPE_UNSPECIFIED", "params": PARAMS[:1]})).body
    assert body["studySpec"]["metrics"] == [{"metricId": "training/hptuning/metric", "goal": "MAXIMIZE"}]
    assert "maxFailedTrialCount" not in body
    assert "algorithm" not in body["studySpec"]


def test_trial_early_stopping_becomes_the_decay_curve_rule() -> None:
    hyperparameters = {"params": PARAMS[:1], "enableTrialEarlyStopping": True, "maxTrials": 4}
    study = vertex(make_ti(hyperparameters=hyperparameters)).body["studySpec"]
    assert study["decayCurveStoppingSpec"] == {"useElapsedDuration": False}


def test_resuming_a_study_is_handed_to_the_submit_path_not_sent() -> None:
    """Vertex AI has no such study field: the earlier job's trials count at submit (jobs.ladder_trials)."""
    ti = make_ti(hyperparameters={"params": PARAMS[:1], "resumePreviousJobId": "old_job", "maxTrials": 4})
    request = to_vertex(ti, display_name="new_job", labels={})
    assert request.resume_from == "old_job"
    assert "resumePreviousJobId" not in repr(request.body)
    assert request.body["maxTrialCount"] == 4


# --- vertex_job, display name and labels --------------------------------------------------------


def test_vertex_job_merges_over_the_translation_and_ours_win() -> None:
    overlay = {
        "displayName": "theirs",
        "labels": {"team": "ml", "airflow_dag_id": "theirs"},
        "jobSpec": {
            "enableDashboardAccess": True,
            "baseOutputDirectory": {"outputUriPrefix": "gs://bkt-x/o"},
        },
    }
    request = vertex(
        make_ti(jobDir="gs://bkt-x/out"),
        display_name="ours",
        labels={"airflow_dag_id": "d"},
        vertex_job=overlay,
    )
    body = request.body
    assert body["displayName"] == "ours"
    assert body["labels"] == {"team": "ml", "airflow_dag_id": "d"}
    assert body["jobSpec"]["enableDashboardAccess"] is True
    assert body["jobSpec"]["baseOutputDirectory"] == {"outputUriPrefix": "gs://bkt-x/o"}
    assert body["jobSpec"]["workerPoolSpecs"][0]["machineSpec"] == {"machineType": "n1-standard-4"}


def test_vertex_job_lists_replace_whole() -> None:
    l4 = {"machineType": "g2-standard-8", "acceleratorType": "NVIDIA_L4", "acceleratorCount": 1}
    pools = [
        {
            "machineSpec": l4,
            "replicaCount": 1,
            "containerSpec": {"imageUri": "x/y:1"},
        }
    ]
    request = vertex(make_ti(), vertex_job={"jobSpec": {"workerPoolSpecs": pools}})
    assert pools_of(request) == [
        {
            "machineSpec": l4,
            "replicaCount": "1",
            "containerSpec": {"imageUri": "x/y:1"},
        }
    ]


def test_vertex_job_alone_is_the_whole_body() -> None:
    job = {
        "jobSpec": {
            "workerPoolSpecs": [
                {
                    "machineSpec": {"machineType": "n1-standard-4"},
                    "replicaCount": "1",
                    "containerSpec": {"imageUri": "a/b:1"},
                }
            ]
        }
    }
    request = vertex(None, vertex_job=job, display_name="d", labels={"k": "v"})
    assert request == VertexRequest(CUSTOM_JOBS, {**job, "displayName": "d", "labels": {"k": "v"}})
    tuning = {
        "studySpec": {
            "metrics": [{"metricId": "m", "goal": "MAXIMIZE"}],
            "parameters": [{"parameterId": "p", "doubleValueSpec": {"minValue": 0, "maxValue": 1}}],
        },
        "maxTrialCount": 2,
        "parallelTrialCount": 1,
        "trialJobSpec": job["jobSpec"],
    }
    assert vertex({}, vertex_job=tuning).kind == TUNING_JOBS


def test_a_study_spec_in_vertex_job_turns_a_training_input_into_a_tuning_job() -> None:
    study = {
        "metrics": [{"metricId": "acc", "goal": "MAXIMIZE"}],
        "parameters": [{"parameterId": "p", "categoricalValueSpec": {"values": ["a", "b"]}}],
    }
    request = vertex(make_ti(), vertex_job={"studySpec": study, "maxTrialCount": 4})
    assert request.kind == TUNING_JOBS
    assert request.body["studySpec"] == study
    assert (request.body["maxTrialCount"], request.body["parallelTrialCount"]) == (4, 1)
    assert request.body["trialJobSpec"]["workerPoolSpecs"][0]["machineSpec"] == {
        "machineType": "n1-standard-4"
    }


@pytest.mark.parametrize(
    ("ti", "kwargs", "field"),
    [
        (None, {}, "vertex_job"),
        (None, {"vertex_job": {"jobSpec": {}}, "executor_image_uri": TF_CPU}, "executor_image_uri"),
        (None, {"vertex_job": ["not", "a", "mapping"]}, "vertex_job"),
        (None, {"vertex_job": {"jobSpec": {"workerPoolSpecs": []}}}, "jobSpec.workerPoolSpecs"),
        (None, {"vertex_job": {"jobSpec": {}, "studySpec": {}}}, "jobSpec"),
    ],
)
def test_vertex_job_errors(ti: dict[str, Any] | None, kwargs: dict[str, Any], field: str) -> None:
    assert error_of(ti, **kwargs).field == field


def test_the_request_is_frozen_and_validated() -> None:
    request = vertex(make_ti(), labels={"a": "b"})
    assert request.kind == CUSTOM_JOBS == "customJobs"
    assert TUNING_JOBS == "hyperparameterTuningJobs"
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.kind = TUNING_JOBS  # type: ignore[misc]
    assert validate_custom_job(request.body) == request.body
    assert error_of(make_ti(), display_name="").field == "displayName"
    assert error_of(make_ti(), labels={"Bad Key": "v"}).field.startswith("labels")

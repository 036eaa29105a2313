"""apache-airflow-providers-google 22.8.0's Vertex AI operators, in a Dag run by ``dag.test()``,
against the local service, with nothing but ``aip-local env``'s variables.

The operators, their hooks (gapic gRPC clients on ``{region}-aiplatform.googleapis.com:443``, and
Google's SDK on its default transport) and their deferrable triggers run unchanged, in a process
whose environment is ``aip-local env``'s lines and an Airflow home; the provider's default
connection uses ADC (the key file those lines name). Checked from outside, through the REST face:
what the operators made, trained, tuned and deleted, that a SIGTERM to the task's process (how
Airflow kills a task) cancels the job, and which operators ride out an injected 503.

The provider is not a dependency of this project (1.8 GB with its dependencies): ``make test-soak``
runs this module in the provider's own environment (``make google-env``, ``.venv-google``), and
every other run leaves it out. Without the provider it skips, and under CI it fails.
"""

from __future__ import annotations

import signal
import string
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.google_env import finish_dag, run_dag, start_dag
from tests.fixtures.local_service import LocalService, StagedTrainer, own_service
from tests.fixtures.tools import need_module
from tests.fixtures.vertex import IMAGE, LOCATION, aiplatform
from tests.fixtures.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.soak]
GOOGLE_ENV = "make google-env (.venv-google: the provider and this package, 1.8 GB)"
need_module("airflow.providers.google.cloud.operators.vertex_ai.custom_job", GOOGLE_ENV)

provider_service = own_service("provider_service", ["--fault-admin", "--model-upload-seconds", "0"], jobs=3)

_HEAD = """
from airflow.sdk import DAG
from airflow.providers.google.cloud.operators.vertex_ai.custom_job import (
    CreateCustomContainerTrainingJobOperator,
    CreateCustomPythonPackageTrainingJobOperator,
    DeleteCustomTrainingJobOperator,
    ListCustomTrainingJobOperator,
)
from airflow.providers.google.cloud.operators.vertex_ai.hyperparameter_tuning_job import (
    CreateHyperparameterTuningJobOperator,
    GetHyperparameterTuningJobOperator,
)
from google.cloud.aiplatform import hyperparameter_tuning as hpt

WHERE = dict(project_id="$project", region="us-central1")
MACHINE = dict(replica_count=1, machine_type="n1-standard-4", staging_bucket="gs://$bucket")


def package(task_id, module="succeed", **extra):
    out = "gs://$bucket/provider/$project/" + task_id + "/"
    return CreateCustomPythonPackageTrainingJobOperator(
        task_id=task_id, display_name=task_id, python_package_gcs_uri="$package",
        python_module_name="aip_test_trainer." + module, container_uri="$image",
        base_output_dir=out, args=["--job-dir=" + out], retries=0, **WHERE, **MACHINE, **extra,
    )
"""

_EVERY_OPERATOR = """
def container(task_id, **extra):
    return CreateCustomContainerTrainingJobOperator(
        task_id=task_id, display_name=task_id, container_uri="$container", command=[], args=["report"],
        base_output_dir="gs://$bucket/provider/$project/" + task_id + "/", retries=0,
        **WHERE, **MACHINE, **extra,
    )


with DAG("provider_vertex", schedule=None) as dag:
    created = [
        package("pkg_sync", deferrable=False),
        package("pkg_deferred", deferrable=True, poll_interval=1),
        container("ctr_sync", deferrable=False),
        container("ctr_deferred", deferrable=True, poll_interval=1),
        CreateHyperparameterTuningJobOperator(
            task_id="tune", display_name="tune", staging_bucket="gs://$bucket",
            worker_pool_specs=[{
                "machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
                "python_package_spec": {
                    "executor_image_uri": "$image", "package_uris": ["$package"],
                    "python_module": "aip_test_trainer.tune", "args": ["--metric-tag=score"],
                },
            }],
            metric_spec={"score": "maximize"},
            parameter_spec={"x": hpt.DoubleParameterSpec(min=1, max=5, scale="linear")},
            max_trial_count=2, parallel_trial_count=1, deferrable=True, poll_interval=1, **WHERE,
        ),
    ]
    read = GetHyperparameterTuningJobOperator(
        task_id="get_tune",
        hyperparameter_tuning_job_id=(
            "{{ ti.xcom_pull(task_ids='tune', key='hyperparameter_tuning_job_id') }}"
        ),
        **WHERE,
    )
    listed = ListCustomTrainingJobOperator(task_id="list", **WHERE)
    deleted = DeleteCustomTrainingJobOperator(
        task_id="delete",
        training_pipeline_id="{{ ti.xcom_pull(task_ids='pkg_sync', key='training_id') }}",
        custom_job_id="{{ ti.xcom_pull(task_ids='pkg_sync', key='custom_job_id') }}",
        **WHERE,
    )
    created >> read >> listed >> deleted
"""

_TUNE = """
def tune(task_id, hold):
    return CreateHyperparameterTuningJobOperator(
        task_id=task_id, display_name=task_id, staging_bucket="gs://$bucket", retries=0,
        worker_pool_specs=[{
            "machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
            "python_package_spec": {
                "executor_image_uri": "$image", "package_uris": ["$package"],
                "python_module": "aip_test_trainer.tune", "args": ["--metric-tag=score", "--hold=" + hold],
            },
        }],
        metric_spec={"score": "maximize"},
        parameter_spec={"x": hpt.DoubleParameterSpec(min=1, max=5, scale="linear")},
        max_trial_count=2, parallel_trial_count=1, deferrable=True, poll_interval=1, **WHERE,
    )
"""

_ONE_TASK = """
with DAG("provider_vertex_one", schedule=None) as dag:
    $task
"""


def _source(body: str, **values: str) -> str:
    return string.Template(_HEAD + body).substitute(values)


def _resources(service: LocalService, project: str, kind: str) -> list[dict[str, Any]]:
    locations = aiplatform(service.url).projects().locations()
    answer = getattr(locations, kind)().list(parent=f"projects/{project}/locations/{LOCATION}").execute()
    found: list[dict[str, Any]] = answer.get(kind, [])
    return found


@pytest.fixture
def values(staged_trainer: StagedTrainer) -> dict[str, str]:
    return {
        "project": f"provider-{uuid.uuid4().hex[:8]}",
        "bucket": staged_trainer.bucket,
        "package": staged_trainer.package_uri,
        "image": IMAGE,
    }


def test_the_provider_s_operators_run_sync_and_deferred_here(
    provider_service: LocalService,
    airflow_db: Path,
    trainer_images: dict[str, str],
    values: dict[str, str],
    tmp_path: Path,
) -> None:
    source = _source(_EVERY_OPERATOR, **values, container=trainer_images["master"])

    run = run_dag(provider_service, tmp_path, airflow_db, source)

    assert run["tasks"] == {task: "success" for task in run["tasks"]}, f"see {tmp_path / 'run.log'}"
    assert set(run["tasks"]) == {
        "pkg_sync",
        "pkg_deferred",
        "ctr_sync",
        "ctr_deferred",
        "tune",
        "get_tune",
        "list",
        "delete",
    }
    pipelines = _resources(provider_service, values["project"], "trainingPipelines")
    assert sorted(p["displayName"] for p in pipelines) == [
        "ctr_deferred",
        "ctr_sync",
        "pkg_deferred",
    ]  # pkg_sync deleted
    assert {p["state"] for p in pipelines} == {"PIPELINE_STATE_SUCCEEDED"}
    (tuning,) = _resources(provider_service, values["project"], "hyperparameterTuningJobs")
    assert tuning["state"] == "JOB_STATE_SUCCEEDED"
    custom_jobs = _resources(provider_service, values["project"], "customJobs")
    assert len(custom_jobs) == 3  # one per remaining pipeline: pkg_sync's went with its pipeline


def test_a_sigterm_to_the_task_cancels_its_training_job(
    provider_service: LocalService, airflow_db: Path, values: dict[str, str], tmp_path: Path
) -> None:
    task = 'package("pkg_killed", module="sleep", deferrable=False)'
    process = start_dag(provider_service, tmp_path, airflow_db, _source(_ONE_TASK, **values, task=task))
    project = values["project"]

    def running() -> bool:
        jobs = _resources(provider_service, project, "customJobs")
        return bool(jobs) and jobs[0]["state"] == "JOB_STATE_RUNNING"

    wait_until(running, 300, f"the pipeline's CustomJob in {project} running")
    process.send_signal(signal.SIGTERM)  # what Airflow's supervisor sends a task it kills

    run = finish_dag(process, tmp_path)
    pipeline = wait_until(
        lambda: (
            (found := _resources(provider_service, project, "trainingPipelines")[0])["state"]
            == "PIPELINE_STATE_CANCELLED"
            and found
        ),
        120,
        "the pipeline cancelled",
    )
    assert run["tasks"]["pkg_killed"] == "failed"
    assert pipeline["state"] == "PIPELINE_STATE_CANCELLED"
    assert _resources(provider_service, project, "customJobs")[0]["state"] == "JOB_STATE_CANCELLED"


@pytest.mark.parametrize(
    ("method", "task", "outcome"),
    [
        # Google's SDK reads its pipeline with google-api-core's default Retry (base._DEFAULT_RETRY):
        # a 503 is retried, and the SDK-based Create operators ride it out.
        ("trainingPipelines.get", 'package("pkg_fault", deferrable=False)', "success"),
        # The gapic-based operators pass the provider's DEFAULT, and aiplatform v1's gapic config
        # has no retry for these methods: one 503 fails the task (Airflow's own retries are left).
        (
            "trainingPipelines.list",
            'ListCustomTrainingJobOperator(task_id="list", retries=0, **WHERE)',
            "failed",
        ),
    ],
)
def test_which_operators_ride_out_an_injected_503(
    provider_service: LocalService,
    airflow_db: Path,
    values: dict[str, str],
    tmp_path: Path,
    method: str,
    task: str,
    outcome: str,
) -> None:
    before = provider_service.admin("_stats")["faults"].get(method, {}).get("before:503", 0)
    provider_service.admin("_faults", {"method": method, "kind": 503, "count": 1}, "POST")
    try:
        run = run_dag(provider_service, tmp_path, airflow_db, _source(_ONE_TASK, **values, task=task))
    finally:
        provider_service.admin("_faults", method="DELETE")

    assert list(run["tasks"].values()) == [outcome], f"see {tmp_path / 'run.log'}"
    assert provider_service.admin("_stats")["faults"][method]["before:503"] == before + 1  # it was sent


def test_a_503_while_deferred_fails_the_tuning_task_and_the_job_runs_on(
    provider_service: LocalService, airflow_db: Path, values: dict[str, str], tmp_path: Path
) -> None:
    """The Google provider's triggers poll with no retry: a short outage of the job's reads fails
    the deferred task, while the job on the service runs on (anchors.md's first user pain)."""
    source = _source(_TUNE + _ONE_TASK, **values, task='tune("tune_blip", "6")')
    process = start_dag(provider_service, tmp_path, airflow_db, source)
    project = values["project"]

    def running() -> bool:
        jobs = _resources(provider_service, project, "hyperparameterTuningJobs")
        return bool(jobs) and jobs[0]["state"] == "JOB_STATE_RUNNING"

    wait_until(running, 300, f"the tuning job in {project} running")
    time.sleep(3)  # deferred by now: the trigger polls every second
    outage = {"method": "hyperparameterTuningJobs.get", "kind": 503, "for_seconds": 3}
    provider_service.admin("_faults", outage, "POST")
    run = finish_dag(process, tmp_path)

    assert run["tasks"]["tune_blip"] == "failed"
    assert "Exception occurred while requesting job" in (tmp_path / "run.log").read_text()  # the trigger's

    def ended() -> dict[str, Any] | None:
        job = _resources(provider_service, project, "hyperparameterTuningJobs")[0]
        return job if job["state"] in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED") else None

    job = wait_until(ended, 300, "the tuning job ended")
    assert job["state"] == "JOB_STATE_SUCCEEDED"  # nothing cancelled it: it ran on, unwatched

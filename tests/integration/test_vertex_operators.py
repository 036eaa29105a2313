"""The operators on the Vertex AI backend (the default), through real Airflow task runs (dag.test).

The local service's aiplatform v1 face plays Vertex AI; what the tests check is read back with
Google's own discovery client of ``aiplatform.v1.json``, not with our hook.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_aip.jobs.labels import JOB_ID_LABEL
from tests.fixtures.local_service import LocalService, StagedTrainer
from tests.fixtures.operators import (
    THREE_TRIALS,
    assert_three_trials_summary,
    run_trainer_dag,
    task_instance,
)
from tests.fixtures.vertex import aiplatform

pytestmark = pytest.mark.integration
PROJECT = "vertex-ops"
PARENT = f"projects/{PROJECT}/locations/us-central1"

DAG = """\
from datetime import datetime
from airflow.sdk import DAG
from airflow_aip.operators import CancelTrainingJobOperator, SubmitTrainingJobOperator
from airflow_aip.sensors import TrainingJobSensor

with DAG({name!r}, schedule=None, start_date=datetime(2026, 1, 1)) as dag:
    submit = SubmitTrainingJobOperator(
        task_id="submit", project_id={project!r}, job_id_prefix={prefix!r},
        training_input={training_input!r},
        executor_image_uri="us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest",
        deferrable={deferrable!r}, poll_interval=0.5, retries=0,
    )
    sense = TrainingJobSensor(
        task_id="sense", project_id={project!r}, region="us-central1", poke_interval=0.5, mode="poke",
        job_id="{{{{ ti.xcom_pull(task_ids='submit')['job_id'] }}}}",
    )
    sense_by_name = TrainingJobSensor(
        task_id="sense_by_name", project_id={project!r}, poke_interval=0.5, mode="poke",
        job_id="{{{{ ti.xcom_pull(task_ids='submit')['name'] }}}}",
    )
    cancel = CancelTrainingJobOperator(
        task_id="cancel_finished", project_id={project!r}, region="us-central1",
        job_id="{{{{ ti.xcom_pull(task_ids='submit')['job_id'] }}}}",
    )
    submit >> [sense, sense_by_name] >> cancel
"""


def _run(load_test_dag: Any, trainer: StagedTrainer, module: str, args: list[str], **kw: Any) -> Any:
    return run_trainer_dag(load_test_dag, DAG, "aip_vx", PROJECT, trainer, module, args, **kw)


def _jobs(service: LocalService, kind: str, label: str) -> list[dict[str, Any]]:
    collection = getattr(aiplatform(service.url).projects().locations(), kind)()
    answer = collection.list(parent=PARENT, filter=f'labels.{JOB_ID_LABEL}="{label}"').execute()
    return list(answer.get(kind, []))


def test_custom_job_flows_through_sensors_and_cancel(
    local_env: LocalService, staged_trainer: StagedTrainer, load_test_dag: Any
) -> None:
    run = _run(load_test_dag, staged_trainer, "succeed", ["--message", "vertex"])
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert states == dict.fromkeys(["submit", "sense", "sense_by_name", "cancel_finished"], "success")
    summary = task_instance(run, "submit").xcom_pull(task_ids="submit")
    assert summary["backend"] == "vertex"
    assert summary["state"] == "SUCCEEDED"
    assert summary["job_id"].startswith(run.dag_id)
    assert summary["name"].startswith("projects/")
    assert "/customJobs/" in summary["name"]
    assert summary["console_url"] == f"{local_env.url.rstrip('/')}/console/{summary['name']}"
    assert list(summary)[:3] == ["job_id", "state", "best_trial"]
    for task_id in ("sense", "sense_by_name"):
        assert task_instance(run, task_id).xcom_pull(task_ids=task_id)["name"] == summary["name"]
    assert (
        task_instance(run, "cancel_finished").xcom_pull(task_ids="cancel_finished")["cancel_requested"]
        is False
    )
    (job,) = _jobs(local_env, "customJobs", summary["job_id"])
    assert job["displayName"] == summary["job_id"]
    assert job["labels"]["airflow-dag-id"] == run.dag_id
    pool = job["jobSpec"]["workerPoolSpecs"][0]
    assert pool["pythonPackageSpec"]["executorImageUri"].endswith("sklearn-cpu.1-6:latest")
    args = pool["pythonPackageSpec"]["args"]
    assert any(a.startswith("--job-dir=gs://") for a in args)  # AI Platform trainers expect it


def test_deferred_tuning_job_puts_trials_and_best_trial_in_xcom(
    local_env: LocalService, staged_trainer: StagedTrainer, load_test_dag: Any
) -> None:
    run = _run(load_test_dag, staged_trainer, "tune", [], hyperparameters=THREE_TRIALS, deferrable=True)
    summary = task_instance(run, "submit").xcom_pull(task_ids="submit")
    assert "/hyperparameterTuningJobs/" in summary["name"]
    assert_three_trials_summary(summary)
    (job,) = _jobs(local_env, "hyperparameterTuningJobs", summary["job_id"])
    assert job["studySpec"]["parameters"][0]["parameterId"] == "x"
    assert job["maxTrialCount"] == 3

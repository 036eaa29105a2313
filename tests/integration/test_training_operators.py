"""Submit, sense and cancel on the ml v1 backend, through real Airflow task runs (dag.test).

The same flows on Vertex AI, the default backend: test_vertex_operators.py.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.fixtures.local_service import LocalService, StagedTrainer, wait_for_state
from tests.fixtures.operators import (
    THREE_TRIALS,
    assert_three_trials_summary,
    run_trainer_dag,
    task_instance,
)

pytestmark = pytest.mark.integration
PROJECT = "ops-project"

DAG = """\
from datetime import datetime
from airflow.sdk import DAG
from airflow_aip.operators import CancelTrainingJobOperator, SubmitTrainingJobOperator
from airflow_aip.sensors import TrainingJobSensor

with DAG({name!r}, schedule=None, start_date=datetime(2026, 1, 1)) as dag:
    submit = SubmitTrainingJobOperator(
        task_id="submit", project_id={project!r}, job_id_prefix={prefix!r}, backend="ai_platform",
        training_input={training_input!r},
        deferrable={deferrable!r}, poll_interval=0.5, retries=0,
    )
    sense = TrainingJobSensor(
        task_id="sense", project_id={project!r}, poke_interval=0.5, mode="poke", backend="ai_platform",
        job_id="{{{{ ti.xcom_pull(task_ids='submit')['job_id'] }}}}",
    )
    cancel = CancelTrainingJobOperator(
        task_id="cancel_finished", project_id={project!r}, backend="ai_platform",
        job_id="{{{{ ti.xcom_pull(task_ids='submit')['job_id'] }}}}",
    )
    submit >> sense >> cancel
"""


def _run(load_test_dag: Any, trainer: StagedTrainer, module: str, args: list[str], **kw: Any) -> Any:
    return run_trainer_dag(load_test_dag, DAG, "aip_ops", PROJECT, trainer, module, args, **kw)


def test_worker_mode_success_flows_through_sensor_and_cancel(
    local_env: LocalService, staged_trainer: StagedTrainer, load_test_dag: Any
) -> None:
    run = _run(load_test_dag, staged_trainer, "succeed", ["--message", "ops"])
    assert {ti.task_id: str(ti.state) for ti in run.get_task_instances()} == dict.fromkeys(
        ["submit", "sense", "cancel_finished"], "success"
    )
    summary = task_instance(run, "submit").xcom_pull(task_ids="submit")
    assert summary["state"] == "SUCCEEDED"
    assert summary["project_id"] == PROJECT
    assert summary["job_id"].startswith(run.dag_id)
    assert summary["console_url"].endswith(f"/console/projects/{PROJECT}/jobs/{summary['job_id']}")
    assert (
        task_instance(run, "submit").xcom_pull(task_ids="submit", key="training_job_id") == summary["job_id"]
    )
    assert task_instance(run, "sense").xcom_pull(task_ids="sense")["state"] == "SUCCEEDED"
    assert (
        task_instance(run, "cancel_finished").xcom_pull(task_ids="cancel_finished")["cancel_requested"]
        is False
    )
    job = local_env.ml().projects().jobs().get(name=f"projects/{PROJECT}/jobs/{summary['job_id']}").execute()
    assert job["labels"]["airflow-dag-id"] == run.dag_id
    assert job["labels"]["airflow-task-id"] == "submit"


def test_failed_job_fails_the_task_with_its_error_message(
    local_env: LocalService,
    staged_trainer: StagedTrainer,
    load_test_dag: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    run = _run(load_test_dag, staged_trainer, "fail", [])
    assert str(task_instance(run, "submit").state) == "failed"
    assert str(run.state) == "failed"
    jobs = (
        local_env.ml()
        .projects()
        .jobs()
        .list(parent=f"projects/{PROJECT}", filter=f"jobId:{run.dag_id}*")
        .execute()
    )
    assert [j["state"] for j in jobs.get("jobs", [])] == ["FAILED"]
    assert "exit" in jobs["jobs"][0]["errorMessage"].lower()


def test_deferred_tuning_job_puts_trials_and_best_trial_in_xcom(
    local_env: LocalService, staged_trainer: StagedTrainer, load_test_dag: Any
) -> None:
    run = _run(load_test_dag, staged_trainer, "tune", [], hyperparameters=THREE_TRIALS, deferrable=True)
    summary = task_instance(run, "submit").xcom_pull(task_ids="submit")
    assert_three_trials_summary(summary)


def test_cancel_operator_cancels_a_running_job(
    local_env: LocalService, staged_trainer: StagedTrainer, load_test_dag: Any
) -> None:
    job_id = f"to_cancel_{uuid.uuid4().hex[:8]}"
    ml = local_env.ml()
    body = {"jobId": job_id, "trainingInput": staged_trainer.training_input("sleep", ["--seconds", "120"])}
    ml.projects().jobs().create(parent=f"projects/{PROJECT}", body=body).execute()
    wait_for_state(ml, f"projects/{PROJECT}/jobs/{job_id}", {"RUNNING"})
    dag = load_test_dag(
        "aip_cancel_running",
        "from datetime import datetime\nfrom airflow.sdk import DAG\n"
        "from airflow_aip.operators import CancelTrainingJobOperator\n"
        "with DAG('aip_cancel_running', schedule=None, start_date=datetime(2026, 1, 1)) as dag:\n"
        f"    CancelTrainingJobOperator(task_id='cancel', project_id={PROJECT!r}, job_id={job_id!r}, "
        "backend='ai_platform')\n",
    )
    run = dag.test()
    assert task_instance(run, "cancel").xcom_pull(task_ids="cancel")["cancel_requested"] is True
    job = wait_for_state(ml, f"projects/{PROJECT}/jobs/{job_id}", {"CANCELLED"})
    assert job["state"] == "CANCELLED"

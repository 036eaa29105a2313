"""A budget through real task runs (dag.test) on the local service: the same estimate and guard as on
Google, on the local jobs' machine specs and times (the local service bills nothing).

One proof each: a job under its budget is untouched and its summary says what it cost; a tuning job
over its budget, waited for in the triggerer, is cancelled once and its task fails with the line; a
retry counts what its earlier try spent. Under soak: a bad budget fails before anything is created;
the sensor cancels once and fails without retry. (The ladder's refusal: test_capacity_ladder.py.)
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from airflow_aip.jobs.pricing import PriceTable
from airflow_aip.links import ENDED_JOB_XCOM_KEY
from tests.fixtures.local_service import LocalService, StagedTrainer
from tests.fixtures.operators import task_instance
from tests.fixtures.vertex import aiplatform

pytestmark = pytest.mark.integration
PROJECT = "budget-ops"
PARENT = f"projects/{PROJECT}/locations/us-central1"

DAG = """\
from datetime import datetime
from airflow.sdk import DAG
from airflow_aip.operators import SubmitTrainingJobOperator

with DAG({name!r}, schedule=None, start_date=datetime(2026, 1, 1)) as dag:
    SubmitTrainingJobOperator(
        task_id="submit", project_id={project!r}, job_id_prefix={name!r},
        training_input={training_input!r},
        executor_image_uri="us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest",
        deferrable={deferrable!r}, poll_interval=0.5, retries=0, budget={budget!r},
    )
"""
HOLDING_TRIALS: dict[str, Any] = {  # two trials that hold 10 minutes: the guard must stop them
    "goal": "MAXIMIZE",
    "maxTrials": 2,
    "maxParallelTrials": 2,
    "algorithm": "GRID_SEARCH",
    "params": [{"parameterName": "x", "type": "DISCRETE", "discreteValues": [1, 3]}],
}


def run(loader: Any, trainer: StagedTrainer, module: str, args: list[str], **kw: Any) -> tuple[Any, str]:
    name = f"aip_budget_{uuid.uuid4().hex[:8]}"
    training_input = trainer.training_input(module, args)
    if kw.get("hyperparameters"):
        training_input["hyperparameters"] = kw["hyperparameters"]
    source = DAG.format(
        name=name,
        project=PROJECT,
        training_input=training_input,
        deferrable=kw.get("deferrable", False),
        budget=kw.get("budget"),
    )
    return loader(name, source).test(), name


def jobs_of(service: LocalService, dag_id: str, kind: str) -> list[dict[str, Any]]:
    collection = getattr(aiplatform(service.url).projects().locations(), kind)()
    listed = collection.list(parent=PARENT, filter=f'labels.airflow-dag-id="{dag_id}"').execute()
    return list(listed.get(kind, []))


def test_a_job_under_its_budget_is_untouched_and_says_what_it_cost(
    local_env: LocalService, staged_trainer: StagedTrainer, load_test_dag: Any
) -> None:
    dag_run, _ = run(load_test_dag, staged_trainer, "succeed", [], budget=100)
    ti = task_instance(dag_run, "submit")
    assert str(ti.state) == "success"
    cost = ti.xcom_pull(task_ids="submit")["cost"]
    assert cost["estimate"] is True
    assert cost["table_date"] == PriceTable.load().date
    assert cost["currency"] == "USD"
    assert 0 < cost["amount"] < 100  # BASIC is an n1-standard-4: priced in the table
    assert cost["seconds"] > 0


def test_a_tuning_job_over_its_budget_is_cancelled_once_and_its_task_fails_with_the_line(
    local_env: LocalService,
    staged_trainer: StagedTrainer,
    load_test_dag: Any,
    capfd: pytest.CaptureFixture[str],
) -> None:
    dag_run, dag_id = run(
        load_test_dag,
        staged_trainer,
        "tune",
        ["--hold", "600"],
        hyperparameters=HOLDING_TRIALS,
        deferrable=True,
        budget=0.0001,
    )
    ti = task_instance(dag_run, "submit")
    assert str(ti.state) == "failed"
    ending = ti.xcom_pull(task_ids="submit", key=ENDED_JOB_XCOM_KEY)
    assert ending["status"] == "over_budget"
    assert "is over its budget" in ending["message"]
    assert "budget USD 0.0001" in ending["message"]
    assert PriceTable.load().date in ending["message"]
    (job,) = jobs_of(local_env, dag_id, "hyperparameterTuningJobs")
    assert job["state"] in ("JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED")
    printed = capfd.readouterr()
    assert (printed.out + printed.err).count("(over budget)") == 1  # the task log's one cancel


@pytest.mark.soak  # the rule is the unit tests' (test_budget_guard.py); make test stays under 10 minutes
def test_a_bad_budget_fails_before_anything_is_created(
    local_env: LocalService, staged_trainer: StagedTrainer, load_test_dag: Any
) -> None:
    dag_run, dag_id = run(load_test_dag, staged_trainer, "succeed", [], budget="lots")
    assert str(task_instance(dag_run, "submit").state) == "failed"
    assert jobs_of(local_env, dag_id, "customJobs") == []


def test_a_retry_counts_what_the_earlier_try_spent_read_back_from_its_job(
    local_env: LocalService, staged_trainer: StagedTrainer
) -> None:
    """Try 1 runs past a tiny budget and is cancelled; its retry (the same task instance, a new
    process: nothing kept in memory or in Airflow) reads try 1's job back by its labels, and refuses
    to submit: the budget is spent."""
    from datetime import datetime, timezone

    from airflow_aip.exceptions import BudgetExceededError
    from airflow_aip.operators import SubmitTrainingJobOperator
    from tests.fixtures.operators import FakeTI, task_context

    dag_id = f"aip_budget_{uuid.uuid4().hex[:8]}"
    when = datetime(2026, 3, 9, 7, 5, 1, tzinfo=timezone.utc)

    def one_try() -> None:
        operator = SubmitTrainingJobOperator(
            task_id="submit",
            project_id=PROJECT,
            job_id_prefix=dag_id,
            training_input=staged_trainer.training_input("sleep"),
            executor_image_uri="us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest",
            poll_interval=0.5,
            deferrable=False,
            budget=0.001,  # USD; one 30-second increment of an n1-standard-4 is about 0.002
            retries=1,
        )
        operator.execute(task_context(FakeTI(dag_id, "submit"), when))  # type: ignore[arg-type]

    with pytest.raises(BudgetExceededError, match="is over its budget"):
        one_try()
    with pytest.raises(BudgetExceededError, match=r"budget USD 0\.001 is spent: earlier tries cost 0\.00"):
        one_try()
    jobs = jobs_of(local_env, dag_id, "customJobs")
    assert len(jobs) == 1  # the retry created nothing
    assert jobs[0]["state"] in ("JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED")


@pytest.mark.soak  # the worker's guard is make test's once (the retry test); this is the sensor's mapping
def test_the_sensor_cancels_a_job_past_its_budget_once_and_fails_without_retry(
    local_env: LocalService, staged_trainer: StagedTrainer, capfd: pytest.CaptureFixture[str]
) -> None:
    """The sensor watches a job it did not submit (here: made with Google's own discovery client)."""
    from airflow_aip.compat import AirflowFailException
    from airflow_aip.sensors import TrainingJobSensor
    from tests.fixtures.operators import task_context
    from tests.fixtures.vertex import worker_pool

    body = {
        "displayName": f"watched_{uuid.uuid4().hex[:8]}",
        "jobSpec": {"workerPoolSpecs": [worker_pool(staged_trainer, "sleep", [])]},
    }
    created = (
        aiplatform(local_env.url)
        .projects()
        .locations()
        .customJobs()
        .create(parent=PARENT, body=body)
        .execute()
    )
    sensor = TrainingJobSensor(
        task_id="watch",
        project_id=PROJECT,
        job_id=created["name"],
        poke_interval=0.5,
        mode="poke",
        budget=0.0001,
    )
    with pytest.raises(AirflowFailException, match="is over its budget"):
        sensor.execute(task_context())  # type: ignore[arg-type]
    job = aiplatform(local_env.url).projects().locations().customJobs().get(name=created["name"]).execute()
    assert job["state"] in ("JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED")
    printed = capfd.readouterr()
    assert (printed.out + printed.err).count("(over budget)") == 1

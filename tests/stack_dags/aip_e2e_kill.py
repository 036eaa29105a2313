"""Long jobs, each waited on in one way, until a user kills the waiting tasks.

- ``wait_in_worker`` and ``wait_deferred``: the submit operator waits itself, in the worker or
  deferred (it owns its job: ``cancel_on_kill`` defaults to True).
- ``sensor_poke``, ``sensor_deferred`` and ``sensor_reschedule``: a submit that does not wait,
  then a sensor with ``cancel_on_kill=True``. Between two pokes of reschedule mode no process
  exists to be killed, so that sensor's job has a cancelling teardown, as the sensor's
  docstring recommends.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG
from stack_dag_parts import JOB_DIR, training_input

from airflow_aip.operators import CancelTrainingJobOperator, SubmitTrainingJobOperator
from airflow_aip.sensors import TrainingJobSensor


def submit(task_id: str, **kwargs: Any) -> SubmitTrainingJobOperator:
    return SubmitTrainingJobOperator(
        task_id=task_id,
        project_id="{{ dag_run.conf['project_id'] }}",
        training_input=training_input("sleep", ["--seconds", "600"], f"{JOB_DIR}/{task_id}"),
        poll_interval=2,
        retries=0,
        **kwargs,
    )


with DAG("aip_e2e_kill", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    submit("wait_in_worker", deferrable=False)
    submit("wait_deferred", deferrable=True, defer_after=0)
    for mode in ("poke", "deferred", "reschedule"):
        submitted = submit(f"submit_for_{mode}", wait_for_completion=False)
        job_id = "{{ ti.xcom_pull(task_ids='submit_for_" + mode + "')['job_id'] }}"
        sensor = TrainingJobSensor(
            task_id=f"sensor_{mode}",
            project_id="{{ dag_run.conf['project_id'] }}",
            job_id=job_id,
            mode="reschedule" if mode == "reschedule" else "poke",
            deferrable=mode == "deferred",
            poke_interval=10 if mode == "reschedule" else 2,
            cancel_on_kill=True,
            retries=0,
        )
        submitted >> sensor
        if mode == "reschedule":
            sensor >> CancelTrainingJobOperator(
                task_id="cancel_reschedule_job", project_id="{{ dag_run.conf['project_id'] }}", job_id=job_id
            ).as_teardown(setups=submitted)

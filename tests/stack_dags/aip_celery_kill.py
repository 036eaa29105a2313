"""One job that trains for a while, waited on in the worker: the worker is SIGKILLed under it.

``retries=1``: the scheduler fails the dead worker's try when its heartbeat stops, and the retry
(same task instance, so the same job ID) adopts the job instead of creating another.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG
from stack_dag_parts import training_input

from airflow_aip.operators import SubmitTrainingJobOperator

with DAG("aip_celery_kill", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    SubmitTrainingJobOperator(
        task_id="train",
        project_id="{{ dag_run.conf['project_id'] }}",
        training_input=training_input("sleep", ["--seconds", "{{ dag_run.conf['seconds'] }}"]),
        poll_interval=2,
        deferrable=False,
        retries=1,
        retry_delay=timedelta(seconds=0),
    )

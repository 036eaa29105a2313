"""One job that trains for a while, waited on in the worker: the worker is SIGKILLed under it.

``retries=1``: the scheduler fails the dead worker's try when its heartbeat stops, and the retry
(same task instance, so the same job ID) adopts the job instead of creating another.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_aip.operators import SubmitTrainingJobOperator

with DAG("aip_celery_kill", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    SubmitTrainingJobOperator(
        task_id="train",
        project_id="{{ dag_run.conf['project_id'] }}",
        training_input={
            "region": "us-central1",
            "runtimeVersion": "2.11",  # on Vertex AI: which pre-built container
            "packageUris": ["{{ dag_run.conf['package_uri'] }}"],
            "pythonModule": "aip_test_trainer.sleep",
            "args": ["--seconds", "{{ dag_run.conf['seconds'] }}"],
            "jobDir": "{{ dag_run.conf['job_dir'] }}",
        },
        poll_interval=2,
        deferrable=False,
        retries=1,
        retry_delay=timedelta(seconds=0),
    )

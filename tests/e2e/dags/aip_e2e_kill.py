"""Two tasks wait on a long job each, one in the worker and one deferred, until a user kills them."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_aip.operators import SubmitTrainingJobOperator

with DAG("aip_e2e_kill", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    for task_id, deferrable in (("wait_in_worker", False), ("wait_deferred", True)):
        SubmitTrainingJobOperator(
            task_id=task_id,
            project_id="{{ dag_run.conf['project_id'] }}",
            training_input={
                "region": "us-central1",
                "packageUris": ["{{ dag_run.conf['package_uri'] }}"],
                "pythonModule": "aip_test_trainer.sleep",
                "args": ["--seconds", "600"],
                "jobDir": "{{ dag_run.conf['job_dir'] }}/" + task_id,
            },
            deferrable=deferrable,
            poll_interval=2,
            retries=0,
        )

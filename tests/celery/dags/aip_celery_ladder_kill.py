"""A capacity ladder waited on in the worker: the worker is SIGKILLed under rung 2's job.

Rung 1 asks for an A100, which the tier's region is out of (``POST /_capacity``): its job fails
with code 8 and the task climbs to rung 2, a CPU job that trains a few seconds. ``retries=1``:
the scheduler fails the dead worker's try when its heartbeat stops, and the retry (same task
instance, so the same rung job IDs) scans the rungs, passes rung 1's failed job and adopts
rung 2's instead of creating anything.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_aip.operators import SubmitTrainingJobOperator

A100 = {
    "label": "a100",
    "machine_type": "a2-highgpu-1g",
    "accelerator_type": "NVIDIA_TESLA_A100",
    "accelerator_count": 1,
}
CPU = {"label": "cpu", "strategy": "STANDARD", "machine_type": "n1-standard-4", "accelerator_count": 0}

with DAG("aip_celery_ladder_kill", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
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
        capacity_ladder=[A100, CPU],
        poll_interval=2,
        deferrable=False,
        retries=1,
        retry_delay=timedelta(seconds=0),
    )

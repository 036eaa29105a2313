"""A capacity ladder waited on deferred, until a user kills the task on its second rung.

Rung 1 asks for a Flex-Start A100 that never comes (the test sets ``POST /_capacity``): after
its 15 s ``maxWaitDuration`` its job fails with code 8, the trigger fires, the task climbs and
defers again on rung 2, a CPU job that would train for 10 minutes. A user's kill then reaches the
trigger of rung 2's job, which must cancel that job, and only that one. (Not a stockout, which
fails in a second: a trigger that fires before the scheduler has seen the task defer meets
Airflow's executor-event race and fails the task with no log line of ours.)
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_aip.operators import SubmitTrainingJobOperator

A100 = {  # Flex-Start, so rung 1 fails after 15 s of waiting, not at once: see the docstring
    "label": "a100",
    "strategy": "FLEX_START",
    "max_wait_duration": "15s",
    "machine_type": "a2-highgpu-1g",
    "accelerator_type": "NVIDIA_TESLA_A100",
    "accelerator_count": 1,
}
CPU = {"label": "cpu", "strategy": "STANDARD", "machine_type": "n1-standard-4", "accelerator_count": 0}

with DAG("aip_e2e_ladder_kill", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    SubmitTrainingJobOperator(
        task_id="wait_deferred",
        project_id="{{ dag_run.conf['project_id'] }}",
        training_input={
            "region": "us-central1",
            "runtimeVersion": "2.11",  # on Vertex AI: which pre-built container
            "packageUris": ["{{ dag_run.conf['package_uri'] }}"],
            "pythonModule": "aip_test_trainer.sleep",
            "args": ["--seconds", "600"],
            "jobDir": "{{ dag_run.conf['job_dir'] }}",
        },
        capacity_ladder=[A100, CPU],
        deferrable=True,
        poll_interval=2,
        retries=0,
    )

"""A slow tuning job, waited on deferred: 6 trials, 2 at a time, each holding ``hold`` seconds.

What the live Training job tab is tested on: its trials finish one pair after another while the
task is still deferred.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_aip.operators import SubmitTrainingJobOperator

with DAG("aip_e2e_tuning", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    SubmitTrainingJobOperator(
        task_id="tune",
        project_id="{{ dag_run.conf['project_id'] }}",
        training_input={
            "region": "us-central1",
            "runtimeVersion": "2.11",  # on Vertex AI: which pre-built container
            "packageUris": ["{{ dag_run.conf['package_uri'] }}"],
            "pythonModule": "aip_test_trainer.tune",
            "args": ["--hold", "{{ dag_run.conf.get('hold', 8) }}", "--metric-tag", "score"],
            "jobDir": "{{ dag_run.conf['job_dir'] }}",
            "hyperparameters": {
                "goal": "MAXIMIZE",
                "hyperparameterMetricTag": "score",
                "maxTrials": 6,
                "maxParallelTrials": 2,
                "params": [{"parameterName": "x", "type": "DOUBLE", "minValue": 0.0, "maxValue": 1.0}],
            },
        },
        deferrable=True,
        poll_interval=2,
        retries=0,
    )

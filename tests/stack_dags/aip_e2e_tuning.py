"""A slow tuning job, waited on deferred: 6 trials, 2 at a time, each holding ``hold`` seconds.

What the live Training job tab is tested on: its trials finish one pair after another while the
task is still deferred.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG
from stack_dag_parts import training_input

from airflow_aip.operators import SubmitTrainingJobOperator

HOLD = "{{ dag_run.conf.get('hold', 8) }}"

with DAG("aip_e2e_tuning", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    SubmitTrainingJobOperator(
        task_id="tune",
        project_id="{{ dag_run.conf['project_id'] }}",
        training_input={
            **training_input("tune", ["--hold", HOLD, "--metric-tag", "score"]),
            "hyperparameters": {
                "goal": "MAXIMIZE",
                "hyperparameterMetricTag": "score",
                "maxTrials": 6,
                "maxParallelTrials": 2,
                "params": [{"parameterName": "x", "type": "DOUBLE", "minValue": 0.0, "maxValue": 1.0}],
            },
        },
        deferrable=True,
        defer_after=0,
        poll_interval=2,
        retries=0,
    )

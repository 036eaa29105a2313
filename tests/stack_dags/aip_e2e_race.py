"""Jobs that end within seconds of their task's deferral: Airflow's executor-event race.

A trigger that fires before the scheduler has read the deferring worker's SUCCESS used to fail
its task with Airflow's "finished with state success, but the task instance's state attribute is
queued" and no line of ours (apache/airflow#67287). Each task defers with ``retries=0``:

- ``succeed``: its job trains ``conf['seconds']`` (0.5 to 3 s), then SUCCEEDED;
- ``fail``: its trainer fails 1 s in: the task must fail with the job's error, in our words;
- ``climb``: a capacity ladder whose rung 1 (a Flex-Start A100; the test leaves the region none)
  gives up after its 2 s ``maxWaitDuration`` with code 8, so the task climbs, defers again on
  rung 2's CPU job of ``conf['seconds']``, and succeeds.

The e2e tier runs it on LocalExecutor, the Celery tier on CeleryExecutor (``aip_celery_race``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG
from stack_dag_parts import A100, CPU_RUNG, training_input

from airflow_aip.operators import SubmitTrainingJobOperator

SECONDS = "{{ dag_run.conf['seconds'] }}"
FLEX_START_A100 = {"label": "a100", "strategy": "FLEX_START", "max_wait_duration": "2s", **A100}


def race_dag(dag_id: str) -> DAG:
    with DAG(dag_id, schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
        waiting: dict[str, Any] = {"deferrable": True, "defer_after": 0, "retries": 0, "poll_interval": 1}
        project = "{{ dag_run.conf['project_id'] }}"
        SubmitTrainingJobOperator(
            task_id="succeed",
            project_id=project,
            training_input=training_input("sleep", ["--seconds", SECONDS]),
            **waiting,
        )
        SubmitTrainingJobOperator(
            task_id="fail",
            project_id=project,
            training_input=training_input("fail", ["--seconds", "1"]),
            **waiting,
        )
        SubmitTrainingJobOperator(
            task_id="climb",
            project_id=project,
            training_input=training_input("sleep", ["--seconds", SECONDS]),
            placement=[FLEX_START_A100, CPU_RUNG],
            **waiting,
        )
    return dag


local = race_dag("aip_e2e_race")
celery = race_dag("aip_celery_race")

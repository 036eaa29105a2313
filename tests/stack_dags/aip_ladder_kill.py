"""A capacity ladder whose task is killed on its second rung: one Dag a waiting mode.

Rung 1 asks for an A100 that never comes, so its job fails with code 8 and the task climbs to
rung 2, a CPU job.

- ``aip_e2e_ladder_kill`` (e2e tier) waits deferred. Rung 1 is a Flex-Start A100 (the test sets
  ``POST /_capacity``): it fails after its 15 s ``maxWaitDuration``, not at once, since a trigger
  that fires before the scheduler has seen the task defer meets Airflow's executor-event race and
  fails the task with no log line of ours. Rung 2 would train for 10 minutes; a user's kill then
  reaches the trigger of rung 2's job, which must cancel that job, and only that one.
- ``aip_celery_ladder_kill`` (Celery tier) waits in the worker, and the worker is SIGKILLed under
  rung 2's job. Rung 1's A100 is out of stock in the tier's region. ``retries=1``: the scheduler
  fails the dead worker's try when its heartbeat stops, and the retry (same task instance, so
  the same rung job IDs) passes rung 1's failed job and adopts rung 2's, creating nothing.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG
from stack_dag_parts import A100, CPU_RUNG, training_input

from airflow_aip.operators import SubmitTrainingJobOperator

FLEX_START_A100 = {"label": "a100", "strategy": "FLEX_START", "max_wait_duration": "15s", **A100}
STOCKED_OUT_A100 = {"label": "a100", **A100}


def ladder_dag(dag_id: str, first_rung: dict[str, Any], seconds: str, **waiting: Any) -> DAG:
    with DAG(dag_id, schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
        SubmitTrainingJobOperator(
            task_id=waiting.pop("task_id"),
            project_id="{{ dag_run.conf['project_id'] }}",
            training_input=training_input("sleep", ["--seconds", seconds]),
            placement=[first_rung, CPU_RUNG],
            poll_interval=2,
            **waiting,
        )
    return dag


deferred = ladder_dag(
    "aip_e2e_ladder_kill",
    FLEX_START_A100,
    "600",
    task_id="wait_deferred",
    deferrable=True,
    defer_after=0,
    retries=0,
)
in_worker = ladder_dag(
    "aip_celery_ladder_kill",
    STOCKED_OUT_A100,
    "{{ dag_run.conf['seconds'] }}",
    task_id="train",
    deferrable=False,
    retries=1,
    retry_delay=timedelta(seconds=0),
)

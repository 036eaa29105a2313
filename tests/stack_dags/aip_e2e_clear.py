"""A retry adopts, a user's clear trains anew: each task is cleared (or retried) once by the test.

- ``train``: a 1 s job; cleared after it SUCCEEDED, the task trains again under ``_r2``;
- ``fire``: submits a 10-minute job without waiting; cleared while the job runs, the task adopts it;
- ``always``: as ``train`` with ``if_exists="always_adopt"``: cleared, it adopts the SUCCEEDED job;
- ``retry`` (after ``train``): waits in the worker with ``cancel_on_kill=False``; its first try
  times out (``execution_timeout``) while the job runs, and the retry adopts the job.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG
from stack_dag_parts import JOB_DIR, training_input

from airflow_aip.operators import SubmitTrainingJobOperator


def submit(task_id: str, seconds: str, **kwargs: Any) -> SubmitTrainingJobOperator:
    return SubmitTrainingJobOperator(
        task_id=task_id,
        project_id="{{ dag_run.conf['project_id'] }}",
        training_input=training_input("sleep", ["--seconds", seconds], f"{JOB_DIR}/{task_id}"),
        poll_interval=1,
        deferrable=False,
        **kwargs,
    )


with DAG("aip_e2e_clear", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    train = submit("train", "1", retries=0)
    submit("fire", "600", retries=0, wait_for_completion=False)
    submit("always", "1", retries=0, if_exists="always_adopt")
    # After train: the job's environment is built by then, so its 16 s are the trainer's alone:
    # longer than try 1's 10 s, shorter than try 1 and try 2 together.
    train >> submit(
        "retry",
        "16",
        retries=1,
        retry_delay=timedelta(seconds=0),
        cancel_on_kill=False,
        execution_timeout=timedelta(seconds=10),
    )

"""Many deferred training tasks at once: one triggerer watches all their jobs.

One mapped ``SubmitTrainingJobOperator`` (Vertex AI, the default backend), each task submitting
a job of the test trainer's ``gated`` module and deferring. Each job waits until the test opens
the gate (a file: ``dag_run.conf['gate']``), so all are running and watched together however
long submitting them took; then it prints ``chatty line 0001`` ... ``chatty line 0025`` over
about 10 s, the last five in its final second. The jobs at ``failing(jobs)`` map indexes exit
non-zero after printing every line: their tasks must fail with the job's error.

Two sizes (``SIZES``): ten tasks prove the rule (one list call per poll round, whatever the
number of waits: a list call carries up to 100 jobs) in ``make test``; fifty are the load, in
``make test-soak``. The numbers are shared with tests/e2e/test_many_deferred.py.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG

from airflow_aip.operators import SubmitTrainingJobOperator

SIZES = {"aip_e2e_many": 10, "aip_e2e_many_soak": 50}  # Dag ID -> mapped tasks
POLL_INTERVAL = 5
LINES = 20  # spread over SECONDS, then LAST_BURST more within the last second
LAST_BURST = 5
SECONDS = 10


def failing(jobs: int) -> frozenset[int]:
    """The map indexes whose jobs fail."""
    return frozenset(i for i in (7, 23, 41) if i < jobs)


def job_args(map_index: int, jobs: int) -> list[str]:
    """The job's arguments: every job prints the same numbered lines; a failing one then exits 1."""
    args = ["--gate", "{{ dag_run.conf['gate'] }}", "--lines", str(LINES), "--seconds", str(SECONDS)]
    args += ["--last-burst", str(LAST_BURST)]
    return [*args, "--fail"] if map_index in failing(jobs) else args


def many_dag(dag_id: str, jobs: int) -> DAG:
    with DAG(dag_id, schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
        _submit_all(jobs)
    return dag


def job_input(map_index: int, jobs: int) -> dict[str, Any]:
    """The job's trainingInput: the test trainer's ``gated`` module, with ``job_args``."""
    return {
        "runtimeVersion": "2.11",  # on Vertex AI: which pre-built container
        "packageUris": ["{{ dag_run.conf['package_uri'] }}"],
        "pythonModule": "aip_test_trainer.gated",
        "jobDir": "{{ dag_run.conf['job_dir'] }}/{{ ti.map_index }}",
        "args": job_args(map_index, jobs),
    }


def _submit_all(jobs: int) -> None:
    SubmitTrainingJobOperator.partial(
        task_id="train",
        project_id="{{ dag_run.conf['project_id'] }}",
        region="us-central1",
        deferrable=True,
        defer_after=0,  # every wait on the one triggerer: what this Dag measures
        poll_interval=POLL_INTERVAL,
        stream_logs=True,
        retries=0,
    ).expand(
        training_input=[job_input(i, jobs) for i in range(jobs)]
    )  # literal values: templates are rendered


dags = [many_dag(dag_id, jobs) for dag_id, jobs in SIZES.items()]

"""A task waiting on a job in the worker is killed: the job is cancelled, not left running.

Two waiters: the submit operator waiting on its own job, and a poke-mode sensor with
``cancel_on_kill=True`` waiting on a job a submit task started without waiting.

The task runs as Airflow runs it (``dag.test()`` drives the SDK's task runner, which installs
the SIGTERM handler that calls ``on_kill``) in a process of its own, and that process gets
SIGTERM, as the supervisor sends it when a user marks the task failed or the worker shuts down.
The jobs are Vertex AI's (the default backend); ml v1's cancel path is the same hook method.
The deferred case needs the real triggerer: tests/e2e/test_standalone.py.

``AIP_RELIABILITY_REPORT`` (a JSON file) receives the kill-to-CANCELLED time, a figure for
RELIABILITY.md, never an assertion.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.local_service import LocalService, StagedTrainer, log_entries
from tests.fixtures.reliability import collect_lines, start_dag_process
from tests.fixtures.vertex import vertex_jobs
from tests.fixtures.waiting import wait_until

# make test: the e2e kill test, which kills these two waiting modes and three more through
# Airflow's own supervisor (tests/e2e/test_standalone.py).
pytestmark = [pytest.mark.integration, pytest.mark.soak]
PROJECT = "kill-project"
POLL_INTERVAL = 2

DAG = """\
from datetime import datetime
from airflow.sdk import DAG
from airflow_aip.operators import SubmitTrainingJobOperator
from airflow_aip.sensors import TrainingJobSensor

with DAG({name!r}, schedule=None, start_date=datetime(2026, 1, 1)) as dag:
    submit = SubmitTrainingJobOperator(
        task_id="submit", project_id={project!r}, job_id_prefix={name!r},
        training_input={training_input!r}, deferrable=False, poll_interval={poll}, retries=0,
        wait_for_completion={waiter!r} == "submit",
    )
    if {waiter!r} == "sensor_poke":
        submit >> TrainingJobSensor(
            task_id="wait", project_id={project!r},
            job_id="{{{{ ti.xcom_pull(task_ids='submit')['job_id'] }}}}",
            mode="poke", poke_interval={poll}, cancel_on_kill=True, retries=0,
        )
"""


def job_of(service: LocalService, prefix: str) -> dict[str, Any] | None:
    """The one Vertex AI job whose displayName (our ID) starts with ``prefix``: ID, state, log ID."""
    found = vertex_jobs(service.url, PROJECT, prefix)
    assert len(found) <= 1
    return found[0] if found else None


def wait_while_running(
    condition: Callable[[], Any], what: str, process: subprocess.Popen[bytes], timeout: float = 300
) -> Any:
    """``condition()``'s first truthy answer; the task process ending before it fails the test at
    once. The bound is one to fail on rather than hang, never a timing assertion: beside the whole
    suite, the task's start and its job's environment took over 180 s."""

    def found_while_the_task_runs() -> Any:
        found = condition()
        if not found and process.poll() is not None:
            pytest.fail(f"the task process ended before {what} (exit {process.returncode})")
        return found

    return wait_until(found_while_the_task_runs, timeout, what)


@pytest.mark.parametrize("waiter", ["submit", "sensor_poke"])
def test_sigterm_to_a_task_waiting_in_the_worker_cancels_its_job(
    local_service: LocalService, staged_trainer: StagedTrainer, airflow_db: Path, tmp_path: Path, waiter: str
) -> None:
    name = f"aip_kill_{uuid.uuid4().hex[:8]}"
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    training_input = staged_trainer.training_input("sleep", ["--seconds", "600"])
    source = DAG.format(
        name=name, project=PROJECT, training_input=training_input, poll=POLL_INTERVAL, waiter=waiter
    )
    (bundle / f"{name}.py").write_text(source)
    env = {
        **os.environ,
        "STORAGE_EMULATOR_HOST": local_service.gcs_url,
        "CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM": local_service.url,
    }
    task = start_dag_process(bundle, name, env)
    lines: list[str] = []
    reader = threading.Thread(target=collect_lines, args=(task, lines), daemon=True)
    reader.start()
    try:
        running = wait_while_running(  # the waiter itself saw the job RUNNING: it is the task being run now
            lambda: (
                (job := job_of(local_service, name))
                and job["state"] == "RUNNING"
                and any(f"{job['jobId']} is RUNNING" in line for line in list(lines))
                and job
            ),
            "RUNNING job seen by the waiting task",
            task,
        )
        killed_at = time.monotonic()
        task.send_signal(signal.SIGTERM)
        ended = wait_while_running(
            lambda: (
                (job := job_of(local_service, name))
                and job["state"] in ("CANCELLED", "FAILED", "SUCCEEDED")
                and job
            ),
            "ended job",
            task,
        )
        cancel_seconds = round(time.monotonic() - killed_at, 2)
        task.wait(timeout=120)
        reader.join(timeout=30)
        output = "".join(lines)
    finally:
        if task.poll() is None:
            task.kill()
            task.wait()

    assert ended["jobId"] == running["jobId"]
    assert ended["state"] == "CANCELLED", ended
    assert "Cancelling training job" in output  # on_kill did it, not a later poll
    assert "RUN STATE: failed" in output
    service_lines = [
        entry["textPayload"]
        for entry in log_entries(
            local_service.url, PROJECT, ended["log_id"], 'resource.labels.task_name="service"'
        )
    ]
    assert any("cancel requested by the user" in line for line in service_lines)
    if os.environ.get("AIP_RELIABILITY_REPORT"):  # both waiters' times, in one report per run
        report = Path(os.environ["AIP_RELIABILITY_REPORT"])
        figure = json.loads(report.read_text()) if report.exists() and report.stat().st_size else {}
        figure["poll_interval"] = POLL_INTERVAL
        figure.setdefault("kill_to_cancelled_seconds", {})[waiter] = cancel_seconds
        report.write_text(json.dumps(figure))

"""A task waiting on its job in the worker is killed: the job is cancelled, not left running.

The task runs as Airflow runs it (``dag.test()`` drives the SDK's task runner, which installs
the SIGTERM handler that calls ``on_kill``) in a process of its own, and that process gets
SIGTERM, as the supervisor sends it when a user marks the task failed or the worker shuts down.
The deferred case needs the real triggerer: tests/e2e/test_standalone.py.

``AIP_RELIABILITY_REPORT`` (a JSON file) receives the kill-to-CANCELLED time, a figure for
RELIABILITY.md, never an assertion.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.local_service import LocalService, StagedTrainer, log_entries, ml_client

pytestmark = pytest.mark.integration
PROJECT = "kill-project"
POLL_INTERVAL = 2

DAG = """\
from datetime import datetime
from airflow.sdk import DAG
from airflow_aip.operators import SubmitTrainingJobOperator

with DAG({name!r}, schedule=None, start_date=datetime(2026, 1, 1)) as dag:
    SubmitTrainingJobOperator(
        task_id="submit", project_id={project!r}, job_id_prefix={name!r},
        training_input={training_input!r}, deferrable=False, poll_interval={poll}, retries=0,
    )
"""
RUN_DAG = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("killed_dag", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print("RUN STATE:", module.dag.test().state, flush=True)
"""


def start_dag_process(bundle: Path, name: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    config = [
        {
            "name": f"kill-{name}",
            "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
            "kwargs": {"path": str(bundle)},
        }
    ]
    env = {**env, "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps(config)}
    argv = [sys.executable, "-c", RUN_DAG, str(bundle / f"{name}.py")]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def job_of(service: LocalService, prefix: str) -> dict[str, Any] | None:
    listed = ml_client(service.url).projects().jobs().list(parent=f"projects/{PROJECT}").execute()
    jobs = [job for job in listed.get("jobs", []) if job["jobId"].startswith(prefix)]
    assert len(jobs) <= 1
    return jobs[0] if jobs else None


def wait_for(condition: Any, what: str, process: subprocess.Popen[bytes], timeout: float = 180) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := condition()):
        if process.poll() is not None:
            pytest.fail(f"the task process ended before {what}:\n{process.communicate()[0].decode()[-3000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {timeout}s")
        time.sleep(0.2)
    return found


def test_sigterm_to_a_task_waiting_in_the_worker_cancels_its_job(
    local_service: LocalService, staged_trainer: StagedTrainer, airflow_db: Path, tmp_path: Path
) -> None:
    name = f"aip_kill_{uuid.uuid4().hex[:8]}"
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    training_input = staged_trainer.training_input("sleep", ["--seconds", "600"])
    source = DAG.format(name=name, project=PROJECT, training_input=training_input, poll=POLL_INTERVAL)
    (bundle / f"{name}.py").write_text(source)
    env = {
        **os.environ,
        "STORAGE_EMULATOR_HOST": local_service.gcs_url,
        "CLOUDSDK_API_ENDPOINT_OVERRIDES_ML": local_service.url,
    }
    task = start_dag_process(bundle, name, env)
    try:
        running = wait_for(
            lambda: (job := job_of(local_service, name)) and job["state"] == "RUNNING" and job,
            "RUNNING job",
            task,
        )
        killed_at = time.monotonic()
        task.send_signal(signal.SIGTERM)
        ended = wait_for(
            lambda: (
                (job := job_of(local_service, name))
                and job["state"] in ("CANCELLED", "FAILED", "SUCCEEDED")
                and job
            ),
            "ended job",
            task,
        )
        cancel_seconds = round(time.monotonic() - killed_at, 2)
        output = task.communicate(timeout=120)[0].decode()
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
            local_service.url, PROJECT, ended["jobId"], 'resource.labels.task_name="service"'
        )
    ]
    assert any("cancel requested by the user" in line for line in service_lines)
    if os.environ.get("AIP_RELIABILITY_REPORT"):
        figure = {
            "kill": "worker",
            "poll_interval": POLL_INTERVAL,
            "kill_to_cancelled_seconds": cancel_seconds,
        }
        Path(os.environ["AIP_RELIABILITY_REPORT"]).write_text(json.dumps(figure))

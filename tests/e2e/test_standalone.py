"""The example pipeline, a user's kill and secret masking under a real scheduler and triggerer.

Runs are triggered and killed through Airflow's REST API, as a user would from the UI.
``AIP_RELIABILITY_REPORT`` (a JSON file) receives the kill-to-CANCELLED times, a figure for
RELIABILITY.md, never an assertion.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from airflow_aip import compat
from tests.e2e.conftest import AirflowStack, TuningRun
from tests.e2e.stack import FLAGGED_SECRET, KEY_SECRET, TOKEN_SECRET
from tests.fixtures.local_service import log_entries, storage_client
from tests.fixtures.vertex import fresh_project, job_args, vertex_jobs
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.e2e


def _job(stack: AirflowStack, project: str, job_id_prefix: str) -> dict[str, Any] | None:
    jobs = vertex_jobs(stack.ml_url, project, job_id_prefix)  # Vertex AI: the default backend
    assert len(jobs) <= 1, jobs
    return jobs[0] if jobs else None


def test_pipeline_defers_to_the_installed_trigger_and_exports(
    airflow_stack: AirflowStack, tuning_run: TuningRun
) -> None:
    stack = airflow_stack
    project, run_id, state = tuning_run.project, tuning_run.run_id, tuning_run.state

    assert state == "success", stack.task_states("aip_training_pipeline", run_id)
    jobs = vertex_jobs(stack.ml_url, project)
    assert "/hyperparameterTuningJobs/" in jobs[0]["name"]
    records = stack.task_records("aip_training_pipeline", run_id, "tune")
    events = [r.get("event", "") for r in records]
    # The task deferred; the triggerer ran TrainingJobTrigger (imported from the installed
    # package by its classpath) until the job ended; then the task resumed in a worker.
    assert "Pausing task as DEFERRED. " in events
    from_trigger = [
        r["event"] for r in records if r.get("logger") == "airflow_aip.triggers.training.TrainingJobTrigger"
    ]
    ended = f"Training job {jobs[0]['jobId']} is SUCCEEDED"
    assert ended in from_trigger
    # The task resumed after the trigger's last word (Airflow's "Trigger fired event" is not
    # asserted: under load the triggerer now and then closes the trigger's log before writing it).
    resumed = events[events.index(ended) :]
    assert [e for e in resumed if e.startswith("Best trial: ")], resumed
    assert "Pushing xcom" in resumed
    assert [job["state"] for job in jobs] == ["SUCCEEDED"]
    bucket = storage_client(stack.gcs_url).bucket(stack.bucket)
    manifests = [b.name for b in bucket.list_blobs(prefix="models/iris/") if b.name.endswith("manifest.json")]
    assert [name for name in manifests if jobs[0]["jobId"] in name]


# task -> (its state while it waits, the task whose job it waits on)
KILLED = {
    "wait_in_worker": ("running", "wait_in_worker"),
    "wait_deferred": ("deferred", "wait_deferred"),
    "sensor_poke": ("running", "submit_for_poke"),
    "sensor_deferred": ("deferred", "submit_for_deferred"),
    "sensor_reschedule": ("up_for_reschedule", "submit_for_reschedule"),
}


DEFERRED = {task_id for task_id, (state, _) in KILLED.items() if state == "deferred"}


def _in_state(stack: AirflowStack, run_id: str, task_id: str, state: str) -> bool:
    return stack.task_states("aip_e2e_kill", run_id)[task_id] == state


def _trigger_is_running(stack: AirflowStack, run_id: str, task_id: str) -> bool:
    records = stack.task_records("aip_e2e_kill", run_id, task_id)
    return any(r.get("logger") == "airflow_aip.triggers.training.TrainingJobTrigger" for r in records)


@pytest.fixture
def kill_project(airflow_stack: AirflowStack) -> Iterator[str]:
    """A project for the kill test; what it leaves running is cancelled: later tests need the service."""
    with fresh_project(airflow_stack.ml_url, "e2e-kill") as project:
        yield project


def test_user_kill_cancels_the_job_in_every_waiting_mode(
    airflow_stack: AirflowStack, kill_project: str
) -> None:
    """Worker, deferred, sensor poke/deferred, and a reschedule sensor killed between two pokes."""
    stack = airflow_stack
    project = kill_project
    conf = {"project_id": project, "package_uri": stack.package_uri, "job_dir": f"gs://{stack.bucket}/kill"}
    run_id = stack.trigger("aip_e2e_kill", conf)
    prefixes = {task_id: f"aip_e2e_kill_{owner}" for task_id, (_, owner) in KILLED.items()}

    def all_waiting() -> bool:
        states = stack.task_states("aip_e2e_kill", run_id)
        if any(states.get(task_id) != state for task_id, (state, _) in KILLED.items()):
            return False
        return all((job := _job(stack, project, p)) and job["state"] == "RUNNING" for p in prefixes.values())

    def progress() -> Any:
        jobs = {p: (_job(stack, project, p) or {}).get("state") for p in prefixes.values()}
        return stack.task_states("aip_e2e_kill", run_id), jobs

    wait_until(
        all_waiting,
        360,
        "running jobs with each waiting task in its waiting state",
        every=0.5,
        state=progress,
    )
    killed_at = {}
    for task_id, (state, _) in KILLED.items():
        # the reschedule sensor is killed between two pokes: no process of it exists then
        wait_until(
            partial(_in_state, stack, run_id, task_id, state),
            360,
            f"{task_id} {state}",
            every=0.5,
        )
        # a trigger the triggerer has not started yet is never told: see RELIABILITY.md, "Known
        # gaps" (without on_kill no trigger is told: nothing to wait for)
        if state == "deferred" and compat.trigger_on_kill():
            wait_until(
                partial(_trigger_is_running, stack, run_id, task_id),
                360,
                f"{task_id}'s trigger running",
                every=0.5,
            )
        path = f"dags/aip_e2e_kill/dagRuns/{run_id}/taskInstances/{task_id}"
        stack.api.patch(path, json={"new_state": "failed"}).raise_for_status()  # resent on a 5xx
        killed_at[task_id] = time.monotonic()

    # Without BaseTrigger.on_kill (Airflow < 3.3) a deferred kill cannot cancel: the task said so.
    uncancelled = {} if compat.trigger_on_kill() else {t: p for t, p in prefixes.items() if t in DEFERRED}
    cancelled = {task_id: prefix for task_id, prefix in prefixes.items() if task_id not in uncancelled}
    ended: dict[str, tuple[dict[str, Any], float]] = {}

    def all_ended() -> bool:  # every job watched at once, so each time is its own
        for task_id, prefix in cancelled.items():
            job = _job(stack, project, prefix)
            if task_id not in ended and job and job["state"] not in ("RUNNING", "CANCELLING"):
                ended[task_id] = job, round(time.monotonic() - killed_at[task_id], 2)
        return len(ended) == len(cancelled)

    wait_until(
        all_ended, 240, "end of every killed task's job", state=lambda: sorted(set(cancelled) - set(ended))
    )
    for task_id, prefix in uncancelled.items():  # the others' cancels have landed; these jobs run on
        assert (_job(stack, project, prefix) or {}).get("state") == "RUNNING", task_id
        events = [r.get("event", "") for r in stack.task_records("aip_e2e_kill", run_id, task_id)]
        assert [e for e in events if "no BaseTrigger.on_kill" in e], (task_id, events)
    for task_id, (job, _) in ended.items():
        assert job["state"] == "CANCELLED", (task_id, job)
        lines = [
            e["textPayload"]
            for e in log_entries(stack.ml_url, project, job["log_id"], 'resource.labels.task_name="service"')
        ]
        assert any("cancel requested by the user" in line for line in lines), (task_id, lines)
    cancelled_after = {task_id: seconds for task_id, (_, seconds) in ended.items()}
    assert stack.wait_for_run("aip_e2e_kill", run_id) == "failed"
    assert stack.task_states("aip_e2e_kill", run_id)["cancel_reschedule_job"] == "success"
    if os.environ.get("AIP_RELIABILITY_REPORT"):
        figure = {
            "poll_interval": 2,
            "reschedule_poke_interval": 10,
            "kill_to_cancelled_seconds": cancelled_after,
        }
        Path(os.environ["AIP_RELIABILITY_REPORT"]).write_text(json.dumps(figure))


@pytest.fixture(scope="module")
def secrets_run(airflow_stack: AirflowStack) -> tuple[str, str]:
    """One run of aip_e2e_secrets: (run id, project); its jobs got the secrets in their args."""
    stack = airflow_stack
    project = f"e2e-secrets-{uuid.uuid4().hex[:6]}"
    conf = {
        "project_id": project,
        "package_uri": stack.package_uri,
        "job_dir": f"gs://{stack.bucket}/secrets",
    }
    run_id = stack.trigger("aip_e2e_secrets", conf)
    assert stack.wait_for_run("aip_e2e_secrets", run_id) == "success", stack.task_states(
        "aip_e2e_secrets", run_id
    )
    jobs = vertex_jobs(stack.ml_url, project)
    assert len(jobs) == 2
    for job in jobs:  # the secrets did reach the jobs, so their absence from the logs means something
        assert any(TOKEN_SECRET in arg and FLAGGED_SECRET in arg for arg in job_args(job["job"]))
    return run_id, project


@pytest.mark.parametrize(
    "task_id",
    [
        "submit_in_worker",
        "export_submit_in_worker",
        "export_submit_deferred",
        "submit_deferred",
    ],
)
def test_secrets_are_masked_in_the_task_logs_airflow_stores(
    airflow_stack: AirflowStack, secrets_run: tuple[str, str], task_id: str
) -> None:
    run_id, _ = secrets_run
    log = airflow_stack.task_log("aip_e2e_secrets", run_id, task_id)
    if task_id.startswith("submit"):  # the job's output, with the secrets it printed, was relayed
        assert "training with message=" in log
        # The trainer's FutureWarning, ERROR to Google as all stderr, is a warning here: no red line.
        records = airflow_stack.task_records("aip_e2e_secrets", run_id, task_id)
        warned = [r for r in records if "FutureWarning: a harmless future warning" in str(r.get("event"))]
        assert [r.get("level") for r in warned] == ["warning"], warned
        assert [r for r in records if r.get("level") in ("error", "critical")] == []
    else:
        assert "Exported" in log, log[-2000:]
    for secret in (TOKEN_SECRET, FLAGGED_SECRET, KEY_SECRET):
        assert secret not in log, secret

"""A user kills a capacity ladder's task while it is deferred on its second rung.

``aip_e2e_ladder_kill`` (tests/stack_dags/aip_ladder_kill.py): rung 1 a Flex-Start A100 that
never comes (set here through ``POST /_capacity``), so after its 15 s wait its job fails with
code 8 and the task climbs and defers again on rung 2's long job. Once the triggerer watches rung
2's job, a user marks the task failed through the REST API: the trigger's ``on_kill`` cancels
rung 2's job; rung 1's job stays FAILED and no third job is created.

``AIP_RELIABILITY_REPORT`` (a JSON file) receives the kill-to-CANCELLED time, a figure for
RELIABILITY.md, never an assertion.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import AirflowStack
from tests.fixtures.local_service import log_entries
from tests.fixtures.vertex import fresh_project, vertex_jobs
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.e2e
DAG_ID = "aip_e2e_ladder_kill"
TASK_ID = "wait_deferred"
TRIGGER_LOGGER = "airflow_aip.triggers.training.TrainingJobTrigger"
STOCKOUTS = ["us-central1:NVIDIA_TESLA_A100"]  # no other e2e test asks for an A100


@pytest.fixture
def ladder_project(airflow_stack: AirflowStack) -> Iterator[str]:
    """The region out of A100s, the DAG parsed, and a project whose leftover jobs are cancelled."""
    stack = airflow_stack
    httpx.post(
        f"{stack.ml_url.rstrip('/')}/_capacity",
        # added, not set: tests running beside this one on the stack keep their own stockouts
        json={"stockoutsAdded": STOCKOUTS, "flexStartCapacityAfter": None},
        timeout=30,
    ).raise_for_status()
    wait_until(
        lambda: stack.api.get(f"dags/{DAG_ID}").status_code == 200,
        360,
        f"{DAG_ID} parsed",
        state=lambda: stack.log,
    )
    with fresh_project(stack.ml_url, "e2e-ladder") as project:
        yield project


def test_user_kill_of_a_deferred_ladder_cancels_the_current_rungs_job(
    airflow_stack: AirflowStack, ladder_project: str
) -> None:
    stack, project = airflow_stack, ladder_project
    conf = {"project_id": project, "package_uri": stack.package_uri, "job_dir": f"gs://{stack.bucket}/ladder"}
    run_id = stack.trigger(DAG_ID, conf)

    def rungs() -> list[tuple[str, str]]:
        return [
            (job["job"]["labels"]["aip_rung"], job["state"]) for job in vertex_jobs(stack.ml_url, project)
        ]

    def progress() -> Any:
        return stack.task_states(DAG_ID, run_id), rungs()

    def deferred_on_running_rung_two() -> dict[str, Any] | None:
        if stack.task_states(DAG_ID, run_id).get(TASK_ID) != "deferred":
            return None
        jobs = vertex_jobs(stack.ml_url, project)
        labels = [job["job"]["labels"]["aip_rung"] for job in jobs]
        return jobs[1] if labels == ["a100", "cpu"] and jobs[1]["state"] == "RUNNING" else None

    rung_two = wait_until(
        deferred_on_running_rung_two, 360, "task deferred on rung 2's RUNNING job", every=0.5, state=progress
    )
    # Killed only once the triggerer watches rung 2's job (the known gap: a trigger not yet started
    # is never told), which it says in the task's log.
    wait_until(
        lambda: any(
            r.get("logger") == TRIGGER_LOGGER
            and f"Training job {rung_two['jobId']} is RUNNING" in r.get("event", "")
            for r in stack.task_records(DAG_ID, run_id, TASK_ID)
        ),
        360,
        "trigger watching rung 2's RUNNING job",
        every=0.5,
        state=progress,
    )
    path = f"dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{TASK_ID}"
    stack.api.patch(path, json={"new_state": "failed"}).raise_for_status()
    killed_at = time.monotonic()

    def rung_two_ended() -> dict[str, Any] | None:
        job = next(j for j in vertex_jobs(stack.ml_url, project) if j["jobId"] == rung_two["jobId"])
        return job if job["state"] not in ("RUNNING", "CANCELLING") else None

    ended = wait_until(rung_two_ended, 360, "end of rung 2's job after the kill", every=0.5, state=progress)
    cancelled_after = round(time.monotonic() - killed_at, 2)
    assert stack.wait_for_run(DAG_ID, run_id) == "failed"

    assert ended["state"] == "CANCELLED", ended
    lines = [
        e["textPayload"]
        for e in log_entries(stack.ml_url, project, ended["log_id"], 'resource.labels.task_name="service"')
    ]
    assert any("cancel requested by the user" in line for line in lines), lines
    jobs = vertex_jobs(stack.ml_url, project)  # after the run ended: nothing climbed on the cancel
    assert [(j["job"]["labels"]["aip_rung"], j["state"]) for j in jobs] == [
        ("a100", "FAILED"),
        ("cpu", "CANCELLED"),
    ]
    assert jobs[0]["job"]["error"]["code"] == 8
    events = [r.get("event", "") for r in stack.task_records(DAG_ID, run_id, TASK_ID)]
    assert f"Deferred task killed: cancelling training job {rung_two['jobId']}" in events
    if os.environ.get("AIP_RELIABILITY_REPORT"):
        report = Path(os.environ["AIP_RELIABILITY_REPORT"])
        figure = json.loads(report.read_text()) if report.exists() and report.stat().st_size else {}
        figure["ladder_kill_to_cancelled_seconds"] = cancelled_after
        report.write_text(json.dumps(figure))

"""A retry adopts the job of an earlier try; a user's clear trains anew, unless the job still runs.

``aip_e2e_clear`` (tests/stack_dags/aip_e2e_clear.py) under the real scheduler; the clear is the
REST API's, as the UI's Clear button sends it. How a task tells the two apart is read from
Airflow's try numbers (``airflow_aip.jobs.adoption.Tries``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_aip.jobs import Owner
from tests.e2e.conftest import AirflowStack
from tests.fixtures.vertex import fresh_project, vertex_jobs
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.e2e
DAG_ID = "aip_e2e_clear"
EARLIER_TRY, BEFORE_CLEAR = Owner.EARLIER_TRY.value, Owner.BEFORE_CLEAR.value


@pytest.fixture
def project(airflow_stack: AirflowStack) -> Iterator[str]:
    with fresh_project(airflow_stack.ml_url, "e2e-clear") as project:  # cancels what is left running
        yield project


def _jobs(stack: AirflowStack, project: str, task_id: str) -> list[dict[str, Any]]:
    return vertex_jobs(stack.ml_url, project, f"aip_e2e_clear_{task_id}_")


def _log(stack: AirflowStack, run_id: str, task_id: str, try_number: int) -> str:
    return "\n".join(json.dumps(r) for r in stack.task_records(DAG_ID, run_id, task_id, try_number))


def test_a_retry_adopts_and_a_clear_trains_anew_unless_the_job_still_runs(
    airflow_stack: AirflowStack, project: str
) -> None:
    stack = airflow_stack
    wait_until(lambda: stack.api.get(f"dags/{DAG_ID}").status_code == 200, 360, f"{DAG_ID} parsed")
    run_id = stack.trigger(
        DAG_ID,
        {"project_id": project, "package_uri": stack.package_uri, "job_dir": f"gs://{stack.bucket}/clear"},
    )
    assert stack.wait_for_run(DAG_ID, run_id, timeout=420) == "success", stack.task_states(DAG_ID, run_id)

    # The retry: try 1 timed out while its job ran (cancel_on_kill=False), try 2 adopted that job.
    (retried,) = _jobs(stack, project, "retry")
    assert retried["state"] == "SUCCEEDED"
    assert stack.task_instance(DAG_ID, run_id, "retry")["try_number"] == 2
    adopted = f"exists, made by {EARLIER_TRY}: adopt"  # RUNNING, or SUCCEEDED if try 2 started late
    assert f"Training job {retried['jobId']} (" in _log(stack, run_id, "retry", 2)
    assert adopted in _log(stack, run_id, "retry", 2)

    before = {task: _jobs(stack, project, task) for task in ("train", "fire", "always")}
    assert [job["state"] for job in before["train"]] == ["SUCCEEDED"]
    assert [job["state"] for job in before["fire"]] == ["RUNNING"]
    cleared = ["train", "fire", "always"]
    body = {"dry_run": False, "dag_run_id": run_id, "task_ids": cleared, "only_failed": False}
    stack.api.post(f"dags/{DAG_ID}/clearTaskInstances", json=body).raise_for_status()
    wait_until(
        lambda: (
            all(stack.task_instance(DAG_ID, run_id, t)["try_number"] == 2 for t in cleared)
            and stack.run_state(DAG_ID, run_id) == "success"
        ),
        420,
        "the cleared tasks' second tries",
        every=1,
        state=lambda: stack.task_states(DAG_ID, run_id),
    )

    # The clear of a task whose job SUCCEEDED: a new job, under the next attempt ID.
    trained = _jobs(stack, project, "train")
    assert [job["state"] for job in trained] == ["SUCCEEDED", "SUCCEEDED"]
    first, second = (
        before["train"][0]["jobId"],
        next(j["jobId"] for j in trained if j["jobId"] != before["train"][0]["jobId"]),
    )
    assert second == f"{first}_r2"
    assert [job["job"]["labels"]["airflow-try-number"] for job in trained] == ["1", "2"]
    assert f"Training job {first} (SUCCEEDED) exists, made by {BEFORE_CLEAR}: next attempt" in _log(
        stack, run_id, "train", 2
    )
    assert stack.xcom(DAG_ID, run_id, "train")["job_id"] == second

    # The clear of a task whose job still runs: adopted, nothing new.
    assert [job["jobId"] for job in _jobs(stack, project, "fire")] == [before["fire"][0]["jobId"]]
    assert f"made by {EARLIER_TRY}: adopt" in _log(stack, run_id, "fire", 2)

    # always_adopt: the clear adopts the SUCCEEDED job, as before this rule.
    assert [job["jobId"] for job in _jobs(stack, project, "always")] == [before["always"][0]["jobId"]]
    assert stack.xcom(DAG_ID, run_id, "always")["job_id"] == before["always"][0]["jobId"]

"""The live Training job tab in a real Airflow: a running job shown as it is now, and cancelled from the tab.

``aip_e2e_kill``'s ``wait_deferred`` submits a 10-minute job and defers on it. While it waits:
a viewer reads the job live (RUNNING) over HTTP, but is offered no "Cancel job" and gets 403
from the cancel endpoint; an admin opens the tab in Chromium, sees the job RUNNING, and cancels
it from the tab (after the page's own confirmation). The job ends CANCELLED, the task fails, its
log says who cancelled it, and the open tab follows the task to its end without a reload.

``aip_e2e_tuning``'s slow study (6 trials, 2 at a time) shows its trials on the tab as they
finish, while the task is deferred; cancelled from the tab, the job and its finished trials
stay on it after the task failed, and Browse's state filter follows the job's state.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.e2e.conftest import AirflowStack
from tests.fixtures.browser import open_tab
from tests.fixtures.vertex import cancel_vertex, vertex_jobs
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.e2e
DAG_ID, TASK_ID = "aip_e2e_kill", "wait_deferred"
TRIGGER_LOGGER = "airflow_aip.triggers.training.TrainingJobTrigger"
SAME_SITE = {"X-Requested-With": "aip"}


@pytest.fixture
def waiting_run(airflow_stack: AirflowStack) -> Iterator[tuple[str, str]]:
    """A run of ``aip_e2e_kill`` with ``wait_deferred`` deferred on its RUNNING job; all cleaned up after."""
    stack = airflow_stack
    project = f"e2e-live-{uuid.uuid4().hex[:6]}"
    conf = {"project_id": project, "package_uri": stack.package_uri, "job_dir": f"gs://{stack.bucket}/live"}
    run_id = stack.trigger(DAG_ID, conf)
    prefix = f"{DAG_ID}_{TASK_ID}"

    def job() -> dict[str, Any] | None:
        jobs = vertex_jobs(stack.ml_url, project, prefix)
        return jobs[-1] if jobs else None

    def waiting() -> bool:
        if stack.task_states(DAG_ID, run_id).get(TASK_ID) != "deferred":
            return False
        records = stack.task_records(DAG_ID, run_id, TASK_ID)
        found = job()
        return (
            any(r.get("logger") == TRIGGER_LOGGER for r in records)
            and found is not None
            and found["state"] == "RUNNING"
        )

    try:
        wait_until(
            waiting,
            360,
            f"{TASK_ID} deferred on a RUNNING job",
            every=0.5,
            state=lambda: (stack.task_states(DAG_ID, run_id), job()),
        )
        yield run_id, project
    finally:  # the run's other tasks wait on 10-minute jobs: fail the run, cancel what is left
        stack.api.patch(f"dags/{DAG_ID}/dagRuns/{run_id}", json={"state": "failed"})
        from googleapiclient.errors import HttpError

        for leftover in vertex_jobs(stack.ml_url, project):
            if leftover["state"] in ("QUEUED", "PREPARING", "RUNNING"):
                with contextlib.suppress(HttpError):  # the failed run's kill may cancel it first (400)
                    cancel_vertex(stack.ml_url, leftover["name"])


def _query(run_id: str) -> str:
    query = {"dag_id": DAG_ID, "run_id": run_id, "task_id": TASK_ID, "map_index": "-1"}
    return "&".join(f"{k}={quote(v, safe='')}" for k, v in query.items())


def test_a_viewer_sees_the_job_live_but_may_not_cancel_it(
    airflow_stack: AirflowStack, waiting_run: tuple[str, str]
) -> None:
    stack, (run_id, _) = airflow_stack, waiting_run
    token = stack.token("viewer")

    with httpx.Client(base_url=stack.base_url, timeout=30, cookies={"_token": token}) as http:
        data = http.get(f"/aip/api/task?{_query(run_id)}").raise_for_status().json()
        refused = http.post(f"/aip/api/task/cancel?{_query(run_id)}", headers=SAME_SITE)

    assert (data["task_state"], data["live"], data["can_cancel"]) == ("deferred", True, False)
    assert data["job"]["state"] == "RUNNING"
    assert data["refresh_s"] == 5.0
    assert refused.status_code == 403


def test_an_admin_cancels_the_job_from_the_tab(
    browser: Any, airflow_stack: AirflowStack, waiting_run: tuple[str, str]
) -> None:
    from playwright.sync_api import expect

    stack, (run_id, project) = airflow_stack, waiting_run
    admin = stack.token("admin")
    with httpx.Client(base_url=stack.base_url, timeout=30, cookies={"_token": admin}) as http:
        # the page's header is the CSRF guard: the same request without it is refused
        assert http.post(f"/aip/api/task/cancel?{_query(run_id)}").status_code == 403

    context = browser.new_context(base_url=stack.base_url, viewport={"width": 1400, "height": 1300})
    errors: list[Any] = []
    page = context.new_page()
    page.on("pageerror", lambda error: errors.append(error))
    try:
        frame = open_tab(page, stack, DAG_ID, run_id, TASK_ID)

        expect(frame.locator("section.job .state")).to_have_text("RUNNING", timeout=60_000)
        expect(frame.locator("p.live")).to_be_visible()
        frame.get_by_role("button", name="Cancel job").click()
        frame.get_by_role("button", name="Yes, cancel the job").click()

        # the open tab follows the task to its end, without a reload
        expect(frame.locator("p.cancelled-by")).to_contain_text("by admin", timeout=60_000)
        # the task ended: no more refreshes (while the cancelled job's task resumes, "p.held" says so)
        expect(frame.locator("p.live, p.held")).to_have_count(0, timeout=120_000)
        expect(frame.get_by_role("button", name="Cancel job")).to_have_count(0)
        expect(frame.locator("section.job .state")).to_have_text("CANCELLED")  # as the task left it
        expect(frame.locator("p.ended-because")).to_contain_text("ended CANCELLED")
    finally:
        context.close()

    assert stack.task_states(DAG_ID, run_id)[TASK_ID] == "failed"
    (job,) = vertex_jobs(stack.ml_url, project, f"{DAG_ID}_{TASK_ID}")
    assert job["state"] == "CANCELLED"
    log = stack.task_log(DAG_ID, run_id, TASK_ID)
    assert f"Job {job['jobId']} was cancelled from the Training job tab by admin at " in log
    assert "CANCELLED" in log  # the task fails as a cancelled job fails
    assert errors == []


@pytest.mark.soak  # a slow tuning job of its own; make test: the viewer and admin tests above
def test_the_tab_shows_trials_as_they_finish_and_keeps_them_once_cancelled(
    browser: Any, airflow_stack: AirflowStack
) -> None:
    """6 trials, 2 at a time, 8 s each: RUNNING, then finished trials, before the task ends; no reload.

    Browse's RUNNING filter lists the job while it runs. Then the job is cancelled from the tab:
    the task fails, and the tab, opened anew, still shows the cancelled job, its finished trials
    and why the wait ended; Browse's CANCELLED filter lists it.
    """
    from playwright.sync_api import expect

    stack, dag_id = airflow_stack, "aip_e2e_tuning"
    project = f"e2e-trials-{uuid.uuid4().hex[:6]}"
    conf = {"project_id": project, "package_uri": stack.package_uri, "job_dir": f"gs://{stack.bucket}/trials"}
    run_id = stack.trigger(dag_id, conf)
    context = browser.new_context(base_url=stack.base_url, viewport={"width": 1400, "height": 1300})
    page = context.new_page()
    viewer = httpx.Client(base_url=stack.base_url, timeout=30, cookies={"_token": stack.token("viewer")})

    def browse(state: str) -> list[str]:
        listed = viewer.get("/aip/api/jobs", params={"dag_id": dag_id, "state": state}).raise_for_status()
        return [job["run_id"] for job in listed.json()["jobs"]]

    try:
        frame = open_tab(page, stack, dag_id, run_id, "tune")
        expect(frame.locator("section.job .state")).to_have_text("RUNNING", timeout=120_000)
        document = page.wait_for_selector("iframe[title='Training job']").content_frame()
        assert document is not None
        document.evaluate("window.aipLoadedOnce = true")  # gone if the frame reloads
        finished = frame.locator("table.trials tbody tr", has_text="SUCCEEDED")
        wait_until(
            lambda: finished.count() >= 2,
            180,
            "two finished trials on the tab",
            every=0.5,
            state=lambda: (stack.task_states(dag_id, run_id), finished.count()),
        )
        assert stack.task_states(dag_id, run_id)["tune"] == "deferred"  # seen before the task ended
        assert document.evaluate("window.aipLoadedOnce") is True  # the page grew in place
        assert run_id in browse("RUNNING")  # the job's state now, though its task has no summary yet
        assert run_id not in browse("QUEUED")

        frame.get_by_role("button", name="Cancel job").click()
        frame.get_by_role("button", name="Yes, cancel the job").click()
        wait_until(
            lambda: stack.task_states(dag_id, run_id)["tune"] == "failed",
            360,
            "the cancelled job's task to fail",
            every=0.5,
            state=lambda: stack.task_states(dag_id, run_id),
        )

        frame = open_tab(page, stack, dag_id, run_id, "tune")  # anew: what the ended task left
        expect(frame.locator("section.job .state")).to_have_text("CANCELLED", timeout=60_000)
        expect(frame.locator("p.ended-because")).to_contain_text("ended CANCELLED")
        expect(frame.locator("p.live")).to_have_count(0)
        rows = frame.locator("table.trials tbody tr", has_text="SUCCEEDED")
        expect(rows.first).to_be_visible()
        assert rows.count() >= 2
        expect(frame.locator("table.trials tr.best")).to_have_count(1)
        assert run_id in browse("CANCELLED")
        assert run_id not in browse("RUNNING")
    finally:
        viewer.close()
        context.close()

"""A held task's tab says why the task still waits, and offers no Cancel for a job that has ended.

``aip_e2e_race``'s ``succeed`` task defers on a job that ends a few seconds later; its trigger
holds that ending until ``[aip] deferral_hold`` has passed since the deferral (apache/airflow#67287).
Meanwhile the Training job tab, opened as an admin (who may cancel a running job), shows the job
SUCCEEDED, says when the task resumes and why, and has no Cancel button; then, without a reload,
it follows the task to its end.

The held stretch lasts the hold less the job's few seconds: the test watches the tab's own API
(what the tab draws) and, as soon as it says the task is held, reloads the tab once and reads
it, rather than wait up to a 5 s refresh. On a loaded machine the job may end before the task
even defers (the operator reads it once more first: no deferral, nothing held); the run is then
tried again, up to 3 times.
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.e2e.conftest import AirflowStack
from tests.fixtures.browser import open_tab
from tests.fixtures.race import leave_region_without_a100s
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.e2e
DAG_ID, TASK_ID = "aip_e2e_race", "succeed"
ATTEMPTS = 3
# One look at the frame's document: the job's state, the held line, a Cancel button, from one render.
SNAPSHOT = """() => [
  document.querySelector('section.job .state')?.textContent ?? null,
  document.querySelector('p.held')?.textContent ?? null,
  document.querySelectorAll('#cancel-job, #confirm-cancel').length,
]"""


def _held_seconds(http: httpx.Client, run_id: str) -> tuple[str, float] | None:
    """("held", seconds left) as the tab's API says it, ("ended", 0) once the task ended, else None."""
    query = {"dag_id": DAG_ID, "run_id": run_id, "task_id": TASK_ID, "map_index": "-1"}
    data = http.get("/aip/api/task", params=query).raise_for_status().json()
    held = data.get("held") or {}
    if held.get("until") and (held.get("seconds_left") or 0) >= 2:
        return "held", float(held["seconds_left"])
    return ("ended", 0.0) if data["task_state"] in ("success", "failed") else None


def _held_render(
    page: Any, stack: AirflowStack, http: httpx.Client, conf: dict[str, Any], first: bool
) -> tuple[str, list[Any]]:
    """One run: its tab, read while the task is held; an empty render when it never was."""
    run_id = stack.trigger(DAG_ID, {**conf, "project_id": f"e2e-held-{uuid.uuid4().hex[:6]}"})
    if first:
        open_tab(page, stack, DAG_ID, run_id, TASK_ID)  # signs in
    else:
        page.goto(f"/dags/{DAG_ID}/runs/{quote(run_id, safe='')}/tasks/{TASK_ID}")
        page.get_by_role("link", name="Training job", exact=True).click()
    what, left = wait_until(lambda: _held_seconds(http, run_id), 300, "the task held, or its end", every=0.3)
    if what == "ended":
        return run_id, []  # the job ended before the deferral: nothing was held
    document = page.wait_for_selector("iframe[title='Training job']").content_frame()
    assert document is not None
    document.evaluate("location.reload()")  # the tab reads it now, not at its next 5 s refresh
    page.wait_for_timeout(200)
    document = page.wait_for_selector("iframe[title='Training job']").content_frame()
    assert document is not None

    def drawn() -> list[Any] | None:
        from playwright.sync_api import Error as PlaywrightError

        try:
            seen = document.evaluate(SNAPSHOT)
        except PlaywrightError as err:  # the reload is still navigating: look again
            if "context was destroyed" not in str(err):
                raise
            return None
        return seen if seen[1] else None

    return run_id, wait_until(drawn, left, "the held line on the tab", every=0.2)


def test_a_held_tasks_tab_says_why_it_waits_and_offers_no_cancel(
    browser: Any, airflow_stack: AirflowStack
) -> None:
    from playwright.sync_api import expect

    stack = airflow_stack
    leave_region_without_a100s(stack.ml_url)  # the Dag's climb task: as the race test leaves it
    conf = {"package_uri": stack.package_uri, "job_dir": f"gs://{stack.bucket}/held", "seconds": 3}
    context = browser.new_context(base_url=stack.base_url, viewport={"width": 1280, "height": 800})
    page = context.new_page()
    http = httpx.Client(base_url=stack.base_url, timeout=30, cookies={"_token": stack.token("admin")})
    try:
        for attempt in range(ATTEMPTS):
            run_id, render = _held_render(page, stack, http, conf, first=attempt == 0)
            if render:
                break
        assert render, f"in {ATTEMPTS} runs the job always ended before its task deferred"
        state, line, cancels = render
        assert state == "SUCCEEDED"
        assert line.startswith("The job ended; the task resumes at ")
        assert "because Airflow must read the task's deferral" in line
        assert "apache/airflow#67287" in line
        assert cancels == 0  # an admin, who may cancel a running job, is offered none for an ended one

        assert stack.wait_for_run(DAG_ID, run_id) in ("success", "failed")
        assert stack.task_states(DAG_ID, run_id)[TASK_ID] == "success"
        frame = page.frame_locator("iframe[title='Training job']")
        expect(frame.locator("p.held")).to_have_count(0, timeout=60_000)  # followed without a reload
        expect(frame.locator("section.job .state")).to_have_text("SUCCEEDED")
        expect(frame.get_by_role("button", name="Cancel job")).to_have_count(0)
    finally:
        http.close()
        context.close()

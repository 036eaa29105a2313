"""A held task's tab says why the task still waits, and offers no Cancel for a job that has ended.

``aip_e2e_race``'s ``succeed`` task defers on a job that ends about a second later; its trigger
holds that ending until ``[aip] deferral_hold`` has passed since the deferral (apache/airflow#67287).
Meanwhile the Training job tab, opened as an admin (who may cancel a running job), shows the job
SUCCEEDED, says when the task resumes and why, and has no Cancel button; then, without a reload,
it follows the task to its end.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.e2e.conftest import AirflowStack
from tests.fixtures.browser import open_tab
from tests.fixtures.race import leave_region_without_a100s
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.e2e
DAG_ID, TASK_ID = "aip_e2e_race", "succeed"
# One look at the frame's document: the job's state, the held line, a Cancel button, from one render.
SNAPSHOT = """() => [
  document.querySelector('section.job .state')?.textContent ?? null,
  document.querySelector('p.held')?.textContent ?? null,
  document.querySelectorAll('#cancel-job, #confirm-cancel').length,
]"""


def test_a_held_tasks_tab_says_why_it_waits_and_offers_no_cancel(
    browser: Any, airflow_stack: AirflowStack
) -> None:
    from playwright.sync_api import expect

    stack = airflow_stack
    leave_region_without_a100s(stack.ml_url)  # the Dag's climb task: as the race test leaves it
    conf = {
        "package_uri": stack.package_uri,
        "job_dir": f"gs://{stack.bucket}/held",
        "project_id": f"e2e-held-{uuid.uuid4().hex[:6]}",
        "seconds": 0.5,
    }
    run_id = stack.trigger(DAG_ID, conf)
    context = browser.new_context(base_url=stack.base_url, viewport={"width": 1280, "height": 800})
    page = context.new_page()
    try:
        frame = open_tab(page, stack, DAG_ID, run_id, TASK_ID)
        document = page.wait_for_selector("iframe[title='Training job']").content_frame()
        assert document is not None

        def held() -> list[Any] | None:
            seen = document.evaluate(SNAPSHOT)
            return seen if seen[1] and "resumes at" in seen[1] else None

        state, line, cancels = wait_until(
            held,
            300,
            "the tab saying the task is held",
            every=0.5,
            state=lambda: (stack.task_states(DAG_ID, run_id), document.evaluate(SNAPSHOT)),
        )
        assert state == "SUCCEEDED"
        assert line.startswith("The job ended; the task resumes at ")
        assert "because Airflow must read the task's deferral" in line
        assert "apache/airflow#67287" in line
        assert cancels == 0  # an admin, who may cancel a running job, is offered none for an ended one
        assert stack.task_states(DAG_ID, run_id)[TASK_ID] == "deferred"

        assert stack.wait_for_run(DAG_ID, run_id) in ("success", "failed")
        assert stack.task_states(DAG_ID, run_id)[TASK_ID] == "success"
        expect(frame.locator("p.held")).to_have_count(0, timeout=60_000)  # followed without a reload
        expect(frame.locator("section.job .state")).to_have_text("SUCCEEDED")
        expect(frame.get_by_role("button", name="Cancel job")).to_have_count(0)
    finally:
        context.close()

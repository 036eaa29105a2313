"""The capacity ladder seen working: a climb asked for from the example pipeline's form, watched on the tab.

``aip_training_pipeline`` is triggered with its form's ``local_stockout`` set to SPOT (the conf a
form submits, through the REST API), in a region of this test's own (the stockout is region-wide,
and other tests' runs use us-central1). Its ``local_capacity`` task tells the local service that
the region has no Spot VMs; the ``tune`` task's Spot rung then fails for the stockout, and the
ladder climbs to STANDARD. While that job runs, the live Training job tab says which rung and
placement it is on; once the run ended, the ladder table lists both rungs with their part, and
the run tab and Browse say the rung too.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import AirflowStack
from tests.fixtures.browser import open_tab
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.e2e
DAG_ID = "aip_training_pipeline"
REGION = "us-west1"  # a region no other e2e test uses: the stockout stays out of their runs
CLIMBED = "rung 2 of 2 · STANDARD"
# One look at the frame's document: the live line and the rung line, from the same render.
SNAPSHOT = "() => ['p.live', 'p.rung'].map((s) => document.querySelector(s)?.textContent ?? null)"


def _restock(stack: AirflowStack) -> None:
    """The region's Spot VMs back (the stack's service runs with --fault-admin)."""
    with httpx.Client(base_url=stack.ml_url, timeout=30) as http:
        stockouts = http.get("_capacity").raise_for_status().json()["stockouts"]
        kept = [s for s in stockouts if not s.startswith(f"{REGION}:")]
        http.post("_capacity", json={"stockouts": kept}).raise_for_status()


def test_a_spot_stockout_from_the_form_climbs_to_standard_and_the_tab_shows_each_rung(
    browser: Any, airflow_stack: AirflowStack
) -> None:
    from playwright.sync_api import expect

    stack = airflow_stack
    project = f"e2e-ladder-{uuid.uuid4().hex[:6]}"
    conf = {
        "bucket": stack.bucket,
        "project_id": project,
        "region": REGION,
        "max_trials": 6,
        "max_parallel_trials": 1,  # one trial at a time: the STANDARD job runs long enough to be seen
        "local_stockout": "SPOT",
    }
    run_id = stack.trigger(DAG_ID, conf)
    context = browser.new_context(base_url=stack.base_url, viewport={"width": 1400, "height": 1300})
    page = context.new_page()
    try:
        frame = open_tab(page, stack, DAG_ID, run_id, "tune")
        document = page.wait_for_selector("iframe[title='Training job']").content_frame()
        assert document is not None

        def climbed() -> tuple[str | None, str] | None:
            live, rung = document.evaluate(SNAPSHOT)
            return (live, rung) if rung and CLIMBED in rung else None

        live, rung = wait_until(
            climbed,
            300,
            "the STANDARD rung's job on the live tab",
            every=0.5,
            state=lambda: (stack.task_states(DAG_ID, run_id), document.evaluate(SNAPSHOT)),
        )
        assert live is not None, rung  # the tab was live: the job ran, its task waited
        assert live.startswith("Live: read from the job's API")
        assert rung == f"Capacity ladder: {CLIMBED}"

        assert stack.wait_for_run(DAG_ID, run_id) == "success", stack.task_states(DAG_ID, run_id)
        # The service's whole stockout list: other e2e tests may hold stockouts of their own regions.
        assert f"{REGION}:SPOT" in stack.xcom(DAG_ID, run_id, "local_capacity")
        frame = open_tab(page, stack, DAG_ID, run_id, "tune")  # anew: the summary the task stored
        rows = frame.locator("table.ladder tbody tr")
        expect(rows).to_have_count(2, timeout=60_000)
        spot, standard = rows.nth(0), rows.nth(1)
        expect(spot).to_have_attribute("data-status", "out of capacity")
        expect(spot).to_contain_text("stockout")
        expect(standard).to_have_attribute("data-status", "ran")
        expect(standard).to_have_attribute("aria-current", "true")
        expect(frame.locator("table.ladder caption")).to_contain_text("2 rungs, tried in order")
        expect(frame.locator("p.rung")).to_have_text(f"Capacity ladder: {CLIMBED}")

        with httpx.Client(
            base_url=stack.base_url, timeout=30, cookies={"_token": stack.token("viewer")}
        ) as http:
            ran = http.get("/aip/api/run", params={"dag_id": DAG_ID, "run_id": run_id}).raise_for_status()
            listed = http.get("/aip/api/jobs", params={"dag_id": DAG_ID}).raise_for_status()
        assert [job["rung"]["text"] for job in ran.json()["jobs"]] == [CLIMBED]  # the run tab
        assert [job["rung"] for job in listed.json()["jobs"] if job["run_id"] == run_id] == [
            CLIMBED
        ]  # Browse
    finally:
        context.close()
        _restock(stack)

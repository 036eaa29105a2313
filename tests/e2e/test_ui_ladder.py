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
# The header's job state and every ladder row (is it the job's, its part, its state), from one render.
ROWS = """() => [
  document.querySelector('section.job .state')?.textContent ?? null,
  [...document.querySelectorAll('table.ladder tbody tr')].map((tr) => [
    tr.getAttribute('aria-current') === 'true', tr.dataset.status ?? null, tr.children[4].textContent,
  ]),
]"""
ENDED = {"SUCCEEDED", "FAILED", "CANCELLED"}


def _disagreements(seen: list[Any]) -> list[str]:
    """What in one render of the tab contradicts its header: the job's row must read the header's
    state, running while it runs and ran once it ended; a rung before it was passed."""
    header, rows = seen
    out = []
    mine = [i for i, (current, _, _) in enumerate(rows) if current]
    for i in mine:
        _, status, state = rows[i]
        if state != header or status != ("ran" if header in ENDED else "running"):
            out.append(f"header {header}, its rung's row {status} / {state}")
        out += [f"rung {j + 1} before it: {rows[j][1]}" for j in range(i) if rows[j][1] != "out of capacity"]
    return out


# What the tab's own data call answers now, and its status line (an error or "Trying again…").
PAYLOAD = """async () => {
  const r = await fetch('../api/task?' + new URLSearchParams(location.search), {credentials: 'same-origin'});
  const body = await r.json().catch(() => null);
  const keep = ['task_state', 'job_id', 'live', 'refresh_s', 'held', 'read_error', 'waiting'];
  return [document.getElementById('status')?.textContent, r.status,
          body && Object.fromEntries(keep.map((k) => [k, body[k]])), body?.job?.state];
}"""


def _what_the_tab_saw(stack: AirflowStack, run_id: str, document: Any, renders: list[Any]) -> Any:
    """For a failure: the task's state and try, the last distinct renders, what the page's data
    call answers now, and the page's status line."""
    ti = stack.task_instance(DAG_ID, run_id, "tune")
    distinct = [r for i, r in enumerate(renders) if i == 0 or r != renders[i - 1]]
    return {
        "tasks": stack.task_states(DAG_ID, run_id),
        "tune": (ti["state"], ti["try_number"]),
        "snapshot": document.evaluate(SNAPSHOT),
        "renders": distinct[-6:],
        "status, payload now": document.evaluate(PAYLOAD),
    }


def _restock(stack: AirflowStack) -> None:
    """The region's Spot VMs back (the stack's service runs with --fault-admin)."""
    removed = {"stockoutsRemoved": [f"{REGION}:SPOT"]}  # in one step: other tests' stockouts stay
    httpx.post(f"{stack.ml_url.rstrip('/')}/_capacity", json=removed, timeout=30).raise_for_status()


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
    context = browser.new_context(base_url=stack.base_url, viewport={"width": 1280, "height": 800})
    renders: list[Any] = []
    page = context.new_page()
    errors: list[str] = []  # what the page's scripts threw or logged as errors, for a failure
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda message: errors.extend([message.text] if message.type == "error" else []))
    try:
        frame = open_tab(page, stack, DAG_ID, run_id, "tune")
        document = page.wait_for_selector("iframe[title='Training job']").content_frame()
        assert document is not None

        def climbed() -> tuple[str | None, str] | None:
            renders.append(document.evaluate(ROWS))  # every render the tab makes, at each refresh
            live, rung = document.evaluate(SNAPSHOT)
            return (live, rung) if rung and CLIMBED in rung else None

        live, rung = wait_until(
            climbed,
            300,
            "the STANDARD rung's job on the live tab",
            every=0.5,
            state=lambda: (_what_the_tab_saw(stack, run_id, document, renders), errors[-5:]),
        )
        assert live is not None, rung  # the tab was live: the job ran, its task waited
        assert live.startswith("Live: read from the job's API")
        assert rung == f"Capacity ladder: {CLIMBED}"

        def ended() -> bool:
            renders.append(document.evaluate(ROWS))
            return stack.run_state(DAG_ID, run_id) != "running"

        wait_until(
            ended,
            300,
            "the run's end, the tab watched",
            every=0.5,
        )
        assert stack.wait_for_run(DAG_ID, run_id) == "success", stack.task_states(DAG_ID, run_id)
        renders.append(document.evaluate(ROWS))
        assert [r for r in renders if r[1]], renders  # the ladder was on the tab while it refreshed
        assert {r[0] for r in renders} >= {"RUNNING", "SUCCEEDED"}, renders
        assert [(r, _disagreements(r)) for r in renders if _disagreements(r)] == []
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
        # Browse: the job the task reached, and under it the Spot rung's job it passed (issue 52)
        browsed = [(j["rung"], j["state"]) for j in listed.json()["jobs"] if j["run_id"] == run_id]
        assert browsed == [(CLIMBED, "SUCCEEDED"), ("rung 1 of 2 · SPOT", "FAILED")]
    finally:
        context.close()
        _restock(stack)

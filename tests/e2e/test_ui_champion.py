"""The retraining example's verdict on Airflow's own pages, on the same data: Chromium.

The champion lives in Cloud Storage (``champion_store=gcs``). A first run of ``aip_retraining``
on one split makes a strong model the champion. A second run, on another split, trains a weak
model; its ``evaluate_champion`` job scores the champion on that second split, so the gate
compares two metrics measured on the same rows and keeps the champion. The second run's train
tab is opened as soon as the run is triggered and left open: the decision, made later by the
export task, appears there without a reload. The export tab and the run tab say the same
sentence, and Browse says which job the first run promoted. (The Model Registry's verdict is
drawn by the same code: ``tests/unit/test_ui_champion_verdict.py``.)
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import quote

import pytest

from airflow_aip.jobs.trials import metrics_apart
from scripts.stack import REPO
from tests.e2e.conftest import BROWSE_READS, AirflowStack
from tests.fixtures.browser import open_tab
from tests.fixtures.shared import exclusively

pytestmark = [pytest.mark.e2e, pytest.mark.soak]  # make test: the drawing in tests/unit/
DAG_ID = "aip_retraining"
EXPORT = "dags/{dag}/dagRuns/{run}/taskInstances/export_model/xcomEntries/return_value"


def test_a_retraining_run_shows_its_verdict_on_the_same_data(
    browser: Any, airflow_stack: AirflowStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from playwright.sync_api import expect

    stack = airflow_stack
    monkeypatch.syspath_prepend(str(REPO / "dags"))  # as Airflow puts the Dag folder on sys.path
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", stack.gcs_url)
    from aip_examples import CHAMPION_MANIFEST_URI, METRIC_TAG, write_split

    from airflow_aip.hooks import StorageHook

    folder = f"data/e2e-champion/{uuid.uuid4().hex[:8]}"
    first = write_split(stack.bucket, f"{folder}/first", seed=7, eval_fraction=0.3)
    second = write_split(stack.bucket, f"{folder}/second", seed=11, eval_fraction=0.3)
    # the Dags' bucket is the stack's (AIP_EXAMPLE_BUCKET there), not this process's default
    champion_uri = f"gs://{stack.bucket}/{CHAMPION_MANIFEST_URI.split('/', 3)[3]}"
    storage = StorageHook()
    storage.delete(champion_uri)  # another test's champion, if any: this one starts without
    base = {
        "project_id": f"e2e-champion-{uuid.uuid4().hex[:6]}",
        "champion_store": "gcs",
        "reuse_champion_hyperparameters": False,
    }

    strong = {**base, "train_data": first["train"], "eval_data": first["eval"], "C": 10.0, "max_iter": 200}
    first_run = stack.trigger(DAG_ID, strong)
    assert stack.wait_for_run(DAG_ID, first_run, timeout=420) == "success", stack.task_states(
        DAG_ID, first_run
    )
    champion = stack.get(EXPORT.format(dag=DAG_ID, run=first_run), map_index=-1)["value"]
    assert champion["promoted"] is True, champion

    context = browser.new_context(base_url=stack.base_url, viewport={"width": 1400, "height": 1300})
    errors: list[Any] = []
    page = context.new_page()
    page.on("pageerror", lambda error: errors.append(error))
    try:
        weak = {**base, "train_data": second["train"], "eval_data": second["eval"], "C": 0.05, "max_iter": 5}
        run_id = stack.trigger(DAG_ID, weak)
        train_tab = open_tab(page, stack, DAG_ID, run_id, "train")  # open before the decision exists
        train_tab.locator("body").evaluate("() => { window.aipNotReloaded = true; }")
        box = train_tab.locator("section.champion")
        expect(box).to_have_attribute("data-same-data", "true", timeout=420_000)
        expect(box).to_have_attribute("data-promoted", "false")
        verdicts = [box.locator(".champion-verdict").inner_text()]
        assert train_tab.locator("body").evaluate("() => window.aipNotReloaded === true")  # no reload
        assert stack.wait_for_run(DAG_ID, run_id, timeout=420) == "success", stack.task_states(DAG_ID, run_id)

        export_tab = open_tab(page, stack, DAG_ID, run_id, "export_model")
        expect(export_tab.locator("section.champion")).to_have_attribute(
            "data-same-data", "true", timeout=60_000
        )
        verdicts.append(export_tab.locator("section.champion .champion-verdict").inner_text())
        page.goto(f"/dags/{DAG_ID}/runs/{quote(run_id, safe='')}")
        page.get_by_role("link", name="Training jobs", exact=True).click()
        run_tab = page.frame_locator("iframe[title='Training jobs']")
        expect(run_tab.locator("section.champion")).to_have_attribute(
            "data-same-data", "true", timeout=60_000
        )
        verdicts.append(run_tab.locator("section.champion .champion-verdict").inner_text())

        with exclusively(BROWSE_READS):  # Browse reads every waiting job: none of the many-waits run's
            page.get_by_role("button", name="Browse").click()  # which job the first run promoted
            page.get_by_role("menuitem", name="Training jobs").click()
            jobs = page.frame_locator("iframe[title='Training jobs']")
            promoted = jobs.locator(f"table.jobs tr[data-job='{champion['job_id']}'] .promoted-as")
            expect(promoted).to_have_text(f"promoted: {champion['destination']}", timeout=60_000)
    finally:
        context.close()

    export = stack.get(EXPORT.format(dag=DAG_ID, run=run_id), map_index=-1)["value"]
    assert (export["exported"], export["same_eval_data"]) == (False, True), export
    assert export["champion_recorded_metric"] == champion["metric"]  # then scored again, on this run's rows
    new, held = metrics_apart(export["metric"], export["champion_metric"])
    expected = (
        f"{METRIC_TAG} {new} on this run's data against the champion's {held} ({champion['job_id']})"
        " on the same data: kept the champion"
    )
    assert (
        verdicts == [expected] * 3
    )  # one sentence, the same on each tab: both metrics, the data, the outcome
    assert errors == []

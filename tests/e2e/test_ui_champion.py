"""The retraining example's verdict on Airflow's own pages: the champion comparison, in Chromium.

The champion is a manifest in Cloud Storage (``champion_store=gcs``) recording an accuracy the
new model cannot reach. One run of ``aip_retraining`` on a fixed split (accuracy 0.8889) is then
not exported. Its run tab and the tabs of its train and export tasks say so: the new metric
against the champion's, the difference, "not promoted", and why. (The Model Registry's verdict,
with the champion's version, is drawn by the same code: ``tests/unit/test_ui_data.py``.)
"""

from __future__ import annotations

import json
import uuid
from typing import Any
from urllib.parse import quote

import pytest

from scripts.stack import REPO
from tests.e2e.conftest import AirflowStack
from tests.e2e.test_ui_live import open_tab

pytestmark = [pytest.mark.e2e, pytest.mark.soak]  # make test: the drawing in tests/unit/test_ui_data.py
DAG_ID = "aip_retraining"
CHAMPION = 0.95  # the champion's accuracy: the fixed split's model reaches 0.8889


def _shown(value: float) -> str:
    """A metric as every page writes it (common.js's ``metricText``: 4 significant digits below 1)."""
    return f"{value:.4g}"


def test_a_retraining_run_shows_its_model_against_the_champion(
    browser: Any, airflow_stack: AirflowStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from playwright.sync_api import expect

    stack = airflow_stack
    monkeypatch.syspath_prepend(str(REPO / "dags"))  # as Airflow puts the Dag folder on sys.path
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", stack.gcs_url)
    from aip_examples import CHAMPION_MANIFEST_URI, METRIC_TAG, write_split

    from airflow_aip.hooks import StorageHook

    split = write_split(stack.bucket, f"data/e2e-champion/{uuid.uuid4().hex[:8]}", seed=7, eval_fraction=0.3)
    champion = {"job_id": "an_earlier_run", "metric": {"tag": METRIC_TAG, "value": CHAMPION}}
    # the Dags' bucket is the stack's (AIP_EXAMPLE_BUCKET there), not this process's default
    champion_uri = f"gs://{stack.bucket}/{CHAMPION_MANIFEST_URI.split('/', 3)[3]}"
    manifest = json.dumps(champion).encode()
    StorageHook().write_bytes(champion_uri, manifest, content_type="application/json")
    conf = {
        "train_data": split["train"],
        "eval_data": split["eval"],
        "project_id": f"e2e-champion-{uuid.uuid4().hex[:6]}",
        "champion_store": "gcs",
        "reuse_champion_hyperparameters": False,
        "C": 0.05,
        "max_iter": 5,
    }
    run_id = stack.trigger(DAG_ID, conf)
    assert stack.wait_for_run(DAG_ID, run_id, timeout=420) == "success", stack.task_states(DAG_ID, run_id)
    path = f"dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/export_model/xcomEntries/return_value"
    export = stack.get(path, map_index=-1)["value"]
    assert (export["exported"], export["champion_metric"]) == (False, CHAMPION), export

    context = browser.new_context(base_url=stack.base_url, viewport={"width": 1400, "height": 1300})
    errors: list[Any] = []
    page = context.new_page()
    page.on("pageerror", lambda error: errors.append(error))
    try:
        verdicts = []
        for task_id in ("train", "export_model"):
            frame = open_tab(page, stack, DAG_ID, run_id, task_id)
            box = frame.locator("section.champion")
            expect(box).to_have_attribute("data-promoted", "false", timeout=60_000)
            verdicts.append(box.locator(".champion-verdict").inner_text())
        page.goto(f"/dags/{DAG_ID}/runs/{quote(run_id, safe='')}")
        page.get_by_role("link", name="Training jobs", exact=True).click()
        run_tab = page.frame_locator("iframe[title='Training jobs']")
        expect(run_tab.locator("section.champion")).to_have_attribute(
            "data-promoted", "false", timeout=60_000
        )
        verdicts.append(run_tab.locator("section.champion .champion-verdict").inner_text())
        expect(run_tab.locator("table.jobs")).to_contain_text("not exported (did not beat the champion)")
    finally:
        context.close()

    new, difference = _shown(export["metric"]), _shown(export["metric"] - CHAMPION)
    expected = (
        f"New {METRIC_TAG} {new} against champion {_shown(CHAMPION)}, {difference}: "
        "not promoted — it does not beat the champion"
    )
    assert verdicts == [expected] * 3  # the same words on each tab: both metrics, the gap, why
    assert errors == []

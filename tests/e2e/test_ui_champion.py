"""The retraining example's verdict on Airflow's own pages: the champion comparison, in Chromium.

Two runs of ``aip_retraining`` (Model Registry mode) on one fixed split: the first (accuracy
0.889) becomes version 1 and the champion; the second, worse (0.844), is registered as version 2
without the alias. Its run tab and the tabs of its train and register tasks say so: the new
metric against the champion's and its version, the difference, "not promoted", and why.
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import quote

import pytest

from scripts.stack import REPO
from tests.e2e.conftest import AirflowStack
from tests.e2e.test_ui_live import open_tab

pytestmark = pytest.mark.e2e
DAG_ID = "aip_retraining"


def _shown(value: float) -> str:
    """A metric as every page writes it (common.js's ``metricText``: 4 significant digits below 1)."""
    return f"{value:.4g}"


def _retrain(stack: AirflowStack, data: dict[str, str], project: str, c: float, max_iter: int) -> str:
    conf = {
        **data,
        "project_id": project,
        "champion_store": "registry",
        "reuse_champion_hyperparameters": False,
        "C": c,
        "max_iter": max_iter,
    }
    run_id = stack.trigger(DAG_ID, conf)
    assert stack.wait_for_run(DAG_ID, run_id, timeout=420) == "success", stack.task_states(DAG_ID, run_id)
    return run_id


def _registration(stack: AirflowStack, run_id: str) -> dict[str, Any]:
    path = f"dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/register_model/xcomEntries/return_value"
    value = stack.get(path, map_index=-1)["value"]
    assert isinstance(value, dict), value
    return value


def test_a_retraining_run_shows_its_model_against_the_champion(
    browser: Any, airflow_stack: AirflowStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from playwright.sync_api import expect

    stack = airflow_stack
    monkeypatch.syspath_prepend(str(REPO / "dags"))  # as Airflow puts the Dag folder on sys.path
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", stack.gcs_url)
    from aip_examples import METRIC_TAG, write_split

    split = write_split(stack.bucket, f"data/e2e-champion/{uuid.uuid4().hex[:8]}", seed=7, eval_fraction=0.3)
    data = {"train_data": split["train"], "eval_data": split["eval"]}
    project = f"e2e-champion-{uuid.uuid4().hex[:6]}"

    first = _registration(stack, _retrain(stack, data, project, c=0.05, max_iter=5))
    run_id = _retrain(stack, data, project, c=1e-6, max_iter=1)
    second = _registration(stack, run_id)
    assert (first["version_id"], first["promoted"], second["version_id"], second["promoted"]) == (
        "1",
        True,
        "2",
        False,
    )
    assert second["metric"] < first["metric"]

    context = browser.new_context(base_url=stack.base_url, viewport={"width": 1400, "height": 1300})
    errors: list[Any] = []
    page = context.new_page()
    page.on("pageerror", lambda error: errors.append(error))
    try:
        verdicts = []
        for task_id in ("train", "register_model"):
            frame = open_tab(page, stack, DAG_ID, run_id, task_id)
            box = frame.locator("section.champion")
            expect(box).to_have_attribute("data-promoted", "false", timeout=60_000)
            verdicts.append(box.locator(".champion-verdict").inner_text())
        page.goto(f"/dags/{DAG_ID}/runs/{quote(run_id, safe='')}")
        page.get_by_role("link", name="Training jobs", exact=True).click()
        run_box = page.frame_locator("iframe[title='Training jobs']").locator("section.champion")
        expect(run_box).to_have_attribute("data-promoted", "false", timeout=60_000)
        verdicts.append(run_box.locator(".champion-verdict").inner_text())
        expect(run_box).to_contain_text("/models/iris-retrained, version 2")
    finally:
        context.close()

    new, champion = _shown(second["metric"]), _shown(first["metric"])
    difference = _shown(second["metric"] - first["metric"])
    for verdict in verdicts:  # the same words on each tab: the two metrics, the version, the gap, why
        assert verdict.startswith(f"New {METRIC_TAG} {new} against champion {champion} (version 1), ")
        assert f", {difference}: not promoted — " in verdict
        why = (
            f"{METRIC_TAG} {new} does not beat the champion's {champion} (MAXIMIZE; a tie keeps the champion)"
        )
        assert verdict.endswith(f"— {why}")
    assert errors == []

"""The UI plugin in a real Airflow: its tabs in Airflow's own pages, in a real headless Chromium.

A viewer logs in through Airflow's login page and opens the tuning task's "Training job" tab,
the run's tab and Browse → Training jobs, after a real pipeline run; what the pages show is
compared with the job summary the task stored in XCom. Access is checked over HTTP for an
anonymous caller (401), a user with no access to the Dag (403) and a viewer (200).

``AIP_WRITE_SCREENSHOTS=1`` (``make screenshot``) writes the README's screenshot to ``docs/``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.e2e.conftest import BROWSE_READS, AirflowStack, TuningRun
from tests.fixtures.shared import exclusively

pytestmark = pytest.mark.e2e

DOCS = Path(__file__).resolve().parents[2] / "docs"
TASK = "tune"


def _summary(stack: AirflowStack, run: TuningRun) -> dict[str, Any]:
    path = f"dags/{run.dag_id}/dagRuns/{run.run_id}/taskInstances/{TASK}/xcomEntries/return_value"
    value = stack.get(path, map_index=-1)["value"]
    assert isinstance(value, dict), value
    return value


def _plugin_urls(run: TuningRun) -> list[str]:
    query = {"dag_id": run.dag_id, "run_id": run.run_id, "task_id": TASK, "map_index": "{MAP_INDEX}"}
    encoded = "&".join(f"{k}={quote(str(v), safe='')}" for k, v in query.items())
    run_query = f"dag_id={run.dag_id}&run_id={quote(run.run_id, safe='')}"
    return [
        f"/aip/ui/task?{encoded}",
        f"/aip/api/task?{encoded}",
        f"/aip/ui/run?{run_query}",
        f"/aip/api/run?{run_query}",
        "/aip/ui/jobs",
        "/aip/api/jobs",
    ]


def test_plugin_routes_apply_airflows_access_checks(
    airflow_stack: AirflowStack, tuning_run: TuningRun
) -> None:
    stack = airflow_stack
    tokens = {user: stack.token(user) for user in ("viewer", "outsider")}

    # /aip/api/jobs, as the viewer, reads every waiting job: none of the many-waits run's
    with httpx.Client(base_url=stack.base_url, timeout=30) as http, exclusively(BROWSE_READS):
        for url in _plugin_urls(tuning_run):
            anonymous = http.get(url)
            outsider = http.get(url, headers={"Authorization": f"Bearer {tokens['outsider']}"})
            viewer = http.get(url, cookies={"_token": tokens["viewer"]})  # as the iframe sends it

            assert (url, anonymous.status_code, outsider.status_code, viewer.status_code) == (
                url,
                401,
                403,
                200,
            )
        assert http.get("/aip/static/task.js").status_code == 401
        assert http.get("/aip/docs", cookies={"_token": tokens["viewer"]}).status_code == 404


def test_plugin_is_registered_with_its_tabs(airflow_stack: AirflowStack) -> None:
    plugins = airflow_stack.get("plugins")["plugins"]
    ours = [p for p in plugins if p["name"] == "airflow_aip"]

    assert len(ours) == 1, plugins
    views = {(v["destination"], v["url_route"]) for v in ours[0]["external_views"]}
    assert views == {
        ("task_instance", "aip-training-job"),
        ("dag_run", "aip-run-training-jobs"),
        ("nav", "aip-training-jobs"),
    }
    assert airflow_stack.get("plugins/importErrors")["import_errors"] == []


@pytest.fixture(scope="module")
def viewer_page(browser: Any, airflow_stack: AirflowStack) -> Iterator[Any]:
    """A browser tab logged in as the viewer through Airflow's own login page."""
    from playwright.sync_api import expect

    context = browser.new_context(base_url=airflow_stack.base_url, viewport={"width": 1400, "height": 1300})
    page = context.new_page()
    errors: list[Any] = []
    page.on("pageerror", lambda error: errors.append(error))
    page.goto("/auth/login")
    page.get_by_label("Username").fill("viewer")
    page.get_by_label("Password").fill(airflow_stack.passwords["viewer"])
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(lambda url: "/auth/login" not in url, timeout=60_000)
    expect(page.get_by_role("button", name="Browse")).to_be_visible(timeout=60_000)
    yield page
    context.close()
    assert errors == []


def test_training_job_tab_shows_the_jobs_trials(
    viewer_page: Any, airflow_stack: AirflowStack, tuning_run: TuningRun
) -> None:
    from playwright.sync_api import expect

    summary = _summary(airflow_stack, tuning_run)
    trials = summary["trials"]
    page = viewer_page

    page.goto(f"/dags/{tuning_run.dag_id}/runs/{quote(tuning_run.run_id, safe='')}/tasks/{TASK}")
    page.get_by_role("link", name="Training job", exact=True).click()  # the plugin's tab, after Airflow's own
    frame = page.frame_locator("iframe[title='Training job']")

    rows = frame.locator("table.trials tbody tr")
    expect(rows).to_have_count(len(trials), timeout=60_000)
    assert [row.get_attribute("data-trial") for row in rows.all()] == [t["trialId"] for t in trials]
    expect(frame.locator("table.trials tr.best")).to_have_attribute(
        "data-trial", summary["best_trial"]["trialId"]
    )
    expect(frame.locator("h1")).to_have_text(f"Training job {summary['job_id']}")
    points = frame.locator("svg.metric-per-trial circle.trial")
    expect(points).to_have_count(len(trials))
    objectives = [float(p.get_attribute("data-objective")) for p in points.all()]
    assert objectives == [t["finalMetric"]["objectiveValue"] for t in trials]
    expect(frame.locator("svg.metric-vs-param[data-param='C']")).to_have_attribute("data-log", "true")
    # the job's page opens in a new browser tab (Airflow's frame sandbox allows no popups of its own)
    link = frame.get_by_role("link", name="Local training service: job page")
    expect(link).to_have_attribute("href", summary["console_url"])
    tab_url = page.url
    with page.context.expect_page(timeout=30_000) as opened:
        link.click()
    job_page = opened.value
    job_page.wait_for_load_state()
    assert job_page.url == summary["console_url"]
    assert summary["name"] in job_page.content()
    job_page.close()
    assert page.url == tab_url
    expect(frame.locator("h1")).to_have_text(f"Training job {summary['job_id']}")  # the frame stayed

    screenshot = DOCS / "training-job-tab.png" if os.environ.get("AIP_WRITE_SCREENSHOTS") else None
    if screenshot is not None:
        page.screenshot(path=str(screenshot))
        assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_run_tab_and_browse_page_list_the_job(
    viewer_page: Any, airflow_stack: AirflowStack, tuning_run: TuningRun
) -> None:
    from playwright.sync_api import expect

    job_id = _summary(airflow_stack, tuning_run)["job_id"]
    page = viewer_page

    page.goto(f"/dags/{tuning_run.dag_id}/runs/{quote(tuning_run.run_id, safe='')}")
    page.get_by_role("link", name="Training jobs", exact=True).click()
    frame = page.frame_locator("iframe[title='Training jobs']")
    run_row = frame.locator(f"table.jobs tr[data-job='{job_id}']")
    _expect_one(frame, run_row)
    expect(run_row.locator("td").last).to_contain_text("exported")

    with exclusively(BROWSE_READS):  # it reads every waiting job: none of the many-waits run's
        _browse_lists_the_job(page, tuning_run, job_id)


def _browse_lists_the_job(page: Any, tuning_run: TuningRun, job_id: str) -> None:
    from playwright.sync_api import expect

    page.get_by_role("button", name="Browse").click()
    page.get_by_role("menuitem", name="Training jobs").click()
    jobs = page.frame_locator("iframe[title='Training jobs']")
    row = jobs.locator(f"table.jobs tr[data-job='{job_id}']")
    _expect_one(jobs, row)
    jobs.get_by_label("Dag").select_option(tuning_run.dag_id)
    jobs.get_by_label("Job state").select_option("SUCCEEDED")
    jobs.get_by_role("button", name="Filter").click()
    expect(row).to_have_count(1)
    row.get_by_role("link", name=job_id).click()  # the row links to the job's view
    expect(jobs.locator("table.trials tbody tr").first).to_be_visible()


def _expect_one(frame: Any, row: Any) -> None:
    """One such row within a minute; else the failure says what the page showed instead."""
    from playwright.sync_api import expect

    try:
        expect(row).to_have_count(1, timeout=60_000)
    except AssertionError as missing:
        shown = {part: _text(frame, part) for part in ("#status", "#content")}
        raise AssertionError(f"{missing}\nwhat the page showed: {shown}") from missing


def _text(frame: Any, selector: str) -> str:
    try:
        return str(frame.locator(selector).inner_text(timeout=5_000))[:2000]
    except Exception as unread:  # the frame may not have loaded at all
        return f"(unread: {unread})"


def test_dag_list_and_details_show_the_descriptions(viewer_page: Any, airflow_stack: AirflowStack) -> None:
    """The example DAGs explain themselves where a newcomer looks first: the list, then the details."""
    from playwright.sync_api import expect

    dag_id = "aip_training_pipeline"
    description = airflow_stack.get(f"dags/{dag_id}")["description"]
    assert isinstance(description, str)
    assert "export the best model" in description
    page = viewer_page

    page.goto(f"/dags?dag_id_pattern={dag_id}")
    name = page.get_by_test_id("dag-id").filter(has_text=dag_id).first
    expect(name).to_be_visible(timeout=60_000)
    tooltip = page.get_by_text(description, exact=True).first
    for attempt in range(3):  # the list shows a Dag's description as the tooltip of its name
        name.hover()  # a hover that lands while the list re-renders shows nothing: hover again
        try:
            expect(tooltip).to_be_visible(timeout=10_000)
            break
        except AssertionError:
            if attempt == 2:
                raise
            page.mouse.move(0, 0)

    page.goto(f"/dags/{dag_id}/details")
    expect(page.get_by_test_id("description-row")).to_contain_text(description, timeout=60_000)
    page.get_by_role("button", name="Dag Docs").click()  # the doc_md: what the Dag does, step by step
    expect(
        page.get_by_role("heading", name="Tune the iris trainer and export the best model")
    ).to_be_visible()
    expect(page.get_by_text("export_best_model", exact=False).first).to_be_visible()


_SIDEWAYS = "document.documentElement.scrollWidth - document.documentElement.clientWidth"


def test_the_tabs_and_browse_fit_a_1280_px_window(
    viewer_page: Any, airflow_stack: AirflowStack, tuning_run: TuningRun
) -> None:
    """In Airflow's own frames at 1280 x 800, neither Airflow's page nor the plugin's scrolls
    sideways, and the task tab's first trial shows without scrolling (above the fold)."""
    from playwright.sync_api import expect

    page = viewer_page
    page.set_viewport_size({"width": 1280, "height": 800})
    run = f"/dags/{tuning_run.dag_id}/runs/{quote(tuning_run.run_id, safe='')}"
    pages = [
        (f"{run}/tasks/{TASK}/plugin/aip-training-job", "Training job", "table.trials"),
        (f"{run}/plugin/aip-run-training-jobs", "Training jobs", "table.jobs"),
        ("/plugin/aip-training-jobs", "Training jobs", "table.jobs"),
    ]
    try:
        with exclusively(BROWSE_READS):  # Browse reads every waiting job
            for url, title, drawn in pages:
                page.goto(url)
                frame = page.frame_locator(f"iframe[title='{title}']")
                expect(frame.locator(drawn)).to_be_visible(timeout=60_000)
                inner = frame.locator("html").evaluate(f"() => {_SIDEWAYS}")
                assert (url, inner, page.evaluate(_SIDEWAYS)) == (url, 0, 0)
                if drawn == "table.trials":  # where it lies in Airflow's page, its chrome above it
                    first = frame.locator("table.trials tbody tr").first.bounding_box()
                    assert first is not None
                    assert first["y"] + first["height"] <= 800, f"the first trial ends at {first}"
    finally:
        page.set_viewport_size({"width": 1400, "height": 1300})

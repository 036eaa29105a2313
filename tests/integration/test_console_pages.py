"""The local service's console pages in a real headless Chromium, at 1280 px: nothing scrolls sideways.

The pages are rendered from canned records (long names, args, URIs and labels: the model page was
2632 px wide); the same pages from a real service are checked in test_local_console.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from airflow_aip.local.console import ConsoleJob, render_job, render_model
from tests.fixtures.console_records import LONG_URI, TUNING_RECORD, VERSIONS

pytestmark = pytest.mark.integration

WIDTH = 1280


@pytest.fixture
def tab(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": WIDTH, "height": 900})
    page = context.new_page()
    yield page
    context.close()


def overflow(page: Any) -> int:
    """How far the page scrolls sideways (0 when it fits)."""
    return int(page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth"))


def test_the_job_page_fits(tab: Any) -> None:
    name = TUNING_RECORD["resource"]["name"]
    logs = [{"time": "t", "severity": "INFO", "task": "workerpool0-0", "message": "x" * 400}]
    tab.set_content(
        render_job(ConsoleJob(name, "Vertex AI tuning job", "JOB_STATE_SUCCEEDED", TUNING_RECORD, logs))
    )

    assert overflow(tab) == 0
    assert tab.locator("h1").inner_text() == TUNING_RECORD["resource"]["displayName"]


def test_the_model_page_fits_and_copies_a_uri(tab: Any) -> None:
    tab.set_content(render_model(VERSIONS))

    assert overflow(tab) == 0
    uri = tab.locator("td .uri", has_text=LONG_URI).first
    assert uri.get_attribute("title") == LONG_URI  # the whole value on hover
    assert uri.evaluate("e => e.scrollWidth > e.clientWidth")  # cut with an ellipsis
    copy = tab.get_by_role("button", name=f"Copy {LONG_URI}").first
    copy.click()
    assert copy.inner_text() == "Copied"


def test_no_text_breaks_inside_a_word(tab: Any) -> None:
    """Issue 52: "JOB_STATE_SUCCEEDE / D" and "n1-standard- / 4"; measured in the browser at 1280 px."""
    from tests.fixtures.browser import mid_word_breaks

    name = TUNING_RECORD["resource"]["name"]
    logs = [{"time": "2026-11-29T05:09:13Z", "severity": "INFO", "task": "workerpool0-0", "message": "ok"}]
    tab.set_content(
        render_job(ConsoleJob(name, "Vertex AI tuning job", "JOB_STATE_SUCCEEDED", TUNING_RECORD, logs))
    )
    assert mid_word_breaks(tab) == []
    tab.set_content(render_model(VERSIONS))
    assert mid_word_breaks(tab) == []


def test_a_versions_description_is_folded_and_its_numbers_readable(tab: Any) -> None:
    """Issue 52: the model page printed 0.9777777777777777 and a Description 60 lines tall."""
    version = {
        **VERSIONS[0],
        "versionDescription": "Job iris_train_1: accuracy = 0.9777777777777777 (MAXIMIZE).\n"
        + "\n".join(f"Data gs://bucket/data/iris/part-{n:05d}.csv" for n in range(60)),
    }
    tab.set_content(render_model([version]))
    folded = tab.locator("details.description")
    assert folded.locator("summary").inner_text() == "Job iris_train_1: accuracy = 0.9778 (MAXIMIZE)."
    assert folded.evaluate("e => e.getBoundingClientRect().height") < 60  # one line until opened
    folded.locator("summary").click()
    assert "0.9777777777777777" in folded.inner_text()  # as stored, once opened
    assert "part-00059.csv" in folded.inner_text()

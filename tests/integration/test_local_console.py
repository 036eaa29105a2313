"""The local service's job pages: what a job link opens on a local run, for ml v1 and Vertex AI jobs."""

from __future__ import annotations

import re
import uuid
from typing import Any

import httpx
import pytest

from airflow_aip.jobs.numbers import number_text
from airflow_aip.local.console import when_text
from tests.fixtures.browser import mid_word_breaks
from tests.fixtures.local_service import TERMINAL, LocalService, StagedTrainer, wait_for_job, wait_for_state
from tests.fixtures.vertex import VERTEX_TERMINAL, aiplatform, worker_pool

pytestmark = pytest.mark.integration


def page(service: LocalService, name: str) -> httpx.Response:
    return httpx.get(f"{service.url}console/{name}", timeout=30)


def test_ml_v1_job_page_shows_state_error_and_log(
    local_service: LocalService, staged_trainer: StagedTrainer
) -> None:
    project, job_id = f"console-{uuid.uuid4().hex[:8]}", f"console_fail_{uuid.uuid4().hex[:8]}"
    ml = local_service.ml()
    body = {"jobId": job_id, "trainingInput": staged_trainer.training_input("fail")}
    ml.projects().jobs().create(parent=f"projects/{project}", body=body).execute()
    job = wait_for_state(ml, f"projects/{project}/jobs/{job_id}", TERMINAL)
    assert job["state"] == "FAILED"

    response = page(local_service, f"projects/{project}/jobs/{job_id}")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    html = response.text.replace("<wbr>", "")  # where the text may wrap: checked in the browser below
    assert "<td>FAILED</td>" in html
    assert f"<h1>{job_id}</h1>" in html  # ml v1 has no display name: its job ID is readable
    assert '<th scope="row">Args</th>' in html
    assert "AI Platform Training job (ml v1)" in html
    assert f"<td>{when_text(job['createTime'])}</td>" in html  # one format, to the second
    assert re.search(r"<td>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</td>", html)
    assert "exited with a non-zero status of 3" in html  # the error
    assert "starting, about to fail" in html  # a log line
    assert 'http-equiv="refresh"' not in html  # ended: nothing to refresh for
    listing = page(local_service, "").text
    assert f'href="/console/projects/{project}/jobs/{job_id}"' in listing


def test_vertex_tuning_job_page_shows_trials(
    local_service: LocalService, staged_trainer: StagedTrainer, browser: Any
) -> None:
    project = f"console-{uuid.uuid4().hex[:8]}"
    tuning = aiplatform(local_service.url).projects().locations().hyperparameterTuningJobs()
    body = {
        "displayName": "console",
        "maxTrialCount": 2,
        "parallelTrialCount": 2,
        "studySpec": {
            "metrics": [{"metricId": "score", "goal": "MAXIMIZE"}],
            "parameters": [{"parameterId": "x", "integerValueSpec": {"minValue": 1, "maxValue": "5"}}],
            "algorithm": "RANDOM_SEARCH",
        },
        "trialJobSpec": {"workerPoolSpecs": [worker_pool(staged_trainer, "tune", ["--metric-tag=score"])]},
    }
    created = tuning.create(parent=f"projects/{project}/locations/us-central1", body=body).execute()
    job = wait_for_job(tuning, created["name"], VERTEX_TERMINAL, timeout=180)
    assert job["state"] == "JOB_STATE_SUCCEEDED"

    by_number = page(local_service, created["name"])  # projects/<number>/locations/...
    by_id = page(local_service, created["name"].replace(created["name"].split("/")[1], project, 1))
    assert by_number.status_code == by_id.status_code == 200
    html = by_number.text.replace("<wbr>", "")  # where the text may wrap: checked in the browser below
    assert "Vertex AI hyperparameter tuning job" in html
    assert "<td>JOB_STATE_SUCCEEDED</td>" in html
    assert html.index("<h1>console</h1>") < html.index(created["name"])  # the display name first
    assert "(MAXIMIZE), best of trial" in html
    assert '<th scope="row">Machine</th>' in html
    assert "<h2>Trials (2)</h2>" in html
    for trial in job["trials"]:
        x = next(p["value"] for p in trial["parameters"] if p["parameterId"] == "x")
        score = number_text(trial["finalMeasurement"]["metrics"][0]["value"])
        assert f"<td>{trial['id']}</td><td>SUCCEEDED</td><td>x={number_text(x)}</td><td>{score}</td>" in html
    other_kind = created["name"].replace("hyperparameterTuningJobs", "customJobs")
    assert page(local_service, other_kind).status_code == 404
    tab = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        for url in (f"{local_service.url}console/{created['name']}", f"{local_service.url}console/"):
            tab.goto(url)
            sideways = tab.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            assert (url, sideways) == (url, 0)
            assert (url, mid_word_breaks(tab)) == (url, [])  # issue 52: "JOB_STATE_SUCCEEDE / D"
    finally:
        tab.close()


@pytest.mark.parametrize(
    "name",
    [
        "projects/local-project/jobs/no_such_job",
        "projects/local-project/locations/us-central1/customJobs/1234567890123456789",
        "projects/local-project/locations/nowhere-1/customJobs/1",
        "projects/local-project/models/x",
        "projects/<script>alert(1)</script>/jobs/x",
    ],
)
def test_unknown_jobs_are_a_404_page(local_service: LocalService, name: str) -> None:
    response = page(local_service, name)
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("text/html")
    assert "No such job" in response.text
    assert "<script>alert" not in response.text

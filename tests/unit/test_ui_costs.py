"""What the UI's pages say a job cost (airflow_aip.ui.costs): from the summary alone."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_aip.jobs.pricing import PriceTable
from airflow_aip.jobs.summary import summarize_job
from airflow_aip.jobs.vertex.view import view_from_vertex
from airflow_aip.ui.costs import cost_series, cost_view, run_total
from airflow_aip.ui.views import job_list_row, job_view

RATE = 0.21849885 + 100 * 0.1955 / 730  # n1-standard-4 with its default boot disk, USD per hour
DATE = PriceTable.load().date


def tuning_summary() -> dict[str, Any]:
    resource = {
        "name": "projects/p/locations/us-central1/hyperparameterTuningJobs/7",
        "displayName": "t1",
        "state": "JOB_STATE_SUCCEEDED",
        "startTime": "2026-01-01T00:00:00Z",
        "endTime": "2026-01-01T01:00:00Z",
        "studySpec": {"metrics": [{"metricId": "acc", "goal": "MAXIMIZE"}], "parameters": []},
        "trialJobSpec": {"workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4"}}]},
        "trials": [
            {
                "id": "1",
                "state": "SUCCEEDED",
                "startTime": "2026-01-01T00:00:00Z",
                "endTime": "2026-01-01T00:30:00Z",
            },
            {
                "id": "2",
                "state": "SUCCEEDED",
                "startTime": "2026-01-01T00:15:00Z",
                "endTime": "2026-01-01T00:45:00Z",
            },
        ],
    }
    return summarize_job(view_from_vertex(resource, project_id="p", region="us-central1"))


def test_the_training_job_tab_shows_the_cost_each_trials_and_its_curve() -> None:
    view = job_view(tuning_summary(), "tune", -1)
    cost = view["cost"]
    assert cost["text"] == f"USD {RATE:.4g} (estimate, price table of {DATE})"
    assert [p["label"] for p in cost["parts"]] == ["trial 1", "trial 2"]
    assert cost["parts"][0]["text"] == f"USD {RATE / 2:.4g}"
    # the curve: 0 at the first start; both trials half spent at 30 min; all spent at 45 min
    assert cost["series"][0] == [0.0, 0.0]
    assert cost["series"][-1][0] == 2700.0
    assert cost["series"][-1][1] == pytest.approx(RATE, abs=1e-6)  # rounded to the micro-dollar


def test_browse_and_the_run_tab_say_the_total() -> None:
    summary = tuning_summary()
    row = job_list_row({"job_id": "t1"}, summary, "success")
    assert row["cost"].startswith("USD ")
    assert run_total([summary, summary]) == f"USD {2 * RATE:.4g} (estimate, price table of {DATE})"
    assert run_total([{"job_id": "old summary without cost"}]) is None


def test_a_ladders_rungs_are_its_parts_and_an_older_summary_has_no_cost_block() -> None:
    summary = {
        **tuning_summary(),
        "ladder": [
            {"rung": 1, "label": "spot", "cost": {"amount": 0.0}},
            {"rung": 2, "label": "standard", "cost": {"amount": 0.5}},
        ],
        "ladder_cost": {"amount": 0.5, "currency": "USD", "estimate": True, "table_date": DATE},
    }
    cost = cost_view(summary)
    assert cost is not None
    assert cost["text"] == f"USD 0.5 (estimate, price table of {DATE})"
    assert [p["text"] for p in cost["parts"]] == ["USD 0", "USD 0.5"]
    summary["ladder_cost"]["unverified"] = ["spot machine n1-standard-8 in us-central1"]
    unsure = cost_view(summary)
    assert unsure is not None
    assert unsure["text"].endswith("; unverified rates: spot machine n1-standard-8 in us-central1)")
    assert cost_view({"job_id": "j"}) is None
    assert cost_series([]) == []

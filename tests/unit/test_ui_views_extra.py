"""What the pages say about a single job, the champion and links: the pure view functions.

A single (non-tuning) job has no trials, so its metric comes from the summary or the run's
export; the champion comparison comes from the registration, else the export's gate; a link
says whether it opens the Google Cloud console or the local training service.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_aip.ui.results import job_result, reported_metric
from airflow_aip.ui.views import (
    champion_comparison,
    job_view,
    link_label,
    run_view,
    tied_best,
    trial_row,
)
from tests.fixtures.tuning_job import SUMMARY

SINGLE = {
    **SUMMARY,
    "job_id": "iris_train_1",
    "name": "projects/p/locations/us-central1/customJobs/42",
    "output_dir": "gs://b/runs/iris_train_1",
    "console_url": "http://127.0.0.1:8731/jobs/iris_train_1",
    "is_hyperparameter_tuning_job": False,
    "best_trial": None,
    "trials": [],
}
EXPORT = {
    "job_id": "iris_train_1",
    "metric": 0.93,
    "metric_tag": "accuracy",
    "exported": True,
    "promoted": True,
    "destination": "gs://b/models/iris_train_1",
    "champion_metric": 0.9,
}
REGISTERED = {
    "model": "iris",
    "version_id": "4",
    "version_name": "projects/p/locations/us-central1/models/iris@4",
    "aliases": ["default"],
    "metric": 0.88,
    "metric_tag": "accuracy",
    "goal": "MAXIMIZE",
    "champion_alias": "champion",
    "promoted": False,
    "reason": "accuracy 0.88 does not beat the champion's 0.9",
    "champion_before": {"version_id": "3", "metric": 0.9},
    "console_url": "https://console.cloud.google.com/vertex-ai/models/iris?project=p",
}


@pytest.mark.parametrize(
    ("url", "page", "label"),
    [
        (
            "https://console.cloud.google.com/vertex-ai/training/1?project=p",
            "job page",
            "Google Cloud console",
        ),
        ("http://127.0.0.1:8731/jobs/1", "job page", "Local training service: job page"),
        ("http://localhost:8731/models/iris", "model page", "Local training service: model page"),
        # a host that only starts like Google's is not Google's console
        ("https://console.cloud.google.com.example.org/x", "job page", "Local training service: job page"),
        (None, "job page", None),
    ],
)
def test_a_link_is_labelled_for_what_it_opens(url: str | None, page: str, label: str | None) -> None:
    assert link_label(url, page) == label


def test_a_single_job_shows_the_metric_the_export_read_and_its_output_directory() -> None:
    job = job_view(SINGLE, "train", -1, EXPORT)

    assert job["reported_metric"] == {"value": 0.93, "tag": "accuracy", "source": "export"}
    assert (job["output_dir"], job["name"]) == (
        "gs://b/runs/iris_train_1",
        "projects/p/locations/us-central1/customJobs/42",
    )
    assert job["console_label"] == "Local training service: job page"
    assert job["logs_url"] is None  # the local service's page has the logs
    assert job["export"]["champion_metric"] == 0.9


def test_the_summarys_own_final_metric_wins_over_the_exports() -> None:
    summary = {**SINGLE, "final_metric": {"objectiveValue": 0.97}, "hyperparameter_metric_tag": "f1"}

    assert reported_metric(summary, EXPORT) == {"value": 0.97, "tag": "f1", "source": "summary"}
    assert reported_metric({**SINGLE, "final_metric": 0.5}, None) == {
        "value": 0.5,
        "tag": "accuracy",
        "source": "summary",
    }


def test_a_job_before_its_export_ran_reports_no_metric() -> None:
    assert reported_metric(SINGLE, None) is None
    assert reported_metric(SINGLE, {**EXPORT, "metric": None}) is None
    assert job_view(SINGLE, "train", -1)["reported_metric"] is None


def test_a_job_comes_to_one_result_whatever_the_page() -> None:
    """The task tab, the run tab and Browse draw this one value: a single job's final metric
    when known, else a dash with the reason; a tuning job's best trial."""
    assert job_result(SINGLE, EXPORT) == {
        "kind": "metric",
        "metric": "accuracy",
        "value": 0.93,
        "trial_id": None,
        "rung": None,
        "reason": None,
        "source": "export",
    }
    assert job_result(SINGLE, None)["reason"] == "a single job; it reported no metric"
    running = {**SINGLE, "state": "RUNNING"}
    assert (job_result(running, None)["kind"], job_result(running, None)["reason"]) == (
        "none",
        "a single job; its metric comes when it ends",
    )
    best = job_result(SUMMARY, None)
    assert (best["kind"], best["trial_id"], best["value"]) == ("trial", "2", 0.95)
    no_best = {**SUMMARY, "best_trial": None}
    assert job_result(no_best, None)["reason"] == "no trial has a final metric"
    queued = {**no_best, "trials": [], "state": "QUEUED"}
    assert job_result(queued, None)["reason"] == "no trial has ended yet"


def test_run_view_gives_each_job_its_own_exports_metric() -> None:
    other_export = {**EXPORT, "job_id": "someone_else", "metric": 0.1}
    jobs = run_view([("train", -1, SINGLE), ("export", -1, other_export)])

    assert [j["reported_metric"] for j in jobs] == [None]


def test_the_job_that_scored_the_champion_shows_the_metric_the_gate_read() -> None:
    """Issue 52: the evaluation-only job's log has ``accuracy=0.9556 … (evaluated)``, and the
    comparison uses that 0.9556; its own row must not say it "reported no metric"."""
    evaluator = {**SINGLE, "job_id": "iris_champion_eval_1", "output_dir": "gs://b/jobs/champion_eval/r1"}
    scored = {
        "uri": "gs://b/jobs/champion_eval/r1/champion_metrics.json",
        "metric": 0.9556,
        "metric_tag": "accuracy",
        "model_uri": "gs://b/models/v3",
    }
    registered = {**REGISTERED, "job_id": "iris_train_1", "champion_evaluation": scored}
    jobs = run_view(
        [("evaluate_champion", -1, evaluator), ("register", -1, registered), ("train", -1, SINGLE)]
    )
    by_task = {j["task_id"]: j["result"] for j in jobs}
    assert (by_task["evaluate_champion"]["kind"], by_task["evaluate_champion"]["value"]) == ("metric", 0.9556)
    assert by_task["evaluate_champion"]["source"] == "evaluation"
    assert by_task["train"]["reason"] == "a single job; it reported no metric"  # not its file: no metric
    elsewhere = {**evaluator, "output_dir": "gs://b/jobs/champion_eval/r"}  # a prefix, not its folder
    assert run_view([("e", -1, elsewhere), ("register", -1, registered)])[0]["result"]["kind"] == "none"


def _trials(*objectives: float | None) -> list[dict[str, Any]]:
    rows = []
    for n, value in enumerate(objectives, start=1):
        trial: dict[str, Any] = {"trialId": str(n), "state": "SUCCEEDED"}
        if value is not None:
            trial["finalMetric"] = {"objectiveValue": value}
        rows.append(trial_row(trial))
    return rows


def test_trials_tied_for_best_are_named_only_when_two_or_more_share_it() -> None:
    assert tied_best(_trials(0.9, 0.95, 0.95, None), "2") == ["2", "3"]
    assert tied_best(_trials(0.9, 0.95), "2") == []
    assert tied_best(_trials(0.9, 0.95), None) == []
    tied = {**SUMMARY, "trials": [*SUMMARY["trials"], {**SUMMARY["trials"][1], "trialId": "4"}]}
    assert job_view(tied, "tune", -1)["tied_trial_keys"] == ["2", "4"]
    assert job_view(SUMMARY, "tune", -1)["tied_trial_keys"] == []


def test_champion_comparison_from_the_registration_says_against_which_version_and_why() -> None:
    comparison = champion_comparison([SINGLE, EXPORT, REGISTERED])

    assert comparison is not None
    assert comparison["source"] == "registry"
    assert (comparison["metric"], comparison["champion_metric"], comparison["champion_version"]) == (
        0.88,
        0.9,
        "3",
    )
    assert comparison["difference"] == pytest.approx(-0.02)
    assert (comparison["promoted"], comparison["reason"]) == (
        False,
        "accuracy 0.88 does not beat the champion's 0.9",
    )
    assert comparison["console_label"] == "Google Cloud console"


def test_champion_comparison_of_a_first_registration_has_no_champion_before() -> None:
    first = {**REGISTERED, "promoted": True, "champion_before": None, "console_url": "http://localhost:1/m"}
    comparison = champion_comparison([first])

    assert comparison is not None
    assert (comparison["champion_metric"], comparison["champion_version"], comparison["difference"]) == (
        None,
        None,
        None,
    )
    assert comparison["promoted"] is True
    assert comparison["console_label"] == "Local training service: model page"


@pytest.mark.parametrize(
    ("export", "promoted", "reason"),
    [
        (EXPORT, True, "it beats the champion"),
        (
            {**EXPORT, "exported": False, "promoted": False, "destination": None},
            False,
            "it does not beat the champion",
        ),
        ({**EXPORT, "champion_metric": None}, True, "there was no champion yet"),
    ],
)
def test_champion_comparison_from_the_exports_gate(
    export: dict[str, Any], promoted: bool, reason: str
) -> None:
    comparison = champion_comparison([SINGLE, export])

    assert comparison is not None
    assert (comparison["source"], comparison["promoted"], comparison["reason"]) == (
        "export",
        promoted,
        reason,
    )
    assert comparison["metric"] == 0.93


def test_no_champion_comparison_without_a_gate() -> None:
    ungated = {k: v for k, v in EXPORT.items() if k != "champion_metric"}
    no_alias = {**REGISTERED, "champion_alias": None, "promoted": None}

    assert champion_comparison([SINGLE, ungated, no_alias]) is None
    assert champion_comparison([]) is None


def test_each_trial_shows_what_it_logged_to_experiments_and_a_single_job_its_run() -> None:
    run = {"run": "projects/1/locations/l/metadataStores/default/contexts/exp-run-7", "experiment": "exp"}
    trials = [dict(t) for t in SUMMARY["trials"]]
    trials[0]["experimentRun"] = {**run, "metrics": {"accuracy": 0.8, "loss": "NaN"}}
    trials[1]["experimentRun"] = {**run, "metrics": {"f1": 0.5}}

    tuned = job_view({**SUMMARY, "trials": trials}, "tune", -1)
    single = job_view({**SINGLE, "experiment_run": {**run, "metrics": {"loss": 0.25}}}, "train", -1)

    assert tuned["logged_metrics"] == ["accuracy", "f1", "loss"]
    assert [t["logged"] for t in tuned["trials"]] == [{"accuracy": 0.8, "loss": None}, {"f1": 0.5}, {}]
    assert single["experiment_run"] == {"run": run["run"], "experiment": "exp", "metrics": {"loss": 0.25}}
    assert job_view(SUMMARY, "tune", -1)["logged_metrics"] == []
    assert job_view(SINGLE, "train", -1)["experiment_run"] is None

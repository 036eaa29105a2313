"""Best trial, the XCom summary and the trainingInput diff used before adopting a job."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs import DEFAULT_METRIC_TAG, best_trial
from airflow_aip.jobs.mlv1.backend import console_url
from airflow_aip.jobs.mlv1.diff import diff_training_input
from airflow_aip.jobs.trials import Goal, best_trial_report, metrics_apart
from tests.fixtures.views import ml_summary

TRIALS: list[dict[str, Any]] = [
    {"trialId": "1", "state": "SUCCEEDED", "finalMetric": {"objectiveValue": 0.5, "trainingStep": "10"}},
    {"trialId": "2", "state": "SUCCEEDED", "finalMetric": {"objectiveValue": 0.9}},
    {"trialId": "3", "state": "FAILED", "finalMetric": {"objectiveValue": 5.0}},
    {"trialId": "4", "state": "SUCCEEDED"},
    {"trialId": "5", "state": "SUCCEEDED", "finalMetric": {"objectiveValue": 0.1}},
    {"trialId": "6", "finalMetric": {"objectiveValue": "NaN"}},
]


def test_best_trial_follows_goal() -> None:
    assert best_trial(TRIALS, "MAXIMIZE")["trialId"] == "2"  # type: ignore[index]
    assert best_trial(TRIALS, "MINIMIZE")["trialId"] == "5"  # type: ignore[index]
    assert best_trial(TRIALS, "GOAL_TYPE_UNSPECIFIED")["trialId"] == "2"  # type: ignore[index]
    assert best_trial(TRIALS, None)["trialId"] == "2"  # type: ignore[index]


def test_trials_without_final_metric_never_win() -> None:
    assert best_trial([TRIALS[3], TRIALS[5]], "MAXIMIZE") is None
    assert best_trial([], "MINIMIZE") is None


def test_ties_go_to_the_first_and_string_values_count() -> None:
    trials = [
        {"trialId": "a", "finalMetric": {"objectiveValue": "2"}},
        {"trialId": "b", "finalMetric": {"objectiveValue": 2.0}},
    ]
    assert best_trial(trials, "MINIMIZE")["trialId"] == "a"  # type: ignore[index]


def test_unknown_goal() -> None:
    with pytest.raises(ValidationError) as err:
        best_trial(TRIALS, "BIGGEST")
    assert err.value.field == "goal"


@pytest.mark.parametrize(
    ("value", "goal"),
    [
        (None, Goal.MAXIMIZE),
        ("", Goal.MAXIMIZE),
        ("GOAL_TYPE_UNSPECIFIED", Goal.MAXIMIZE),  # ml.v1.json, aiplatform.v1.json: "default to maximize"
        ("GOAL_UNSPECIFIED", Goal.MAXIMIZE),
        ("MAXIMIZE", Goal.MAXIMIZE),
        ("MINIMIZE", Goal.MINIMIZE),
        (Goal.MINIMIZE, Goal.MINIMIZE),
    ],
)
def test_a_goal_reads_unspecified_as_maximize(value: object, goal: Goal) -> None:
    assert Goal.parse(value) is goal


@pytest.mark.parametrize("value", ["minimize", "BIGGEST", 2, True])
def test_any_other_goal_is_refused_naming_the_field(value: object) -> None:
    with pytest.raises(ValidationError, match="must be MAXIMIZE or MINIMIZE") as err:
        Goal.parse(value, "studySpec.metrics[0].goal")
    assert err.value.field == "studySpec.metrics[0].goal"


def test_better_is_strict_and_follows_the_sign() -> None:
    assert (Goal.MAXIMIZE.sign, Goal.MINIMIZE.sign) == (1, -1)
    assert [Goal.MAXIMIZE.better(0.9, 0.8), Goal.MAXIMIZE.better(0.8, 0.9)] == [True, False]
    assert [Goal.MINIMIZE.better(0.1, 0.2), Goal.MINIMIZE.better(0.2, 0.1)] == [True, False]
    # a tie is not better
    assert [Goal.MAXIMIZE.better(0.8, 0.8), Goal.MINIMIZE.better(0.8, 0.8)] == [False, False]
    assert str(Goal.MINIMIZE) == f"{Goal.MINIMIZE}" == "MINIMIZE"


def test_console_url() -> None:
    assert (
        console_url("my-proj", "job_1")
        == "https://console.cloud.google.com/ai-platform/jobs/job_1?project=my-proj"
    )


def test_summary_of_tuning_job_is_json_serialisable() -> None:
    job = {
        "jobId": "tune_1",
        "state": "SUCCEEDED",
        "trainingInput": {
            "jobDir": "gs://b/out",
            "hyperparameters": {"goal": "MINIMIZE", "params": []},
        },
        "trainingOutput": {"isHyperparameterTuningJob": True, "completedTrialCount": "5", "trials": TRIALS},
        "createTime": "2024-01-01T00:00:00Z",
    }
    summary = ml_summary(job, "proj")
    assert json.loads(json.dumps(summary)) == summary
    assert summary["job_id"] == "tune_1"
    assert summary["project_id"] == "proj"
    assert summary["state"] == "SUCCEEDED"
    assert summary["output_dir"] == "gs://b/out"
    assert summary["console_url"] == console_url("proj", "tune_1")
    assert summary["is_hyperparameter_tuning_job"] is True
    assert summary["goal"] == "MINIMIZE"
    assert summary["hyperparameter_metric_tag"] == DEFAULT_METRIC_TAG
    assert summary["best_trial"]["trialId"] == "5"
    assert len(summary["trials"]) == len(TRIALS)
    assert "training_output" not in summary  # each thing once: the trials are not there twice
    assert list(summary)[:3] == ["job_id", "state", "best_trial"]  # the answers first


def test_summary_of_plain_failed_job() -> None:
    job = {"jobId": "j", "state": "FAILED", "errorMessage": "boom", "name": "projects/p2/jobs/j"}
    summary = ml_summary(job)
    assert summary["project_id"] == "p2"
    assert summary["error_message"] == "boom"
    assert summary["is_hyperparameter_tuning_job"] is False
    assert summary["best_trial"] is None
    assert summary["trials"] == []
    assert ml_summary({"jobId": "j"})["console_url"] is None
    assert ml_summary({"jobId": "j"})["state"] == "STATE_UNSPECIFIED"


BASE: dict[str, Any] = {
    "packageUris": ["gs://b/p.tar.gz"],
    "pythonModule": "trainer.task",
    "region": "us-central1",
    "scheduling": {"maxWaitTime": "3600s"},
    "hyperparameters": {
        "goal": "MAXIMIZE",
        "maxTrials": 4,
        "params": [{"parameterName": "lr", "type": "DOUBLE", "minValue": 0.01, "maxValue": 1}],
    },
}


def test_diff_ignores_server_defaults_and_canonical_forms() -> None:
    returned = {
        **BASE,
        "scaleTier": "BASIC",
        "runtimeVersion": "1.0",
        "workerCount": "0",
        "scheduling": {"maxWaitTime": "3600.000s", "maxRunningTime": "604800s"},
        "hyperparameters": {
            "goal": "MAXIMIZE",
            "maxTrials": "4",
            "maxParallelTrials": 1,
            "hyperparameterMetricTag": DEFAULT_METRIC_TAG,
            "params": [
                {
                    "parameterName": "lr",
                    "type": "DOUBLE",
                    "minValue": 0.01,
                    "maxValue": 1.0,
                    "scaleType": "NONE",
                }
            ],
        },
    }
    assert diff_training_input(BASE, returned) == []


def test_diff_lists_differing_fields() -> None:
    other = {
        **BASE,
        "packageUris": ["gs://b/other.tar.gz"],
        "args": ["--epochs", "3"],
        "hyperparameters": {
            **BASE["hyperparameters"],
            "params": [{"parameterName": "lr", "type": "DOUBLE", "minValue": 0.01, "maxValue": 2}],
        },
    }
    assert diff_training_input(BASE, other) == ["args", "hyperparameters.params[0].maxValue", "packageUris"]


def test_diff_counts_server_filled_fields_the_request_named() -> None:
    assert diff_training_input({**BASE, "runtimeVersion": "2.11"}, {**BASE, "runtimeVersion": "2.4"}) == [
        "runtimeVersion"
    ]
    assert diff_training_input({**BASE, "scaleTier": "BASIC_GPU"}, BASE) == ["scaleTier"]


def test_best_trial_report_names_the_winner_and_how_a_tie_was_broken() -> None:
    def trial(trial_id: str, value: float | None, state: str = "SUCCEEDED") -> dict[str, Any]:
        out: dict[str, Any] = {"trialId": trial_id, "state": state, "hyperparameters": {"C": trial_id}}
        if value is not None:
            out["finalMetric"] = {"trainingStep": "1", "objectiveValue": value}
        return out

    trials = [
        trial("1", 0.9),
        trial("2", 0.95),
        trial("3", 0.95),
        trial("4", 0.99, "FAILED"),
        trial("5", None),
    ]
    summary = {
        "is_hyperparameter_tuning_job": True,
        "hyperparameter_metric_tag": "accuracy",
        "goal": "MAXIMIZE",
        "trials": trials,
        "best_trial": best_trial(trials, "MAXIMIZE"),
    }
    report = best_trial_report(summary)
    assert report is not None
    assert report.startswith("Best trial: 2 with accuracy = 0.95 (MAXIMIZE, 3 of 5 trials scored)")
    assert "hyperparameters: C=2" in report
    assert "2 trials tied at 0.95 (2, 3): the earliest in the list won" in report
    alone = {**summary, "trials": trials[:2], "best_trial": trials[1]}
    assert "tied" not in str(best_trial_report(alone))
    assert best_trial_report({**summary, "is_hyperparameter_tuning_job": False}) is None


@pytest.mark.parametrize(
    ("first", "second", "shown"),
    [
        (0.8444444444444444, 0.8888888888888888, ("0.8444", "0.8889")),
        (0.9, 0.9, ("0.9", "0.9")),  # a tie reads as one
        (0.91234561, 0.91234569, ("0.9123456", "0.9123457")),  # as many digits as tell them apart
        (1234.5678, 0.5, ("1235", "0.5")),
        (None, 0.5, ("None", "0.5")),
    ],
)
def test_metrics_apart_shows_what_the_comparison_needs(
    first: float | None, second: float | None, shown: tuple[str, str]
) -> None:
    assert metrics_apart(first, second) == shown

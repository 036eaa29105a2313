"""Hyperparameter tuning on the local service: trials as processes, metrics from cloudml-hypertune."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from airflow_aip.jobs import best_trial
from tests.fixtures.local_service import TERMINAL, LocalService, StagedTrainer, log_entries, wait_for_state

pytestmark = pytest.mark.integration

BONUS = {"good": 1.0, "bad": 0.0}


def _objective(hyperparameters: dict[str, str]) -> float:
    """What aip_test_trainer.tune computes (y stays at its default 0.5)."""
    return -((float(hyperparameters["x"]) - 3) ** 2) + BONUS[hyperparameters["kind"]]


def _grid_spec(**extra: Any) -> dict[str, Any]:
    spec = {
        "goal": "MAXIMIZE",
        "algorithm": "GRID_SEARCH",
        "maxTrials": 6,
        "params": [
            {
                "parameterName": "x",
                "type": "INTEGER",
                "minValue": 1,
                "maxValue": 3,
                "scaleType": "UNIT_LINEAR_SCALE",
            },
            {"parameterName": "kind", "type": "CATEGORICAL", "categoricalValues": ["good", "bad"]},
        ],
    }
    spec.update(extra)
    return spec


def _max_overlap(trials: list[dict[str, Any]]) -> int:
    """The largest number of trials running at one instant, from their start and end times."""
    events = sorted([(t["startTime"], 1) for t in trials] + [(t["endTime"], -1) for t in trials])
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    return peak


def test_six_trials_two_at_a_time_find_the_best(
    local_service: LocalService, staged_trainer: StagedTrainer
) -> None:
    project = f"tune-{uuid.uuid4().hex[:8]}"
    ml = local_service.ml()
    ti = staged_trainer.training_input(
        "tune", ["--hold", "1.5"], hyperparameters=_grid_spec(maxParallelTrials=2)
    )
    ml.projects().jobs().create(
        parent=f"projects/{project}", body={"jobId": "grid", "trainingInput": ti}
    ).execute()

    job = wait_for_state(ml, f"projects/{project}/jobs/grid", TERMINAL, timeout=300)

    assert job["state"] == "SUCCEEDED", job.get("errorMessage")
    output = job["trainingOutput"]
    trials = output["trials"]
    assert output["isHyperparameterTuningJob"] is True
    assert output["completedTrialCount"] == "6"
    assert output["hyperparameterMetricTag"] == "training/hptuning/metric"
    assert sorted(t["trialId"] for t in trials) == ["1", "2", "3", "4", "5", "6"]
    assert sorted((t["hyperparameters"]["x"], t["hyperparameters"]["kind"]) for t in trials) == sorted(
        (str(x), kind) for x in (1, 2, 3) for kind in ("good", "bad")
    )
    for trial in trials:
        assert trial["state"] == "SUCCEEDED"
        assert trial["isTrialStoppedEarly"] is False
        assert trial["finalMetric"] == {
            "trainingStep": "300",
            "objectiveValue": _objective(trial["hyperparameters"]),
        }
        assert trial["startTime"] < trial["endTime"]
    assert _max_overlap(trials) == 2
    best = best_trial(trials, "MAXIMIZE")
    assert best is not None
    assert best["hyperparameters"] == {"x": "3", "kind": "good"}
    assert best["finalMetric"]["objectiveValue"] == 1.0

    trial_lines = log_entries(local_service.url, project, "grid", 'labels."ml.googleapis.com/trial_id"="4"')
    assert any(e["textPayload"].startswith("trial 4 ") for e in trial_lines)
    assert {e["labels"]["ml.googleapis.com/trial_id"] for e in trial_lines} == {"4"}


def test_max_failed_trials_fails_the_job(local_service: LocalService, staged_trainer: StagedTrainer) -> None:
    project = f"tune-{uuid.uuid4().hex[:8]}"
    ml = local_service.ml()
    spec = _grid_spec(maxTrials=6, maxParallelTrials=1, maxFailedTrials=1)
    spec["params"] = spec["params"][:1]  # x in 1..3
    ti = staged_trainer.training_input("tune", ["--kind", "good", "--fail-when-x", "2"], hyperparameters=spec)
    ml.projects().jobs().create(
        parent=f"projects/{project}", body={"jobId": "flaky", "trainingInput": ti}
    ).execute()

    job = wait_for_state(ml, f"projects/{project}/jobs/flaky", TERMINAL, timeout=300)

    assert job["state"] == "FAILED"
    assert "maxFailedTrials (1)" in job["errorMessage"]
    assert "non-zero status of 2" in job["errorMessage"]
    failed = [t for t in job["trainingOutput"]["trials"] if t["state"] == "FAILED"]
    assert [t["hyperparameters"]["x"] for t in failed] == ["2"]
    assert all(t["state"] == "SUCCEEDED" for t in job["trainingOutput"]["trials"] if t not in failed)


def test_model_based_search_minimizes_with_a_custom_tag(
    local_service: LocalService, staged_trainer: StagedTrainer
) -> None:
    project = f"tune-{uuid.uuid4().hex[:8]}"
    ml = local_service.ml()
    spec = {
        "goal": "MINIMIZE",
        "hyperparameterMetricTag": "loss",
        "maxTrials": 3,
        "maxParallelTrials": 1,
        "params": [
            {
                "parameterName": "x",
                "type": "DOUBLE",
                "minValue": 0.01,
                "maxValue": 10,
                "scaleType": "UNIT_LOG_SCALE",
            },
            {
                "parameterName": "y",
                "type": "DOUBLE",
                "minValue": 1,
                "maxValue": 2,
                "scaleType": "UNIT_REVERSE_LOG_SCALE",
            },
        ],
    }
    ti = staged_trainer.training_input("tune", ["--metric-tag", "loss"], hyperparameters=spec)
    ml.projects().jobs().create(
        parent=f"projects/{project}", body={"jobId": "tpe", "trainingInput": ti}
    ).execute()

    job = wait_for_state(ml, f"projects/{project}/jobs/tpe", TERMINAL, timeout=300)

    assert job["state"] == "SUCCEEDED", job.get("errorMessage")
    trials = job["trainingOutput"]["trials"]
    assert job["trainingOutput"]["hyperparameterMetricTag"] == "loss"
    assert len(trials) == 3
    for trial in trials:
        x, y = float(trial["hyperparameters"]["x"]), float(trial["hyperparameters"]["y"])
        assert 0.01 <= x <= 10
        assert 1 <= y <= 2
        assert "finalMetric" in trial
    best = best_trial(trials, "MINIMIZE")
    assert best is not None
    assert best["finalMetric"]["objectiveValue"] == min(t["finalMetric"]["objectiveValue"] for t in trials)


def test_early_stopping_stops_trials_behind_the_median(
    local_service: LocalService, staged_trainer: StagedTrainer
) -> None:
    # A fixed project and job id fix the search's seed, so the trial order is the same every run.
    ml = local_service.ml()
    spec = _grid_spec(maxParallelTrials=1, enableTrialEarlyStopping=True)
    ti = staged_trainer.training_input("tune", ["--hold", "1.5"], hyperparameters=spec)
    body = {"jobId": "early_stop", "trainingInput": ti}
    ml.projects().jobs().create(parent="projects/early-stop-project", body=body).execute()

    job = wait_for_state(ml, "projects/early-stop-project/jobs/early_stop", TERMINAL, timeout=300)

    assert job["state"] == "SUCCEEDED", job.get("errorMessage")
    trials = job["trainingOutput"]["trials"]
    stopped = [t for t in trials if t["isTrialStoppedEarly"]]
    assert stopped, "no trial was stopped early"
    for trial in stopped:
        assert trial["state"] == "SUCCEEDED"
        assert int(trial["finalMetric"]["trainingStep"]) < 300
        assert trial["finalMetric"]["objectiveValue"] < _objective(trial["hyperparameters"])
    best = best_trial(trials, "MAXIMIZE")
    assert best is not None
    assert best["isTrialStoppedEarly"] is False

"""The optuna-backed search: what each algorithm and scale type tries, pruning, metric files."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import hypertune
import optuna
import pytest

from airflow_aip.local.executor.tuning import HyperparameterSearch, read_metric_reports


def _spec(params: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"goal": "MAXIMIZE", "maxTrials": 10, "params": params, **extra}


GRID: list[dict[str, Any]] = [
    {"parameterName": "layers", "type": "INTEGER", "minValue": 1, "maxValue": 3},
    {"parameterName": "opt", "type": "CATEGORICAL", "categoricalValues": ["adam", "sgd"]},
]


def test_grid_search_visits_every_point_once_even_when_asked_in_parallel() -> None:
    search = HyperparameterSearch(_spec(GRID, algorithm="GRID_SEARCH", maxTrials=50), "p/j")
    asked = [search.ask(str(i)) for i in range(1, search.max_trials + 1)]
    assert search.max_trials == 6
    assert sorted((a["layers"], a["opt"]) for a in asked) == sorted(
        (str(n), o) for n in (1, 2, 3) for o in ("adam", "sgd")
    )
    for i in range(1, 7):
        search.tell(str(i), float(i))


def test_grid_search_refuses_a_continuous_parameter() -> None:
    params = [{"parameterName": "lr", "type": "DOUBLE", "minValue": 0.1, "maxValue": 1}]
    with pytest.raises(ValueError, match="GRID_SEARCH"):
        HyperparameterSearch(_spec(params, algorithm="GRID_SEARCH"), "p/j")


@pytest.mark.parametrize(
    ("algorithm", "sampler"),
    [
        ("GRID_SEARCH", optuna.samplers.GridSampler),
        ("RANDOM_SEARCH", optuna.samplers.RandomSampler),
        ("ALGORITHM_UNSPECIFIED", optuna.samplers.TPESampler),
    ],
)
def test_algorithm_picks_the_sampler(algorithm: str, sampler: type) -> None:
    search = HyperparameterSearch(_spec(GRID, algorithm=algorithm), "p/j")
    assert isinstance(search.study.sampler, sampler)
    assert search.study.direction == optuna.study.StudyDirection.MAXIMIZE


def test_values_are_formatted_as_the_trainer_parses_them() -> None:
    params: list[dict[str, Any]] = [
        {"parameterName": "batch", "type": "DISCRETE", "discreteValues": [64]},
        {"parameterName": "drop", "type": "DISCRETE", "discreteValues": [0.25]},
        {"parameterName": "units", "type": "INTEGER", "minValue": 8, "maxValue": 8.0},
        {"parameterName": "lr", "type": "DOUBLE", "minValue": 0.5, "maxValue": 0.5000001},
    ]
    asked = HyperparameterSearch(_spec(params), "p/j").ask("1")
    assert asked["batch"] == "64"
    assert asked["drop"] == "0.25"
    assert asked["units"] == "8"
    assert 0.5 <= float(asked["lr"]) <= 0.5000001


def test_vertex_passes_discrete_values_as_floats_and_integers_as_integers() -> None:
    """Vertex sends "128.0" for a DiscreteParameterSpec value (search_spec's discreteFormat)."""
    params: list[dict[str, Any]] = [
        {"parameterName": "batch", "type": "DISCRETE", "discreteValues": [128]},
        {"parameterName": "units", "type": "INTEGER", "minValue": 8, "maxValue": 8},
    ]
    asked = HyperparameterSearch(_spec(params, discreteFormat="float"), "p/j").ask("1")
    assert asked == {"batch": "128.0", "units": "8"}


@pytest.mark.parametrize(
    ("scale", "expect_high"), [("UNIT_LOG_SCALE", False), ("UNIT_REVERSE_LOG_SCALE", True)]
)
def test_log_scales_skew_samples_within_bounds(scale: str, expect_high: bool) -> None:
    params = [{"parameterName": "x", "type": "DOUBLE", "minValue": 1, "maxValue": 1000, "scaleType": scale}]
    search = HyperparameterSearch(_spec(params, algorithm="RANDOM_SEARCH", maxTrials=200), f"seed-{scale}")
    values = []
    for i in range(200):
        values.append(float(search.ask(str(i))["x"]))
        search.tell(str(i), 0.0)
    assert all(1 <= v <= 1000 for v in values)
    # Linear sampling would put the median near 500; log puts it near 32, reverse log near 969.
    assert (statistics.median(values) > 900) is expect_high
    assert (statistics.median(values) < 100) is not expect_high


def test_early_stopping_prunes_a_trial_behind_the_median() -> None:
    params = [{"parameterName": "x", "type": "DOUBLE", "minValue": 0, "maxValue": 1}]
    search = HyperparameterSearch(_spec(params, enableTrialEarlyStopping=True), "p/j")
    for trial_id in ("1", "2"):
        search.ask(trial_id)
        for value in (5.0, 6.0, 7.0):
            assert search.report(trial_id, value) is False
        search.tell(trial_id, 7.0)
    search.ask("3")
    assert search.report("3", 0.0) is True
    search.tell("3", 0.0, stopped_early=True)
    states = [t.state for t in search.study.trials]
    assert states[-1] == optuna.trial.TrialState.PRUNED


def test_without_early_stopping_nothing_is_pruned() -> None:
    params = [{"parameterName": "x", "type": "DOUBLE", "minValue": 0, "maxValue": 1}]
    search = HyperparameterSearch(_spec(params), "p/j")
    for trial_id in ("1", "2"):
        search.ask(trial_id)
        search.report(trial_id, 9.0)
        search.tell(trial_id, 9.0)
    search.ask("3")
    assert search.report("3", -100.0) is False


def test_reads_what_cloudml_hypertune_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    metric_file = tmp_path / "hypertune" / "output.metrics"
    monkeypatch.setenv("CLOUD_ML_HP_METRIC_FILE", str(metric_file))
    monkeypatch.setenv("CLOUD_ML_TRIAL_ID", "4")
    tuner = hypertune.HyperTune()
    tuner.report_hyperparameter_tuning_metric("accuracy", 0.5, global_step=10)
    tuner.report_hyperparameter_tuning_metric("other", 99, global_step=15)
    tuner.report_hyperparameter_tuning_metric("accuracy", 0.75, global_step=20)
    metric_file.write_text(metric_file.read_text() + '{"accuracy": "0.9", "global_')  # torn write

    reports = read_metric_reports(metric_file, "accuracy")

    assert [(r.global_step, r.value) for r in reports] == [(10, 0.5), (20, 0.75)]
    assert reports[0].timestamp <= reports[1].timestamp
    assert read_metric_reports(metric_file, "training/hptuning/metric") == []
    assert read_metric_reports(tmp_path / "absent", "accuracy") == []

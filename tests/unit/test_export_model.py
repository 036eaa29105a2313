"""The export policy: what is exported, where, and when a challenger replaces the champion."""

from __future__ import annotations

import pytest

from airflow_aip.exceptions import ValidationError
from airflow_aip.export import (
    champion_metric,
    champion_standing,
    export_source,
    metric_from_file,
    relative_names,
    same_export,
    source_standing,
)
from airflow_aip.jobs.trials import Goal
from airflow_aip.registry.gate import Standing, judge
from airflow_aip.uris import parse_gcs_uri


def _tuning(state: str = "SUCCEEDED", goal: str = "MAXIMIZE") -> dict[str, object]:
    trials = [
        {
            "trialId": "1",
            "state": "SUCCEEDED",
            "finalMetric": {"objectiveValue": 0.8},
            "hyperparameters": {"C": "1"},
        },
        {
            "trialId": "2",
            "state": "SUCCEEDED",
            "finalMetric": {"objectiveValue": 0.9},
            "hyperparameters": {"C": "2"},
        },
        {"trialId": "3", "state": "SUCCEEDED"},
    ]
    from tests.fixtures.views import ml_summary

    return ml_summary(
        {
            "jobId": "j1",
            "state": state,
            "trainingInput": {"jobDir": "gs://bkt/out", "hyperparameters": {"goal": goal, "maxTrials": 3}},
            "trainingOutput": {"isHyperparameterTuningJob": True, "trials": trials},
        },
        "p",
    )


def test_tuning_job_exports_its_best_trial_by_goal() -> None:
    best = export_source(_tuning(), "model")
    assert (best.trial_id, best.metric, best.prefix.uri) == ("2", 0.9, "gs://bkt/out/2/model")
    assert best.hyperparameters == {"C": "2"}
    assert best.version == "j1_trial2"
    worst = export_source(_tuning(goal="MINIMIZE"))
    assert (worst.trial_id, worst.prefix.uri) == ("1", "gs://bkt/out/1")


def test_plain_job_exports_its_job_dir() -> None:
    from tests.fixtures.views import ml_summary

    source = export_source(
        ml_summary({"jobId": "j2", "state": "SUCCEEDED", "trainingInput": {"jobDir": "gs://bkt/x"}})
    )
    assert (source.prefix.uri, source.trial_id, source.metric, source.version) == (
        "gs://bkt/x",
        None,
        None,
        "j2",
    )


@pytest.mark.parametrize("state", ["FAILED", "CANCELLED", "RUNNING"])
def test_only_a_succeeded_job_is_exported(state: str) -> None:
    with pytest.raises(ValidationError, match=f"job_id: job j1 is {state}"):
        export_source(_tuning(state))


def test_source_subdir_cannot_escape() -> None:
    with pytest.raises(ValidationError, match="source_subdir"):
        export_source(_tuning(), "../other")


@pytest.mark.parametrize(
    ("challenger", "champion", "goal", "expected"),
    [
        (0.9, None, "MAXIMIZE", True),
        (0.9, 0.8, "MAXIMIZE", True),
        (0.8, 0.8, "MAXIMIZE", False),
        (0.7, 0.8, "MAXIMIZE", False),
        (0.1, 0.2, "MINIMIZE", True),
        (0.3, 0.2, "MINIMIZE", False),
        (None, 0.2, "MAXIMIZE", False),
    ],
)
def test_beats(challenger: float | None, champion: float | None, goal: str, expected: bool) -> None:
    """What ``beats`` decided before the gate was one rule (tests/unit/test_champion_gate.py has it all)."""
    held = Standing("champion", champion, "accuracy", Goal(goal)) if champion is not None else None
    verdict = judge(Standing("challenger", challenger, "accuracy", Goal(goal)), held, by_hand="by hand")
    assert verdict.promote is expected


def test_an_unspecified_goal_is_exported_as_maximize() -> None:
    for goal in ("GOAL_TYPE_UNSPECIFIED", ""):
        source = export_source(_tuning(goal=goal))
        assert (source.goal, source.trial_id) == ("MAXIMIZE", "2")


def test_the_gate_reads_an_export_by_its_destination_and_a_champion_by_its_model() -> None:
    source = export_source(_tuning(goal="MINIMIZE"))
    destination = parse_gcs_uri("gs://models/iris/j1_trial1")
    assert source_standing(source, destination) == Standing(
        "gs://models/iris/j1_trial1",
        0.8,
        "training/hptuning/metric",
        Goal.MINIMIZE,
        label="j1",
        model_uri="gs://models/iris/j1_trial1",
    )
    recorded = {"tag": "loss", "value": 0.2, "eval_data": "md5:ab"}
    manifest = {"model_uri": destination.uri, "job_id": "j0", "metric": recorded}
    assert champion_standing(manifest, "gs://models/champion.json") == Standing(
        destination.uri, 0.2, "loss", Goal.MAXIMIZE, eval_data="md5:ab", label="j0", model_uri=destination.uri
    )
    assert champion_standing({}, "gs://models/champion.json") == Standing(
        "gs://models/champion.json", None, None, Goal.MAXIMIZE
    )
    with pytest.raises(ValidationError, match="champion_manifest_uri: must be MAXIMIZE or MINIMIZE"):
        champion_standing({"metric": {"value": 1.0, "goal": "BIGGER"}}, "gs://models/champion.json")


def test_metric_from_file_names_the_field() -> None:
    assert metric_from_file(b'{"accuracy": 0.5}', "accuracy") == 0.5
    for bad in (b"not json", b'{"other": 1}', b'{"accuracy": "x"}', b'{"accuracy": NaN}'):
        with pytest.raises(ValidationError, match="metrics_file"):
            metric_from_file(bad, "accuracy")


def test_champion_metric_ignores_non_numbers() -> None:
    assert champion_metric({"metric": {"value": 0.7}}) == 0.7
    assert champion_metric({"metric": {"value": True}}) is None
    assert champion_metric({}) is None


def test_relative_names_skip_only_the_root_manifest_and_other_prefixes() -> None:
    prefix = parse_gcs_uri("gs://bkt/out/2")
    uris = [
        "gs://bkt/out/2/model.joblib",
        "gs://bkt/out/2/manifest.json",
        "gs://bkt/out/2/sub/manifest.json",
        "gs://bkt/out/2/sub/old_manifest.json",
        "gs://bkt/out/20/x",
        "gs://bkt/out/20/manifest.json",
        "gs://bkt/out/2/a/b",
    ]
    assert relative_names(prefix, uris) == [
        "a/b",
        "model.joblib",
        "sub/manifest.json",
        "sub/old_manifest.json",
    ]


def test_same_export_ignores_time_and_run() -> None:
    a = {
        "model_uri": "u",
        "job_id": "j",
        "trial_id": "1",
        "source_uri": "s",
        "objects": [1],
        "exported_at": "t1",
    }
    assert same_export(a, {**a, "exported_at": "t2", "airflow": {"run_id": "other"}})
    assert not same_export(a, {**a, "objects": [2]})

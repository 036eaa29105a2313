"""plan_export: what an export copies and writes, the champion gate, re-runs, and its XCom."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_aip.exceptions import AipError
from airflow_aip.export import ExportSource
from airflow_aip.export_plan import ExportPlan, ObjectCopy, export_destination, plan_export
from airflow_aip.hooks.storage import ObjectInfo
from airflow_aip.stored_manifest import StoredManifest
from airflow_aip.uris import parse_gcs_uri

ROOT = parse_gcs_uri("gs://models/iris")
CHAMPION = parse_gcs_uri("gs://models/champion.json", require_object=True)
RUN = {"dag_id": "d", "task_id": "export", "run_id": "manual__1", "try_number": 1}
PACKAGE = "gs://staging/abc/trainer-0.1.tar.gz"


def _source(metric: float | None = 0.9, goal: str = "MAXIMIZE") -> ExportSource:
    return ExportSource(
        job_id="j1",
        prefix=parse_gcs_uri("gs://out/j1/2"),
        trial_id="2",
        hyperparameters={"C": "2"},
        metric_tag="accuracy",
        metric=metric,
        goal=goal,
        resource_name="projects/p/jobs/j1",
    )


def _object(uri: str, size: int, crc32c: str = "crc==") -> ObjectInfo:
    return ObjectInfo(uri, size, 1, "md5==", crc32c, None, None)


LISTED = [
    _object("gs://out/j1/2/model.joblib", 100),
    _object("gs://out/j1/2/manifest.json", 5),  # a stale root manifest: never copied
    _object("gs://out/j1/2/sub/manifest.json", 7),  # part of the model
    _object("gs://out/j1/20/other", 3),  # another trial's output
]


def _plan(
    listed: list[ObjectInfo] | None = None,
    source: ExportSource | None = None,
    exported_at: str = "2026-01-01T00:00:00+00:00",
    **kwargs: Any,
) -> ExportPlan:
    return plan_export(
        source or _source(),
        ROOT,
        listed=LISTED if listed is None else listed,
        packages={PACKAGE: _object(PACKAGE, 10, "pkg=="), "/local/dep.whl": None},
        run=RUN,
        exported_at=exported_at,
        **kwargs,
    )


def _champion(value: float, generation: int = 7, goal: str = "MAXIMIZE") -> StoredManifest:
    return StoredManifest(generation, {"metric": {"tag": "accuracy", "value": value, "goal": goal}})


def test_without_a_champion_every_object_is_copied_then_the_manifest_written() -> None:
    plan = _plan()
    assert export_destination(_source(), ROOT).uri == "gs://models/iris/j1_trial2"
    assert plan.copies == (
        ObjectCopy("gs://out/j1/2/model.joblib", "gs://models/iris/j1_trial2/model.joblib", 100, "crc=="),
        ObjectCopy(
            "gs://out/j1/2/sub/manifest.json", "gs://models/iris/j1_trial2/sub/manifest.json", 7, "crc=="
        ),
    )
    [write] = plan.writes
    assert (write.uri, write.if_generation_match) == ("gs://models/iris/j1_trial2/manifest.json", 0)
    manifest = write.content
    assert [o["name"] for o in manifest["objects"]] == ["model.joblib", "sub/manifest.json"]
    assert manifest["packages"] == [
        {"uri": PACKAGE, "crc32c": "pkg==", "md5_hash": "md5=="},
        {"uri": "/local/dep.whl", "crc32c": None, "md5_hash": None},
    ]
    assert manifest["airflow"] == RUN
    assert manifest["metric"] == {
        "tag": "accuracy",
        "value": 0.9,
        "goal": "MAXIMIZE",
        "eval_data": None,
        "eval_uri": None,
    }
    assert write.data.startswith(b'{\n  "airflow"')  # sorted, indented JSON
    assert plan.xcom(100) == {
        "job_id": "j1",
        "name": "projects/p/jobs/j1",
        "trial_id": "2",
        "metric": 0.9,
        "metric_tag": "accuracy",
        "eval_data": None,
        "eval_uri": None,
        "destination": "gs://models/iris/j1_trial2",
        "manifest_uri": "gs://models/iris/j1_trial2/manifest.json",
        "objects": 2,
        "bytes": 107,
        "copied_bytes": 100,
        "exported": True,
        "promoted": None,
    }
    assert plan.report(100) == [
        "Exported 2 objects (100 bytes copied) to gs://models/iris/j1_trial2",
        "No champion_manifest_uri: exported without a promotion gate",
    ]


def test_a_rerun_of_the_same_export_rewrites_no_manifest() -> None:
    first = _plan().writes[0].content
    existing = StoredManifest(42, {**first, "exported_at": "earlier", "airflow": {"run_id": "other"}})
    again = _plan(existing_manifest=existing, exported_at="later")
    assert again.writes == ()
    assert len(again.copies) == 2  # the storage hook skips those already there
    assert again.xcom(0)["copied_bytes"] == 0
    assert "gs://models/iris/j1_trial2 already holds this export: nothing rewritten" in again.report(0)


def test_a_different_earlier_export_is_replaced_at_the_generation_read() -> None:
    existing = StoredManifest(42, {"job_id": "j1", "objects": []})
    [write] = _plan(existing_manifest=existing).writes
    assert (write.uri, write.if_generation_match) == ("gs://models/iris/j1_trial2/manifest.json", 42)


def test_a_challenger_that_beats_the_champion_is_exported_then_promoted() -> None:
    plan = _plan(champion_uri=CHAMPION, champion=_champion(0.8))
    manifest, champion = plan.writes  # the model's manifest first, the champion's last
    assert (manifest.uri, champion.uri, champion.if_generation_match) == (
        "gs://models/iris/j1_trial2/manifest.json",
        CHAMPION.uri,
        7,
    )
    assert champion.content == manifest.content
    result = plan.xcom(107)
    assert (result["champion_metric"], result["exported"], result["promoted"]) == (0.8, True, True)
    assert plan.report(107)[-1] == (
        "Promoted gs://models/iris/j1_trial2: accuracy 0.9 on this run's data against the champion's 0.8"
        " (gs://models/champion.json) on data it does not record: promoted;"
        " gs://models/champion.json is the new champion"
    )


def test_the_first_champion_is_created_only_if_there_is_none() -> None:
    plan = _plan(champion_uri=CHAMPION, champion=None)
    assert plan.writes[-1].if_generation_match == 0
    assert (plan.xcom(0)["champion_metric"], plan.xcom(0)["promoted"]) == (None, True)


@pytest.mark.parametrize(("metric", "goal"), [(0.8, "MAXIMIZE"), (0.7, "MAXIMIZE"), (0.9, "MINIMIZE")])
def test_a_challenger_that_does_not_beat_the_champion_is_neither_copied_nor_written(
    metric: float, goal: str
) -> None:
    champion = _champion(0.8, goal=goal)  # one chosen on another goal is refused: test_champion_gate.py
    plan = _plan(listed=[], source=_source(metric, goal), champion_uri=CHAMPION, champion=champion)
    assert (plan.copies, plan.writes) == ((), ())
    verdict = (
        f"accuracy {metric} on this run's data against the champion's 0.8 ({CHAMPION.uri})"
        " on data it does not record"
    )
    lower = " (lower is better)" if goal == "MINIMIZE" else ""
    assert plan.xcom(0) == {
        "job_id": "j1",
        "name": "projects/p/jobs/j1",
        "trial_id": "2",
        "metric": metric,
        "metric_tag": "accuracy",
        "eval_data": None,
        "eval_uri": None,
        "champion_metric": 0.8,
        "champion_recorded_metric": 0.8,
        "champion_job_id": None,
        "same_eval_data": False,
        "decision": "keep",
        "reason": f"{verdict}: kept the champion{lower}",
        "promoted": False,
        "exported": False,
        "destination": None,
    }
    assert plan.report(0) == [f"Not exported: {verdict}: kept the champion{lower}"]


def test_a_rerun_of_the_champions_own_export_rewrites_nothing() -> None:
    """The champion already: exported again (nothing copied twice), no manifest rewritten."""
    first = _plan(champion_uri=CHAMPION, champion=None)
    written = first.writes[0].content
    again = _plan(
        champion_uri=CHAMPION,
        champion=StoredManifest(7, written),
        existing_manifest=StoredManifest(42, written),
        exported_at="later",
    )
    assert again.writes == ()
    result = again.xcom(0)
    assert (result["exported"], result["promoted"], result["champion_metric"]) == (True, True, 0.9)
    assert result["reason"] == "gs://models/iris/j1_trial2 is the champion already"
    assert again.report(0)[-1] == "gs://models/champion.json already names this export: nothing rewritten"


def test_nothing_below_the_source_is_an_error() -> None:
    only_the_stale_manifest = [_object("gs://out/j1/2/manifest.json", 5)]
    with pytest.raises(AipError, match="Nothing to export: no object below gs://out/j1/2"):
        _plan(listed=only_the_stale_manifest)

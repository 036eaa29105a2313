"""The champion gate and evaluation data: same data, different data, refuse; and the champion re-measured.

A retraining run scores its model on its own split, so the champion's recorded metric is, in
general, a score on other rows. :data:`DATA_CASES` is the rule as a table, run through
:func:`airflow_aip.registry.gate.judge` and through both stores' paths (``plan_export`` for Cloud
Storage, ``judge_version`` for the Model Registry), each with the champion's re-measurement.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from airflow_aip.exceptions import ValidationError
from airflow_aip.export import ExportSource, build_manifest, measurement_from_file
from airflow_aip.export_plan import plan_export
from airflow_aip.hooks.storage import ObjectInfo
from airflow_aip.jobs.trials import Goal
from airflow_aip.registry.champion import Contender, judge_version
from airflow_aip.registry.gate import Decision, Measurement, Standing, judge
from airflow_aip.registry.upload import version_labels, version_source
from airflow_aip.stored_manifest import StoredManifest
from airflow_aip.uris import parse_gcs_uri

PROMOTE, KEEP, REFUSE = Decision.PROMOTE, Decision.KEEP, Decision.REFUSE
NEW, OLD = "md5:new-split", "md5:old-split"
CHAMPION_DIR = "gs://models/iris/champ"


@dataclass(frozen=True)
class DataCase:
    id: str
    candidate: float
    champion: float
    champion_data: str | None  # what the champion's recorded metric was measured on
    measured: Measurement | None  # the champion scored again (None: not re-evaluated)
    require: bool  # require_same_eval_data
    decision: Decision
    says: str  # the verdict's sentence, up to the store's name for the champion
    same: bool


def _measured(
    metric: float, data: str | None = NEW, model: str = CHAMPION_DIR, tag: str = "accuracy"
) -> Measurement:
    return Measurement(model, metric, tag, data)


DATA_CASES = [
    DataCase("same data, better", 0.95, 0.9, NEW, None, False, PROMOTE, "on the same data: promoted", True),
    DataCase(
        "same data, worse", 0.85, 0.9, NEW, None, True, KEEP, "on the same data: kept the champion", True
    ),
    DataCase("other data, compared", 0.95, 0.9, OLD, None, False, PROMOTE, "on other data: promoted", False),
    DataCase(
        "other data, kept", 0.85, 0.9, OLD, None, False, KEEP, "on other data: kept the champion", False
    ),
    DataCase(
        "other data, refused",
        0.95,
        0.9,
        OLD,
        None,
        True,
        REFUSE,
        "on other data: not compared (require_same_eval_data)",
        False,
    ),
    DataCase(
        "unrecorded data, refused",
        0.95,
        0.9,
        None,
        None,
        True,
        REFUSE,
        "on data it does not record: not compared",
        False,
    ),
    # Re-measured on this run's data, the champion's score is the one compared: 0.9 on the old rows
    # would let 0.93 win; 0.96 on the new rows keeps the champion.
    DataCase("re-measured, kept", 0.93, 0.9, OLD, _measured(0.96), True, KEEP, "0.96 (", True),
    DataCase(
        "re-measured, promoted",
        0.97,
        0.99,
        OLD,
        _measured(0.96),
        True,
        PROMOTE,
        "on the same data: promoted",
        True,
    ),
    # A measurement of another model (the champion changed since) or another metric does not count.
    DataCase(
        "another model's measurement",
        0.93,
        0.9,
        OLD,
        _measured(0.96, model="gs://models/iris/other"),
        False,
        PROMOTE,
        "0.9 (",
        False,
    ),
    DataCase(
        "another metric's measurement",
        0.93,
        0.9,
        OLD,
        _measured(0.96, tag="auc"),
        True,
        REFUSE,
        "other data",
        False,
    ),
    DataCase(
        "measured on yet other data",
        0.93,
        0.9,
        OLD,
        _measured(0.96, data="md5:third"),
        True,
        REFUSE,
        "0.96 (",
        False,
    ),
]
CASES = [pytest.param(case, id=case.id) for case in DATA_CASES]


@pytest.mark.parametrize("case", CASES)
def test_the_rule(case: DataCase) -> None:
    candidate = Standing("candidate", case.candidate, "accuracy", Goal.MAXIMIZE, eval_data=NEW)
    recorded = Standing(
        "champion",
        case.champion,
        "accuracy",
        Goal.MAXIMIZE,
        eval_data=case.champion_data,
        model_uri=CHAMPION_DIR,
    )
    champion = recorded.measured(case.measured)
    verdict = judge(candidate, champion, by_hand="By hand.", require_same_eval_data=case.require)
    assert (verdict.decision, verdict.same_data) == (case.decision, case.same)
    assert case.says in verdict.reason
    assert verdict.reason.endswith("By hand.") is (case.decision is REFUSE)


def test_the_sentence_says_it_once() -> None:
    """One short sentence: both numbers, the champion's version, the data, the outcome; no goal."""
    candidate = Standing("version 4", 0.9556, "accuracy", Goal.MAXIMIZE, eval_data=NEW, label="v4")
    champion = Standing("version 3", 0.9333, "accuracy", Goal.MAXIMIZE, eval_data=NEW, label="v3")
    verdict = judge(candidate, champion, by_hand="")
    expected = (
        "accuracy 0.9556 on this run's data against the champion's 0.9333 (v3) on the same data: promoted"
    )
    assert verdict.reason == expected
    assert "MAXIMIZE" not in verdict.reason
    first = judge(candidate, None, by_hand="")
    assert first.reason == "accuracy 0.9556 on this run's data; there is no champion yet: promoted"


def _manifest(model_uri: str, job_id: str, metric: float, eval_data: str | None) -> dict[str, object]:
    source = ExportSource(
        job_id=job_id,
        prefix=parse_gcs_uri(f"gs://out/{job_id}"),
        metric_tag="accuracy",
        metric=metric,
        eval_data=eval_data,
        eval_uri="gs://data/eval.csv" if eval_data else None,
    )
    return build_manifest(source, parse_gcs_uri(model_uri), [], [], {"dag_id": "d"}, "2026-01-01")


@pytest.mark.parametrize("case", CASES)
def test_the_cloud_storage_store(case: DataCase) -> None:
    source = ExportSource(
        job_id="cand",
        prefix=parse_gcs_uri("gs://out/cand"),
        metric_tag="accuracy",
        metric=case.candidate,
        eval_data=NEW,
    )
    champion = _manifest(CHAMPION_DIR, "champ", case.champion, case.champion_data)
    plan = plan_export(
        source,
        parse_gcs_uri("gs://models/iris"),
        listed=[ObjectInfo("gs://out/cand/model.joblib", 10, 1, "md5==", "crc==", None, None)],
        packages={},
        run={"dag_id": "d"},
        exported_at="2026-01-02",
        champion_uri=parse_gcs_uri("gs://models/champion.json", require_object=True),
        champion=StoredManifest(5, champion),
        measurement=case.measured,
        require_same_eval_data=case.require,
    )
    result = plan.xcom(10)
    assert (result["decision"], result["same_eval_data"]) == (case.decision.value, case.same)
    assert case.says in result["reason"]
    assert "(champ)" in result["reason"]  # the champion named by its job
    assert result["champion_recorded_metric"] == case.champion
    assert result["eval_data"] == NEW
    written = [w.content["metric"]["eval_data"] for w in plan.writes]  # the model's manifest, the champion's
    assert written == ([NEW, NEW] if case.decision is PROMOTE else [])


@pytest.mark.parametrize("case", CASES)
def test_the_model_registry_store(case: DataCase) -> None:
    def contender(version_id: str, uri: str, metric: float, data: str | None) -> Contender:
        source = version_source(_manifest(uri, f"job_{version_id}", metric, data), f"{uri}/manifest.json")
        return Contender(
            version_id,
            source.metric,
            source.metric_tag,
            source.goal,
            source.manifest_uri,
            None,
            source.eval_data,
        )

    candidate = contender("4", "gs://models/iris/cand", case.candidate, NEW)
    champion = contender("3", CHAMPION_DIR, case.champion, case.champion_data)
    verdict = judge_version(
        candidate,
        champion,
        alias="champion",
        ledger_uri="gs://models/ledger.json",
        measurement=case.measured,
        require_same_eval_data=case.require,
    )
    assert (verdict.decision, verdict.same_data) == (case.decision, case.same)
    assert case.says in verdict.reason
    assert "(v3)" in verdict.reason


def test_a_version_records_its_eval_data() -> None:
    manifest = _manifest("gs://models/iris/v", "job", 0.9, "md5:0123abcd")
    source = version_source(manifest, "gs://models/iris/v/manifest.json")
    assert (source.eval_data, source.eval_uri) == ("md5:0123abcd", "gs://data/eval.csv")
    assert version_labels(source)["aip_eval_md5"] == "0123abcd"
    assert (
        Contender.from_json(Contender("3", 0.9, "accuracy", "MAXIMIZE", eval_data=NEW).to_json()).eval_data
        == NEW
    )


def test_an_evaluation_file_is_a_measurement() -> None:
    data = {
        "accuracy": 0.96,
        "evaluated_model_uri": CHAMPION_DIR,
        "eval_data": {"uri": "gs://d/e.csv", "md5": "ab"},
    }
    assert measurement_from_file(json.dumps(data).encode(), "accuracy", "champion_evaluation") == Measurement(
        CHAMPION_DIR, 0.96, "accuracy", "md5:ab"
    )
    del data["evaluated_model_uri"]
    with pytest.raises(ValidationError, match=r"champion_evaluation.*evaluated_model_uri"):
        measurement_from_file(json.dumps(data).encode(), "accuracy", "champion_evaluation")

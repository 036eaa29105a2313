"""One champion gate, one table: the pure rule, then each champion store's own path through it.

:data:`tests.fixtures.champion_gate.GATE_CASES` is the table. It is run here three ways: through
:func:`airflow_aip.registry.gate.judge` itself; through the Cloud Storage store (a job summary
read by ``export_source``, a champion manifest written by ``build_manifest``, decided by
``plan_export``); and through the Model Registry store's rule (export manifests read by
``version_source``, decided by ``judge_version``). tests/integration/test_model_registry.py runs
the same table through ``RegisterModelOperator`` against the local service.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_aip.export import export_source
from airflow_aip.export_plan import plan_export
from airflow_aip.hooks.storage import ObjectInfo
from airflow_aip.jobs.trials import Goal
from airflow_aip.registry.champion import Contender, judge_version
from airflow_aip.registry.gate import Standing, judge
from airflow_aip.registry.upload import version_source
from airflow_aip.stored_manifest import StoredManifest
from airflow_aip.uris import parse_gcs_uri
from tests.fixtures.champion_gate import CASES, PROMOTE, REFUSE, GateCase, Side
from tests.fixtures.views import ml_summary


def _standing(name: str, side: Side) -> Standing:
    return Standing(name, side.metric, side.tag, Goal.parse(side.goal))


@pytest.mark.parametrize("case", CASES)
def test_the_gate(case: GateCase) -> None:
    champion = _standing("the champion", case.champion) if case.champion else None
    verdict = judge(_standing("the candidate", case.candidate), champion, by_hand="Promote it by hand.")
    assert (verdict.decision, verdict.promote) == (case.decision, case.decision is PROMOTE)
    assert case.says in verdict.reason
    assert verdict.reason.endswith("Promote it by hand.") is (case.decision is REFUSE)


def test_the_champion_itself_is_the_champion_already() -> None:
    same = Standing("version 3", 0.9, "accuracy", Goal.MAXIMIZE)
    verdict = judge(same, same, by_hand="by hand")
    assert (verdict.decision, verdict.reason) == (PROMOTE, "version 3 is the champion already")
    rerun = judge(
        Standing("version 3", None, None, Goal.MAXIMIZE), same, by_hand="by hand"
    )  # before any metric is read
    assert rerun.promote


# -- The Cloud Storage store: a job's summary, a champion manifest, the export plan ------------------

ROOT = parse_gcs_uri("gs://models/iris")
CHAMPION_URI = parse_gcs_uri("gs://models/champion.json", require_object=True)


def _summary(side: Side) -> dict[str, Any]:
    """A SUCCEEDED ml v1 job whose export has ``side``'s metric: a tuning job, or a plain one without."""
    if side.metric is None:
        return ml_summary(
            {"jobId": "cand", "state": "SUCCEEDED", "trainingInput": {"jobDir": "gs://out/cand"}}
        )
    hyperparameters = {"goal": side.goal, "hyperparameterMetricTag": side.tag, "maxTrials": 1}
    trial = {"trialId": "1", "state": "SUCCEEDED", "finalMetric": {"objectiveValue": side.metric}}
    job = {
        "jobId": "cand",
        "state": "SUCCEEDED",
        "trainingInput": {"jobDir": "gs://out/cand", "hyperparameters": hyperparameters},
        "trainingOutput": {"isHyperparameterTuningJob": True, "trials": [trial]},
    }
    return ml_summary(job)


@pytest.mark.parametrize("case", CASES)
def test_the_cloud_storage_store(case: GateCase) -> None:
    source = export_source(_summary(case.candidate), "")
    champion = case.champion.manifest("gs://models/iris/champ", "champ") if case.champion else None
    plan = plan_export(
        source,
        ROOT,
        listed=[ObjectInfo(f"{source.prefix.uri}/model.joblib", 10, 1, "md5==", "crc==", None, None)],
        packages={},
        run={"dag_id": "d"},
        exported_at="2026-01-02",
        champion_uri=CHAMPION_URI,
        champion=StoredManifest(5, champion) if champion else None,
    )
    result = plan.xcom(10)
    promoted = case.decision is PROMOTE
    assert (result["promoted"], result["exported"]) == (promoted, promoted)
    assert case.says in result["reason"]
    assert [w.uri for w in plan.writes][1:] == ([CHAMPION_URI.uri] if promoted else [])
    assert len(plan.copies) == (1 if promoted else 0)
    if case.decision is REFUSE:  # how to promote by hand, in this store
        assert "export it without champion_manifest_uri, then copy" in result["reason"]
        assert f"over {CHAMPION_URI.uri}" in result["reason"]
    assert plan.report(10)[-1].endswith(
        f"{CHAMPION_URI.uri} is the new champion" if promoted else result["reason"]
    )


# -- The Model Registry store: versions read from their export manifests, the registry's rule ------


def _contender(version_id: str, side: Side) -> Contender:
    uri = f"gs://models/iris/v{version_id}"
    source = version_source(side.manifest(uri, f"job_{version_id}"), f"{uri}/manifest.json")
    return Contender(version_id, source.metric, source.metric_tag, source.goal, source.manifest_uri)


@pytest.mark.parametrize("case", CASES)
def test_the_model_registry_store(case: GateCase) -> None:
    champion = _contender("1", case.champion) if case.champion else None
    ledger = "gs://models/iris/ledger.json"
    verdict = judge_version(_contender("2", case.candidate), champion, alias="champion", ledger_uri=ledger)
    assert verdict.decision is case.decision
    assert case.says in verdict.reason
    if case.decision is REFUSE:  # how to promote by hand, in this store
        assert "move champion to it with the registry's mergeVersionAliases" in verdict.reason

"""The Model Registry's pure rules: names, aliases, containers, the upload body, the gate, the ledger."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.vertex.models import (
    ModelRef,
    alias_changes,
    operation_state,
    parse_model_name,
    validate_alias,
    validate_model_id,
)
from airflow_aip.jobs.vertex.serving import missing_artifact, serving_image_for, serving_of
from airflow_aip.registry.champion import (
    Contender,
    after_promotion,
    after_rollback,
    judge_version,
    ledger_head,
)
from airflow_aip.registry.gate import Verdict
from airflow_aip.registry.upload import (
    SOURCE_LABEL,
    package_sha256,
    source_key,
    upload_request,
    version_source,
)

SHA = "a" * 64
MANIFEST: dict[str, Any] = {
    "model_uri": "gs://bkt/models/iris/job_1_trial3",
    "job_id": "job_1",
    "trial_id": "3",
    "metric": {"tag": "accuracy", "value": 0.93, "goal": "MAXIMIZE"},
    "packages": [{"uri": f"gs://bkt/staging/{SHA}/trainer-0.1.tar.gz"}],
    "airflow": {
        "dag_id": "aip_retraining",
        "task_id": "export_model",
        "run_id": "manual__2026-11-25T10:00:00+00:00",
    },
}
MODEL = ModelRef("proj", "us-central1", "iris-retrained")


def test_model_names_parse_with_a_version_or_an_alias() -> None:
    ref = parse_model_name("projects/p/locations/us-central1/models/m1@champion")
    assert (ref.model_id, ref.version, ref.by_alias) == ("m1", "champion", True)
    assert parse_model_name("projects/p/locations/l/models/m1@12").by_alias is False
    assert ref.at("3").versioned == "projects/p/locations/us-central1/models/m1@3"
    with pytest.raises(ValidationError, match="model resource name"):
        parse_model_name("models/m1", "model")
    with pytest.raises(ValidationError, match="neither a version ID nor an alias"):
        parse_model_name("projects/p/locations/l/models/m1@-x")


@pytest.mark.parametrize("model_id", ["1abc", "-abc", "Abc", "a" * 64, "a.b"])
def test_a_model_id_breaking_the_rule_is_refused(model_id: str) -> None:
    with pytest.raises(ValidationError, match="modelId"):
        validate_model_id(model_id)


def test_aliases_never_read_as_version_ids_and_merges_split_adds_from_removals() -> None:
    for bad in ("1", "champion-", "Champion", "c"):
        with pytest.raises(ValidationError):
            validate_alias(bad)
    assert alias_changes(["champion", "-old", "x1", "-x1"]) == (["champion"], ["old"])


def test_an_operation_reads_as_a_job_state() -> None:
    assert operation_state({"name": "op"}) == "RUNNING"
    assert operation_state({"done": True, "response": {}}) == "SUCCEEDED"
    assert operation_state({"done": True, "error": {"code": 3}}) == "FAILED"


def test_the_serving_container_follows_the_training_one() -> None:
    sklearn = serving_image_for("us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest", "europe-west4")
    assert sklearn == "europe-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-6:latest"
    tf = serving_image_for("us-docker.pkg.dev/vertex-ai/training/tf-gpu.2-15.py310:latest", "us-central1")
    assert tf == "us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15:latest"
    # No prediction container is newer than the newest: the newest not newer than the training one.
    xgb = serving_image_for("us-docker.pkg.dev/vertex-ai/training/xgboost-cpu.2-1:latest", None)
    assert xgb.endswith("xgboost-cpu.2-1:latest")
    with pytest.raises(ValidationError, match="serving_container_image_uri"):
        serving_image_for("us-docker.pkg.dev/vertex-ai/training/ray-cpu.2-9.py310:latest", None)


def test_a_prebuilt_container_needs_exactly_one_model_file() -> None:
    serving = serving_of("us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-6:latest")
    assert serving is not None
    assert missing_artifact(serving, "gs://bkt/m/", ["model.joblib", "metrics.json"]) is None
    assert "exactly one of" in str(missing_artifact(serving, "gs://bkt/m/", ["metrics.json"]))
    assert "more than one" in str(missing_artifact(serving, "gs://bkt/m/", ["model.joblib", "model.pkl"]))
    assert serving_of("gcr.io/me/my-server:1") is None


def test_the_upload_body_ties_the_version_to_its_job_package_data_and_run() -> None:
    source = version_source(MANIFEST, "gs://bkt/models/iris/job_1_trial3/manifest.json")
    assert source.artifact_uri == "gs://bkt/models/iris/job_1_trial3/"
    assert package_sha256(source.packages[0]) == SHA
    first = upload_request(
        source,
        model=MODEL,
        display_name="iris",
        serving_image="img",
        parent_exists=False,
        data_uris=["gs://bkt/d.csv"],
    )
    assert first["modelId"] == "iris-retrained"
    assert "parentModel" not in first
    labels = first["model"]["labels"]
    assert labels[SOURCE_LABEL] == source_key("gs://bkt/models/iris/job_1_trial3")
    assert labels["aip_job_id"] == "job_1"
    assert labels["aip_trial"] == "3"
    assert labels["aip_package_sha256"] == SHA[:63]
    assert labels["aip_run_id"] == "manual__2026-11-25t10-00-00-00-00"
    description = first["model"]["versionDescription"]
    for fact in ("job_1", "trial 3", "accuracy = 0.93", "gs://bkt/d.csv", SHA, "aip_retraining"):
        assert fact in description
    later = upload_request(source, model=MODEL, display_name="iris", serving_image="img", parent_exists=True)
    assert later["parentModel"] == MODEL.name
    assert "modelId" not in later


def test_an_upload_of_a_manifest_without_a_model_is_refused() -> None:
    with pytest.raises(ValidationError, match="manifest_uri"):
        version_source({"job_id": "x"}, "gs://bkt/m.json")


def _c(version: str, metric: float | None, tag: str = "accuracy", goal: str = "MAXIMIZE") -> Contender:
    return Contender(version, metric, tag, goal)


def judge(candidate: Contender, champion: Contender | None) -> Verdict:
    return judge_version(candidate, champion, alias="champion", ledger_uri="gs://bkt/ledger.json")


def test_the_gate_promotes_only_a_better_version_on_the_same_metric() -> None:
    assert judge(_c("1", 0.9), None).promote
    assert judge(_c("2", 0.95), _c("1", 0.9)).promote
    assert not judge(_c("2", 0.9), _c("1", 0.9)).promote  # a tie keeps the champion
    assert not judge(_c("2", 0.8), _c("1", 0.9)).promote
    assert judge(_c("2", 0.1, "loss", "MINIMIZE"), _c("1", 0.2, "loss", "MINIMIZE")).promote
    assert "cannot be compared" in judge(_c("2", 0.95, "auc"), _c("1", 0.9)).reason
    assert "no manifest" in judge(_c("2", 0.95), _c("1", None)).reason
    assert not judge(_c("2", None), _c("1", 0.9)).promote


def test_the_ledger_records_each_champion_and_a_rollback_pops_one() -> None:
    run = {"dag_id": "d"}
    one = after_promotion(
        None, model="m", alias="champion", candidate=_c("1", 0.9), displaced=None, at="t1", run=run
    )
    three = after_promotion(
        one, model="m", alias="champion", candidate=_c("3", 0.97), displaced=_c("1", 0.9), at="t3", run=run
    )
    assert ledger_head(three) == _c("3", 0.97)
    assert [h["version_id"] for h in three["history"]] == ["1"]
    back, restored, removed = after_rollback(three, model="m", alias="champion", at="t4", run=run)
    assert (restored.version_id, removed.version_id) == ("1", "3")
    assert ledger_head(back) == _c("1", 0.9)
    assert [e["action"] for e in back["events"]] == ["promoted", "promoted", "rolled_back"]
    with pytest.raises(ValidationError, match="nothing to roll back to"):
        after_rollback(back, model="m", alias="champion", at="t5", run=run)
    with pytest.raises(ValidationError, match="nothing to roll back"):
        after_rollback(None, model="m", alias="champion", at="t5", run=run)

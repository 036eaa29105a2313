"""The example DAGs, run with ``dag.test()`` against the local training service and fake GCS.

Assertions are on what the pipeline leaves behind (the exported objects and the manifest, the
champion), not only on the run's state. The Model Registry champion sequence runs in
``test_lineage.py``, in the one subprocess that records its OpenLineage events.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.dags


def _json(bucket: Any, name: str) -> Any:
    return json.loads(bucket.blob(name).download_as_bytes())


def _task_states(run: Any) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in run.get_task_instances()}


@pytest.mark.parametrize(
    "backend",
    [
        "vertex",
        # The same DAG on ml v1: only the Param differs, and the vertex run proves the DAG. ml v1's
        # wire format keeps its own tests (unit, and tests/integration/test_training_operators.py).
        pytest.param("ai_platform", marks=pytest.mark.soak),
    ],
)
def test_training_pipeline_tunes_and_exports_the_best_trial(
    dags: dict[str, Any], demo_bucket: Any, airflow_db: Path, backend: str
) -> None:
    """The same DAG on both backends: only the Param differs (the default is Vertex AI)."""
    conf = {"bucket": demo_bucket.name, "max_trials": 4, "max_parallel_trials": 2}
    run = dags["aip_training_pipeline"].test(run_conf={**conf, "backend": backend})
    assert _task_states(run) == dict.fromkeys(
        ["local_capacity", "prepare_data", "build_trainer", "stage_trainer", "tune", "export_best_model"],
        "success",
    ), _task_states(run)
    manifests = [
        b.name for b in demo_bucket.list_blobs(prefix="models/iris/") if b.name.endswith("manifest.json")
    ]
    assert len(manifests) == 1
    manifest = _json(demo_bucket, manifests[0])
    trial = manifest["trial_id"]
    assert manifests[0] == f"models/iris/{manifest['job_id']}_trial{trial}/manifest.json"
    # The exported model is the best trial's: its metric is the highest any trial reported.
    assert manifest["backend"] == backend
    if backend == "vertex":  # the trainer wrote to AIP_MODEL_DIR: <job dir>/<trial>/model/
        assert manifest["source_uri"].endswith(f"/{trial}/model")
        assert "/hyperparameterTuningJobs/" in manifest["resource_name"]
    metrics = [
        _json(demo_bucket, b.name)
        for b in demo_bucket.list_blobs(prefix="jobs/")
        if b.name.endswith("metrics.json")
    ]
    assert len(metrics) == 4
    assert manifest["metric"]["value"] == max(m["accuracy"] for m in metrics)
    assert manifest["hyperparameters"].keys() == {"C", "max_iter"}
    names = {o["name"] for o in manifest["objects"]}
    # The trainer writes to AIP_MODEL_DIR, which the local service sets on both APIs; ml v1's
    # export takes the trial's whole folder, Vertex AI's the model folder in it.
    expected = {"model.joblib", "metrics.json"}
    assert names == (expected if backend == "vertex" else {f"model/{n}" for n in expected})
    prefix = manifests[0].rsplit("/", 1)[0]
    for name in names:
        assert demo_bucket.blob(f"{prefix}/{name}").exists()
    assert manifest["packages"][0]["uri"].startswith(f"gs://{demo_bucket.name}/staging/")
    assert manifest["packages"][0]["crc32c"]
    assert manifest["airflow"]["dag_id"] == "aip_training_pipeline"


def _retrain(dag: Any, data: dict[str, str], c: float, max_iter: int) -> dict[str, Any]:
    """One retraining run on the Cloud Storage store; the XCom of the task that gated the model."""
    conf = {**data, "C": c, "max_iter": max_iter, "reuse_champion_hyperparameters": False}
    run = dag.test(run_conf={**conf, "champion_store": "gcs"})
    assert str(run.state) == "success", _task_states(run)
    ti = next(t for t in run.get_task_instances() if t.task_id == "export_model")
    result: dict[str, Any] = ti.xcom_pull(task_ids="export_model")
    return result


@pytest.mark.parametrize(
    "replaced",
    [
        # make test: no champion -> promoted; worse -> kept out. "A better model replaces the
        # champion" is proven there by the Model Registry sequence's v3 (test_lineage.py).
        pytest.param(False, id="promoted-then-worse-kept-out"),
        # soak: the whole sequence on the Cloud Storage store, a better model replacing the first.
        pytest.param(True, id="promoted-replaced-then-worse-kept-out", marks=pytest.mark.soak),
    ],
)
def test_retraining_promotes_only_a_better_model(
    dags: dict[str, Any], example_bucket: Any, airflow_db: Path, replaced: bool
) -> None:
    """The Cloud Storage champion gate: the champion manifest moves only to a better model."""
    from aip_examples import CHAMPION_MANIFEST_URI

    bucket = example_bucket
    champion = CHAMPION_MANIFEST_URI.split("/", 3)[3]
    if (earlier := bucket.get_blob(champion)) is not None:  # another test's run promoted one
        earlier.delete()

    assert str(dags["aip_prepare_data"].test().state) == "success"
    landed = sorted(b.name for b in bucket.list_blobs(prefix="data/iris/"))
    data = {
        "train_data": f"gs://{bucket.name}/{landed[-1]}",
        "eval_data": f"gs://{bucket.name}/{landed[-2]}",
    }
    assert data["train_data"].endswith("train.csv")
    assert data["eval_data"].endswith("eval.csv")

    retraining = dags["aip_retraining"]
    if replaced:
        weak = _retrain(retraining, data, c=0.0001, max_iter=2)  # no champion yet: promoted
        assert weak["promoted"] is True
        assert _json(bucket, champion)["metric"]["value"] == weak["metric"]

    strong = _retrain(retraining, data, c=10.0, max_iter=200)  # no champion yet, or a better one
    if replaced:
        assert strong["metric"] > weak["metric"]
    else:
        assert _json(bucket, champion)["metric"]["value"] == strong["metric"]
    assert strong["promoted"] is True
    assert _json(bucket, champion)["job_id"] == strong["job_id"]
    assert bucket.blob(f"models/iris-retrained/{strong['job_id']}/model.joblib").exists()

    assert strong["eval_data"].startswith("md5:")  # the metric's evaluation data, in the manifest
    assert _json(bucket, champion)["metric"]["eval_data"] == strong["eval_data"]

    # New data: evaluate_champion scores the champion on this run's split, and the gate compares that.
    from aip_examples import write_split

    new = write_split(bucket.name, f"data/iris-other/{uuid.uuid4().hex[:8]}", seed=99, eval_fraction=0.3)
    generation = bucket.get_blob(champion).generation
    again = _retrain(retraining, {"train_data": new["train"], "eval_data": new["eval"]}, c=0.0001, max_iter=2)
    assert again["promoted"] is False  # worse than the champion on the same rows: kept out
    assert again["exported"] is False
    assert (again["same_eval_data"], again["champion_recorded_metric"]) == (True, strong["metric"])
    assert again["eval_data"] != strong["eval_data"]  # another split, recognised by its md5
    evaluations = [
        _json(bucket, b.name)
        for b in bucket.list_blobs(prefix="jobs/champion_eval/")
        if b.name.endswith("champion_metrics.json")
    ]
    (evaluation,) = [e for e in evaluations if e["eval_data"]["uri"] == new["eval"]]
    assert evaluation["evaluated_model_uri"] == _json(bucket, champion)["model_uri"]
    assert again["champion_metric"] == evaluation["accuracy"]
    assert again["reason"].endswith(f"({strong['job_id']}) on the same data: kept the champion")
    assert bucket.get_blob(champion).generation == generation
    assert not list(bucket.list_blobs(prefix=f"models/iris-retrained/{again['job_id']}"))

"""The example DAGs, run with ``dag.test()`` against the local training service and fake GCS.

Assertions are on what the pipeline leaves behind (the exported objects and the manifest, the
champion), not only on the run's state.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.local_service import LocalService, storage_client

pytestmark = pytest.mark.dags

DAGS = Path(__file__).resolve().parents[2] / "dags"


@pytest.fixture(scope="module")
def dags() -> dict[str, Any]:
    from airflow.dag_processing.dagbag import BundleDagBag

    bag = BundleDagBag(dag_folder=str(DAGS), bundle_path=DAGS, bundle_name="dags-folder")
    assert bag.import_errors == {}
    return dict(bag.dags)


@pytest.fixture
def demo_bucket(local_env: LocalService, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("AIRFLOW__AIP__POLL_INTERVAL", "1")
    return storage_client(local_env.gcs_url).create_bucket(f"aip-dags-{uuid.uuid4().hex[:10]}")


def _json(bucket: Any, name: str) -> Any:
    return json.loads(bucket.blob(name).download_as_bytes())


def _task_states(run: Any) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in run.get_task_instances()}


@pytest.mark.parametrize("backend", ["vertex", "ai_platform"])
def test_training_pipeline_tunes_and_exports_the_best_trial(
    dags: dict[str, Any], demo_bucket: Any, airflow_db: Path, backend: str
) -> None:
    """The same DAG on both backends: only the Param differs (the default is Vertex AI)."""
    conf = {"bucket": demo_bucket.name, "max_trials": 4, "max_parallel_trials": 2}
    run = dags["aip_training_pipeline"].test(run_conf={**conf, "backend": backend})
    assert _task_states(run) == dict.fromkeys(
        ["prepare_data", "build_trainer", "stage_trainer", "tune", "export_best_model"], "success"
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


def _retrain(
    dag: Any, data: dict[str, str], c: float, max_iter: int, store: str = "gcs", **conf: Any
) -> dict[str, Any]:
    """One retraining run; the XCom of the task that gated the model (export, or register)."""
    conf = {**data, "C": c, "max_iter": max_iter, "reuse_champion_hyperparameters": False, **conf}
    run = dag.test(run_conf={**conf, "champion_store": store})
    assert str(run.state) == "success", _task_states(run)
    gate = "export_model" if store == "gcs" else "register_model"
    ti = next(t for t in run.get_task_instances() if t.task_id == gate)
    result: dict[str, Any] = ti.xcom_pull(task_ids=gate)
    return result


def test_retraining_promotes_only_a_better_model(
    dags: dict[str, Any], local_env: LocalService, airflow_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aip_examples import CHAMPION_MANIFEST_URI, EXAMPLE_BUCKET

    monkeypatch.setenv("AIRFLOW__AIP__POLL_INTERVAL", "1")
    client = storage_client(local_env.gcs_url)
    bucket = client.lookup_bucket(EXAMPLE_BUCKET) or client.create_bucket(EXAMPLE_BUCKET)
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
    weak = _retrain(retraining, data, c=0.0001, max_iter=2)  # no champion yet: promoted
    assert weak["promoted"] is True
    first = _json(bucket, champion)
    assert first["metric"]["value"] == weak["metric"]

    strong = _retrain(retraining, data, c=10.0, max_iter=200)
    assert strong["metric"] > weak["metric"]
    assert strong["promoted"] is True
    assert _json(bucket, champion)["job_id"] == strong["job_id"]
    assert bucket.blob(f"models/iris-retrained/{strong['job_id']}/model.joblib").exists()

    generation = bucket.get_blob(champion).generation
    again = _retrain(retraining, data, c=0.0001, max_iter=2)  # worse than the champion: kept out
    assert again["promoted"] is False
    assert again["exported"] is False
    assert again["champion_metric"] == strong["metric"]
    assert bucket.get_blob(champion).generation == generation
    assert not list(bucket.list_blobs(prefix=f"models/iris-retrained/{again['job_id']}"))


def _champion_events() -> list[dict[str, Any]]:
    """The extras of the ``iris_champion_model`` Asset's events, oldest first."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        query = (
            select(AssetEvent)
            .join(AssetModel, AssetEvent.asset_id == AssetModel.id)
            .where(AssetModel.name == "iris_champion_model")
            .order_by(AssetEvent.id)
        )
        return [dict(event.extra or {}) for event in session.scalars(query)]


def test_retraining_registers_every_model_and_the_champion_moves_only_past_the_gate(
    dags: dict[str, Any], local_env: LocalService, airflow_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """v1 is champion, a worse v2 is registered without it, a better v3 takes it, a rollback gives it back."""
    from aip_examples import EXAMPLE_BUCKET, write_split

    from tests.fixtures.vertex import LOCATION, vertex_sdk

    monkeypatch.setenv("AIRFLOW__AIP__POLL_INTERVAL", "1")
    client = storage_client(local_env.gcs_url)
    bucket = client.lookup_bucket(EXAMPLE_BUCKET) or client.create_bucket(EXAMPLE_BUCKET)
    # A fixed split, so the three models' accuracies are known: 0.889, 0.844 and 1.0.
    split = write_split(
        EXAMPLE_BUCKET, f"data/iris-registry/{uuid.uuid4().hex[:8]}", seed=7, eval_fraction=0.3
    )
    data = {"train_data": split["train"], "eval_data": split["eval"]}
    project = f"retrain-{uuid.uuid4().hex[:8]}"
    events_before = len(_champion_events())

    retraining = dags["aip_retraining"]
    first = _retrain(retraining, data, c=0.05, max_iter=5, store="registry", project_id=project)
    assert (first["version_id"], first["promoted"]) == ("1", True), first
    worse = _retrain(retraining, data, c=1e-6, max_iter=1, store="registry", project_id=project)
    assert worse["metric"] < first["metric"], (worse, first)
    assert (worse["version_id"], worse["promoted"]) == ("2", False), worse
    better = _retrain(retraining, data, c=10.0, max_iter=200, store="registry", project_id=project)
    assert better["metric"] > first["metric"], (better, first)
    assert (better["version_id"], better["promoted"]) == ("3", True), better

    rollback = dags["aip_rollback_champion"].test(run_conf={"project_id": project})
    assert str(rollback.state) == "success", _task_states(rollback)

    name = f"projects/{project}/locations/{LOCATION}/models/iris-retrained"
    with vertex_sdk(local_env.url, project, bucket.name, monkeypatch) as sdk:
        assert sdk.Model(f"{name}@champion").version_id == "1"
        versions = {
            v.version_id: sorted(v.version_aliases) for v in sdk.models.ModelRegistry(name).list_versions()
        }
    assert versions == {"1": ["champion", "default"], "2": [], "3": []}
    events = _champion_events()[events_before:]
    assert [(e["action"], e["version_id"]) for e in events] == [
        ("promoted", "1"),
        ("promoted", "3"),
        ("rolled_back", "1"),
    ]
    assert events[1]["metric"] == better["metric"]
    assert events[1]["job_id"] == better["job_id"]
    assert events[1]["alias"] == "champion"

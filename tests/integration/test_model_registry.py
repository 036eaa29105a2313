"""RegisterModelOperator and RollbackChampionOperator against ``aip-local serve`` and fake-gcs-server.

Exports are written as the export operator writes them (the model file and its manifest), so
each case is about the registry, not training. What the operators did is read back with
Google's own Vertex AI SDK (``aiplatform.Model``, ``ModelRegistry``): nobody here wrote it.
"""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.request
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_aip.compat import TaskDeferred
from airflow_aip.exceptions import AipError, ValidationError
from airflow_aip.operators import RegisterModelOperator, RollbackChampionOperator
from airflow_aip.triggers.model_operation import ModelOperationTrigger
from tests.fixtures.champion_gate import CASES, PROMOTE, REFUSE, GateCase, Side
from tests.fixtures.tools import need_module
from tests.fixtures.vertex import LOCATION

pytestmark = pytest.mark.integration
aiplatform = need_module("google.cloud.aiplatform")
SHA = "c" * 64


def _export(
    world: SimpleNamespace,
    name: str,
    accuracy: float,
    *,
    model_file: bool = True,
    eval_data: str | None = None,
) -> str:
    """A finished export: ``model.joblib`` and ``manifest.json`` as the export operator leaves them."""
    prefix = f"{world.folder}/{name}"
    if model_file:
        world.gcs.blob(f"{prefix}/model.joblib").upload_from_string(b"model bytes " + name.encode())
    manifest = {
        "model_uri": f"gs://{world.bucket}/{prefix}",
        "job_id": name,
        "trial_id": None,
        "metric": {"tag": "accuracy", "value": accuracy, "goal": "MAXIMIZE", "eval_data": eval_data},
        "packages": [{"uri": f"gs://{world.bucket}/staging/{SHA}/trainer-0.1.tar.gz"}],
        "airflow": {"dag_id": "d", "task_id": "export", "run_id": f"manual__{name}"},
        "hyperparameters": {"C": 1.0},
    }
    world.gcs.blob(f"{prefix}/manifest.json").upload_from_string(json.dumps(manifest))
    return f"gs://{world.bucket}/{prefix}/manifest.json"


def _export_side(world: SimpleNamespace, name: str, side: Side) -> str:
    """A finished export whose manifest records ``side`` (the champion gate's table)."""
    prefix = f"{world.folder}/{name}"
    world.gcs.blob(f"{prefix}/model.joblib").upload_from_string(b"model bytes " + name.encode())
    manifest = side.manifest(f"gs://{world.bucket}/{prefix}", name)
    world.gcs.blob(f"{prefix}/manifest.json").upload_from_string(json.dumps(manifest))
    return f"gs://{world.bucket}/{prefix}/manifest.json"


def _context() -> Any:
    return {"ti": SimpleNamespace(dag_id="d", task_id="register", run_id="manual__1", try_number=1)}


def _arguments(world: SimpleNamespace) -> dict[str, Any]:
    return {
        "project_id": world.project,
        "region": LOCATION,
        "model": world.model_id,
        "champion_alias": "champion",
        "ledger_uri": f"gs://{world.bucket}/{world.folder}/ledger.json",
    }


def _register(world: SimpleNamespace, manifest_uri: str, **kwargs: Any) -> dict[str, Any]:
    arguments = {
        **_arguments(world),
        "framework": "scikit-learn",
        "deferrable": False,
        "poll_interval": 0.2,
        "training_data": [f"gs://{world.bucket}/data/train.csv"],
        **kwargs,
    }
    op = RegisterModelOperator(task_id="register", manifest_uri=manifest_uri, **arguments)
    result: dict[str, Any] = op.execute(_context())
    return result


def _rollback(world: SimpleNamespace) -> dict[str, Any]:
    result: dict[str, Any] = RollbackChampionOperator(task_id="rollback", **_arguments(world)).execute(
        _context()
    )
    return result


def _champion(world: SimpleNamespace) -> str:
    """The version holding ``champion``, as Google's SDK reads it."""
    name = f"projects/{world.project}/locations/{LOCATION}/models/{world.model_id}"
    return str(world.sdk.Model(f"{name}@champion").version_id)


def _aliases(world: SimpleNamespace) -> dict[str, list[str]]:
    registry = world.sdk.models.ModelRegistry(
        f"projects/{world.project}/locations/{LOCATION}/models/{world.model_id}"
    )
    return {str(v.version_id): sorted(v.version_aliases) for v in registry.list_versions()}


def test_better_versions_take_the_champion_alias_and_a_rollback_moves_it_back(world: SimpleNamespace) -> None:
    first = _register(world, _export(world, "job_1", 0.90))
    assert (first["version_id"], first["promoted"], first["uploaded"]) == ("1", True, True)
    assert _champion(world) == "1"

    worse = _register(world, _export(world, "job_2", 0.85))
    assert (worse["version_id"], worse["promoted"]) == ("2", False)
    assert worse["reason"].endswith("the champion's 0.9 (v1) on data it does not record: kept the champion")
    assert _champion(world) == "1"

    better = _register(world, _export(world, "job_3", 0.95))
    assert (better["version_id"], better["promoted"]) == ("3", True)
    assert better["champion_before"]["version_id"] == "1"
    assert _aliases(world) == {"1": ["default"], "2": [], "3": ["champion"]}
    with urllib.request.urlopen(better["console_url"], timeout=30) as page:  # the local console's model page
        html = page.read().decode()
    assert world.model_id in html
    assert "champion" in html

    back = _rollback(world)
    assert (back["version_id"], back["rolled_back_from"]) == ("1", "3")
    assert _champion(world) == "1"
    assert set(_aliases(world)) == {"1", "2", "3"}  # rolled back from, still registered

    version = world.sdk.Model(f"projects/{world.project}/locations/{LOCATION}/models/{world.model_id}@3")
    labels = version.labels
    assert labels["aip_job_id"] == "job_3"
    assert labels["aip_package_sha256"] == SHA[:63]
    assert "accuracy = 0.95" in version.version_description
    assert f"gs://{world.bucket}/data/train.csv" in version.version_description
    assert version.container_spec.image_uri == "us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-6:latest"
    with pytest.raises(ValidationError, match="nothing to roll back to"):
        _rollback(world)


def test_a_champion_scored_on_this_runs_data_is_the_one_compared(world: SimpleNamespace) -> None:
    """``champion_evaluation``: the champion's score on the new rows, not its old one, decides."""
    first = _register(world, _export(world, "job_1", 0.90, eval_data="md5:old"))
    assert first["promoted"] is True
    evaluation = f"{world.folder}/eval/champion_metrics.json"
    scored = {
        "accuracy": 0.97,  # the champion on the new rows: better than the candidate's 0.95
        "evaluated_model_uri": f"gs://{world.bucket}/{world.folder}/job_1",
        "eval_data": {"uri": "gs://d/new/eval.csv", "md5": "new"},
    }
    world.gcs.blob(evaluation).upload_from_string(json.dumps(scored))
    arguments = {"champion_evaluation": f"gs://{world.bucket}/{evaluation}", "require_same_eval_data": True}
    kept = _register(world, _export(world, "job_2", 0.95, eval_data="md5:new"), **arguments)
    assert (kept["promoted"], kept["same_eval_data"], kept["champion_metric"]) == (False, True, 0.97)
    assert kept["reason"] == (
        "accuracy 0.95 on this run's data against the champion's 0.97 (v1) on the same data:"
        " kept the champion"
    )
    assert kept["eval_data"] == "md5:new"
    assert kept["champion_evaluation"] == {  # the pages show it as the evaluating job's metric
        "uri": f"gs://{world.bucket}/{evaluation}",
        "metric": 0.97,
        "metric_tag": "accuracy",
        "model_uri": f"gs://{world.bucket}/{world.folder}/job_1",
    }
    # Without a measurement, the champion's metric was taken on other rows: refused, not compared.
    again = _export(world, "job_3", 0.95, eval_data="md5:new")
    refused = _register(world, again, require_same_eval_data=True)
    assert (refused["promoted"], refused["same_eval_data"]) == (False, False)
    assert "on other data: not compared (require_same_eval_data)" in refused["reason"]
    assert _champion(world) == "1"
    version = world.sdk.Model(f"projects/{world.project}/locations/{LOCATION}/models/{world.model_id}@2")
    assert version.labels["aip_eval_md5"] == "new"


def test_a_deferred_upload_waits_in_the_trigger_and_ends_as_in_the_worker(
    world: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The upload's operation (importing for a second) waited for by the trigger, as the triggerer
    rebuilds it; the task resumes from its event exactly as the worker's wait would have ended."""
    monkeypatch.setenv("AIRFLOW__AIP__DEFERRAL_HOLD", "0")  # no executor here: nothing to hold for
    arguments = {**_arguments(world), "framework": "scikit-learn", "poll_interval": 0.2}
    manifest = _export(world, "job_deferred", 0.9)
    op = RegisterModelOperator(task_id="register", manifest_uri=manifest, deferrable=True, **arguments)
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(_context())
    assert isinstance(deferred.value.trigger, ModelOperationTrigger)
    rebuilt = ModelOperationTrigger(**deferred.value.trigger.serialize()[1])

    async def run() -> list[dict[str, Any]]:
        return [event.payload async for event in rebuilt.run()]

    (event,) = asyncio.run(run())
    assert event["status"] == "success"
    assert event["operation"]["response"]["modelVersionId"] == "1"
    resumed = RegisterModelOperator(task_id="register", manifest_uri=manifest, deferrable=True, **arguments)
    result = resumed.execute_complete(_context(), event)
    assert (result["version_id"], result["uploaded"], result["promoted"]) == ("1", True, True)
    assert _champion(world) == "1"


def test_a_deferrable_upload_of_a_second_ends_in_the_worker_within_defer_after(
    world: SimpleNamespace,
) -> None:
    """No deferral, so no ``deferral_hold`` after an upload that took a second."""
    arguments = {**_arguments(world), "framework": "scikit-learn", "poll_interval": 0.2}
    manifest = _export(world, "job_quick", 0.9)
    op = RegisterModelOperator(
        task_id="register", manifest_uri=manifest, deferrable=True, defer_after=30, **arguments
    )
    result = op.execute(_context())  # TaskDeferred would fail the test here
    assert (result["version_id"], result["uploaded"], result["promoted"]) == ("1", True, True)
    assert _champion(world) == "1"


@pytest.mark.parametrize("case", CASES)
def test_the_champion_gate_table(world: SimpleNamespace, case: GateCase) -> None:
    """tests/unit/test_champion_gate.py's table, through RegisterModelOperator and the registry."""
    if case.champion is not None:
        held = _register(world, _export_side(world, "job_champion", case.champion))
        assert (held["version_id"], held["promoted"]) == ("1", True)  # nothing held the alias
    candidate = _register(world, _export_side(world, "job_candidate", case.candidate))
    assert candidate["promoted"] is (case.decision is PROMOTE)
    assert case.says in candidate["reason"]
    if case.decision is REFUSE:  # how to promote by hand, in this store
        assert "mergeVersionAliases" in candidate["reason"]
    champion = "1" if case.champion is not None and case.decision is not PROMOTE else candidate["version_id"]
    assert _champion(world) == champion


def test_a_retry_finds_its_own_version_and_never_uploads_twice(world: SimpleNamespace) -> None:
    manifest = _export(world, "job_r", 0.9)
    first = _register(world, manifest)
    again = _register(world, manifest)
    assert (again["version_id"], again["uploaded"], again["promoted"]) == (first["version_id"], False, True)
    assert list(_aliases(world)) == ["1"]


def test_two_promotions_racing_leave_one_champion_the_better(world: SimpleNamespace) -> None:
    _register(world, _export(world, "job_0", 0.80))
    manifests = [_export(world, "job_a", 0.90), _export(world, "job_b", 0.97)]
    results: dict[str, dict[str, Any]] = {}
    errors: list[BaseException] = []

    def register(uri: str) -> None:
        try:
            results[uri] = _register(world, uri)
        except BaseException as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=register, args=(uri,)) for uri in manifests]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    best = results[manifests[1]]["version_id"]
    assert _champion(world) == best
    aliases = _aliases(world)
    assert sum(v.count("champion") for v in aliases.values()) == 1
    assert len(aliases) == 3  # the loser stays registered, without the alias
    ledger = json.loads(world.gcs.blob(f"{world.folder}/ledger.json").download_as_bytes())
    assert ledger["champion"]["version_id"] == best


def test_an_upload_vertex_would_refuse_fails_the_task_and_registers_nothing(world: SimpleNamespace) -> None:
    with pytest.raises(AipError, match=r"model\.joblib"):
        _register(world, _export(world, "job_empty", 0.9, model_file=False))
    assert _aliases_or_none(world) is None


def _aliases_or_none(world: SimpleNamespace) -> dict[str, list[str]] | None:
    try:
        return _aliases(world)
    except Exception:  # the model does not exist: the SDK raises NotFound
        return None


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"model": "1-bad"}, "model"),
        ({"champion_alias": "Champion"}, "champion_alias"),
        ({"ledger_uri": None}, "ledger_uri"),
        ({"version_aliases": ["champion"]}, "version_aliases"),
        (
            {"serving_container_image_uri": "us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.9-9:latest"},
            "serving",
        ),
        ({"manifest_uri": "gs://nowhere-bucket-x/m.json"}, "manifest_uri"),
        ({"framework": "caffe"}, "framework"),
    ],
)
def test_bad_input_names_the_field_and_creates_nothing(
    world: SimpleNamespace, change: dict[str, Any], field: str
) -> None:
    manifest = change.pop("manifest_uri", None) or _export(world, "job_bad", 0.9)
    with pytest.raises(ValidationError, match=field):
        _register(world, manifest, **change)
    assert _aliases_or_none(world) is None

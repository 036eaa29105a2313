"""The Model Registry champion sequence of ``aip_retraining``, and the OpenLineage events it wrote.

One subprocess runs, with ``dag.test()`` against the local training service and fake GCS:
v1 (no champion yet: it takes the alias), a worse v2 (registered, kept out), a better v3 (takes
the alias), then ``aip_rollback_champion`` (the alias goes back to v1). The test checks the
champion's moves (the registry's aliases, the Asset events) and each retraining run's lineage:
which data and which code made which model.

The subprocess has Airflow's OpenLineage provider enabled, with its file transport, configured
by environment variables as the provider documents (``AIRFLOW__OPENLINEAGE__TRANSPORT``,
``..._NAMESPACE``, ``..._DISABLED``). ``dag.test()`` does call the task listeners (the task
runner's ``finalize`` fires ``on_task_instance_success``, and the provider's listener forks to
extract and emit, as on a worker), but the provider decides whether it is enabled when its plugin
module is imported, and Airflow builds its listener manager once per process
(``airflow.sdk.listener.get_listener_manager`` is cached): a pytest process that already ran a
DAG with OpenLineage off would never emit. A fresh process, like a worker's, reads the
configuration before either happens. It shares the test's metadata DB, so the Asset events the
runs wrote are read back here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.local_service import LocalService

pytestmark = pytest.mark.dags

DAGS = Path(__file__).resolve().parents[2] / "dags"
NAMESPACE = "aip-lineage-test"
TASKS = ("build_trainer", "stage_trainer", "train", "export_model", "register_model")
# Four DAG runs (three trainings and a rollback); a bound to fail on, not a goal.
SUBPROCESS_TIMEOUT = 1200

# Parses the DAG folder, runs each [dag_id, conf, task_ids] of argv[2] in turn, and writes each
# run's ID, state, task states and the named tasks' XComs to argv[3] (after every run).
_RUN = """
import json, sys
from pathlib import Path

dags, runs, written = Path(sys.argv[1]), json.loads(sys.argv[2]), Path(sys.argv[3])
sys.path.append(str(dags.parent))  # the repository, for its tests package (wherever pytest was started)
from tests.fixtures.in_process_api import hold_the_lifespan

hold_the_lifespan()  # dag.test() on Airflow 3.1 and 3.2, as in the tests' own process
try:
    from airflow.dag_processing.dagbag import BundleDagBag
    bag = BundleDagBag(dag_folder=str(dags), bundle_path=dags, bundle_name="dags-folder")
except ImportError:  # Airflow 3.1 (tests/fixtures/dagbag.py)
    from airflow.models.dagbag import DagBag
    sys.path.append(str(dags))
    bag = DagBag(dag_folder=str(dags), bundle_path=dags, include_examples=False)
assert bag.import_errors == {}, bag.import_errors

results = []
for dag_id, conf, task_ids in runs:
    run = bag.dags[dag_id].test(run_conf=conf)
    tis = {ti.task_id: ti for ti in run.get_task_instances()}
    results.append({
        "dag_id": dag_id,
        "run_id": run.run_id,
        "state": str(run.state),
        "states": {t: str(ti.state) for t, ti in tis.items()},
        "xcom": {t: tis[t].xcom_pull(task_ids=t) for t in task_ids if t in tis},
    })
    # A file, not stdout: the provider's forked children log to stdout too, mid-line.
    written.write_text(json.dumps(results))
    if str(run.state) != "success":
        break  # each run's champion decision depends on the runs before it
"""


def _run_with_lineage(
    runs: list[tuple[str, dict[str, Any], tuple[str, ...]]], events: Path
) -> list[dict[str, Any]]:
    """The runs' results, in order; each with ``log``, the end of the process's output (task logs)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENLINEAGE")}
    env.update(
        AIRFLOW__AIP__POLL_INTERVAL="1",
        AIRFLOW__OPENLINEAGE__DISABLED="False",
        AIRFLOW__OPENLINEAGE__NAMESPACE=NAMESPACE,
        AIRFLOW__OPENLINEAGE__TRANSPORT=json.dumps(
            {"type": "file", "log_file_path": str(events), "append": True}
        ),
    )
    written = events.with_name("run-results.json")
    out = subprocess.run(
        [sys.executable, "-c", _RUN, str(DAGS), json.dumps(runs), str(written)],
        env=env,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
    )
    log = (out.stdout + out.stderr)[-8000:]  # the runs' task logs, for a failure's message
    assert out.returncode == 0, out.stderr[-6000:]
    results: list[dict[str, Any]] = json.loads(written.read_text())
    for result in results:
        assert result["state"] == "success", (result["dag_id"], result["states"], log)
        result["log"] = log
    assert [r["dag_id"] for r in results] == [dag_id for dag_id, _, _ in runs], (results, log)
    return results


def _completed(events: Path, run_id: str) -> dict[str, dict[str, Any]]:
    """Each task's COMPLETE event of one DAG run, by task ID (the job name is ``{dag_id}.{task_id}``)."""
    lines = [json.loads(line) for line in events.read_text().splitlines() if line.strip()]
    return {
        e["job"]["name"].split(".", 1)[1]: e
        for e in lines
        if e.get("eventType") == "COMPLETE"
        and "." in e["job"]["name"]
        and e["run"]["facets"]["airflow"]["dagRun"]["run_id"] == run_id
    }


def _ids(datasets: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(d["namespace"], d["name"]): d.get("facets") or {} for d in datasets}


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


def _retrain(
    project: str, data: dict[str, str], c: float, max_iter: int
) -> tuple[str, dict[str, Any], tuple[str, ...]]:
    """A retraining run on the Model Registry store, in ``project`` (a champion no other test shares)."""
    conf = {
        **data,
        "champion_store": "registry",
        "project_id": project,
        "C": c,
        "max_iter": max_iter,
        "reuse_champion_hyperparameters": False,
    }
    return ("aip_retraining", conf, TASKS)


@pytest.mark.timeout(SUBPROCESS_TIMEOUT + 120)
def test_registry_champion_moves_only_past_the_gate_and_each_run_reports_its_lineage(
    example_bucket: Any,
    local_env: LocalService,
    airflow_db: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """v1 is champion, a worse v2 is registered without it, a better v3 takes it, a rollback gives it back;
    each retraining run's OpenLineage events join its data and code to its model."""
    from aip_examples import write_split

    from tests.fixtures.vertex import LOCATION, vertex_sdk

    bucket = example_bucket  # the example's own: its Assets' URIs name it
    # A fixed split, so the three models' accuracies are known: 0.889, 0.844 and 1.0.
    split = write_split(bucket.name, f"data/iris-registry/{uuid.uuid4().hex[:8]}", seed=7, eval_fraction=0.3)
    data = {"train_data": split["train"], "eval_data": split["eval"]}
    project = f"retrain-{uuid.uuid4().hex[:8]}"
    events_before = len(_champion_events())
    events = tmp_path / "openlineage.jsonl"

    runs = _run_with_lineage(
        [
            _retrain(project, data, c=0.05, max_iter=5),
            _retrain(project, data, c=1e-6, max_iter=1),
            _retrain(project, data, c=10.0, max_iter=200),
            ("aip_rollback_champion", {"project_id": project}, ()),
        ],
        events,
    )

    # The champion: it moves only to a better model, and the rollback moves it back.
    first, worse, better = (run["xcom"]["register_model"] for run in runs[:3])
    assert (first["version_id"], first["promoted"]) == ("1", True), first
    assert worse["metric"] < first["metric"], (worse, first)
    assert (worse["version_id"], worse["promoted"]) == ("2", False), worse
    assert better["metric"] > first["metric"], (better, first)
    assert (better["version_id"], better["promoted"]) == ("3", True), better
    name = f"projects/{project}/locations/{LOCATION}/models/iris-retrained"
    with vertex_sdk(local_env.url, project, bucket.name, monkeypatch) as sdk:
        assert sdk.Model(f"{name}@champion").version_id == "1"
        versions = {
            v.version_id: sorted(v.version_aliases) for v in sdk.models.ModelRegistry(name).list_versions()
        }
    assert versions == {"1": ["champion", "default"], "2": [], "3": []}
    changes = _champion_events()[events_before:]
    assert [(e["action"], e["version_id"]) for e in changes] == [
        ("promoted", "1"),
        ("promoted", "3"),
        ("rolled_back", "1"),
    ]
    assert changes[1]["metric"] == better["metric"]
    assert changes[1]["job_id"] == better["job_id"]
    assert changes[1]["alias"] == "champion"
    # Every run scored on the same split: v3 was compared with v1 re-measured on the same rows.
    assert changes[1]["eval_data"] == better["eval_data"] == first["eval_data"]
    assert (better["same_eval_data"], worse["same_eval_data"]) == (True, True)
    assert better["reason"].endswith("(v1) on the same data: promoted"), better["reason"]

    # The lineage of each retraining run, the one kept out included.
    for run, version in zip(runs[:3], ("1", "2", "3"), strict=True):
        _assert_lineage(run, _completed(events, run["run_id"]), data, f"gs://{bucket.name}", project, version)


def _assert_lineage(
    run: dict[str, Any],
    done: dict[str, dict[str, Any]],
    data: dict[str, str],
    gs: str,
    project: str,
    version: str,
) -> None:
    """Which data and which code made which model, as one retraining run's COMPLETE events say."""
    states, xcom = run["states"], run["xcom"]
    assert {t: states[t] for t in TASKS} == dict.fromkeys(TASKS, "success"), (states, run["log"])
    assert set(TASKS) <= done.keys(), (done.keys(), run["log"])
    assert {e["job"]["namespace"] for e in done.values()} == {NAMESPACE}
    built, sha256 = xcom["build_trainer"], xcom["build_trainer"]["sha256"]
    (staged,) = xcom["stage_trainer"]
    staged_name = staged.split("/", 3)[3]

    # The sdist, with its sha256, made by the build...
    build_out = _ids(done["build_trainer"]["outputs"])
    assert build_out[("file", built["path"])]["aipPackage"]["sha256"] == sha256
    # ... is what the stage task read and put in Cloud Storage, under its content's name.
    stage = done["stage_trainer"]
    assert _ids(stage["inputs"])[("file", built["path"])]["aipPackage"]["sha256"] == sha256
    assert _ids(stage["outputs"])[(gs, staged_name)]["version"]["datasetVersion"] == sha256

    # The training job read both CSVs and that package, and wrote its output directory.
    train = done["train"]
    inputs = _ids(train["inputs"])
    for csv in (data["train_data"], data["eval_data"]):
        assert (gs, csv.split("/", 3)[3]) in inputs, inputs.keys()
    assert inputs[(gs, staged_name)]["aipPackage"]["sha256"] == sha256
    job = xcom["train"]
    job_output = (gs, job["output_dir"].split("/", 3)[3].rstrip("/"))
    assert _ids(train["outputs"]).keys() == {job_output}
    facet = train["run"]["facets"]["aipTrainingJob"]
    assert (facet["jobId"], facet["name"], facet["state"]) == (job["job_id"], job["name"], "SUCCEEDED")

    # The export read that job's model and wrote the exported copy, with its metric.
    export, exported = done["export_model"], xcom["export_model"]
    assert exported["exported"] is True
    # Its inputs: the folder it copied (the model, below the job's output), and that output
    # itself, the dataset the training task wrote: the graph joins the model to the job.
    source, joined = _ids(export["inputs"])
    assert source[0] == gs
    assert source[1].startswith(job_output[1] + "/")
    assert joined == job_output
    model = _ids(export["outputs"])[(gs, exported["destination"].split("/", 3)[3])]["aipModel"]
    assert (model["metric"], model["metricTag"], model["jobId"]) == (
        exported["metric"],
        "accuracy",
        job["job_id"],
    )

    # The register task read that exported model and wrote a Model Registry version.
    register, registered = done["register_model"], xcom["register_model"]
    assert (gs, exported["destination"].split("/", 3)[3]) in _ids(register["inputs"])
    (registered_version,) = _ids(register["outputs"]).items()
    assert registered_version[0] == (f"vertexai://{project}/us-central1", "models/iris-retrained")
    assert registered_version[1]["version"]["datasetVersion"] == registered["version_id"] == version

"""OpenLineage events of a real retraining run: which data and which code made which model.

``aip_retraining`` runs with ``dag.test()`` against the local training service and fake GCS, with
Airflow's OpenLineage provider enabled and its file transport; the events it wrote are read back.

The run is a subprocess of its own, configured by environment variables as the provider documents
(``AIRFLOW__OPENLINEAGE__TRANSPORT``, ``..._NAMESPACE``, ``..._DISABLED``). ``dag.test()`` does
call the task listeners (the task runner's ``finalize`` fires ``on_task_instance_success``, and
the provider's listener forks to extract and emit, as on a worker), but the provider decides
whether it is enabled when its plugin module is imported, and Airflow builds its listener manager
once per process (``airflow.sdk.listener.get_listener_manager`` is cached): a pytest process that
already ran a DAG with OpenLineage off would never emit. A fresh process, like a worker's, reads
the configuration before either happens.
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

from tests.fixtures.local_service import LocalService, storage_client

pytestmark = pytest.mark.dags

DAGS = Path(__file__).resolve().parents[2] / "dags"
NAMESPACE = "aip-lineage-test"
TASKS = ("build_trainer", "stage_trainer", "train", "export_model", "register_model")

# Parses the DAG folder, runs aip_retraining once on the two CSVs and prints what it returned.
_RUN = """
import json, sys
from pathlib import Path

from airflow.dag_processing.dagbag import BundleDagBag

dags = Path(sys.argv[1])
bag = BundleDagBag(dag_folder=str(dags), bundle_path=dags, bundle_name="dags-folder")
assert bag.import_errors == {}, bag.import_errors


run = bag.dags["aip_retraining"].test(run_conf=json.loads(sys.argv[2]))
tis = {ti.task_id: ti for ti in run.get_task_instances()}
xcom = {t: tis[t].xcom_pull(task_ids=t) for t in json.loads(sys.argv[3])}
# A file, not stdout: the provider's forked children log to stdout too, mid-line.
result = {"states": {t: str(ti.state) for t, ti in tis.items()}, "xcom": xcom}
Path(sys.argv[4]).write_text(json.dumps(result))
"""


def _run_with_lineage(data: dict[str, str], events: Path, project: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENLINEAGE")}
    env.update(
        AIRFLOW__AIP__POLL_INTERVAL="1",
        AIRFLOW__OPENLINEAGE__DISABLED="False",
        AIRFLOW__OPENLINEAGE__NAMESPACE=NAMESPACE,
        AIRFLOW__OPENLINEAGE__TRANSPORT=json.dumps(
            {"type": "file", "log_file_path": str(events), "append": True}
        ),
    )
    conf = {
        **data,
        "champion_store": "registry",  # a project of its own: no champion shared with other tests
        "project_id": project,
        "C": 1.0,
        "max_iter": 50,
        "reuse_champion_hyperparameters": False,
    }
    written = events.with_name("run-result.json")
    out = subprocess.run(
        [sys.executable, "-c", _RUN, str(DAGS), json.dumps(conf), json.dumps(TASKS), str(written)],
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert out.returncode == 0, out.stderr[-6000:]
    result: dict[str, Any] = json.loads(written.read_text())
    result["log"] = (out.stdout + out.stderr)[-8000:]  # the run's task logs, for a failure's message
    return result


def _completed(events: Path) -> dict[str, dict[str, Any]]:
    """Each task's COMPLETE event, by task ID (the job name is ``{dag_id}.{task_id}``)."""
    lines = [json.loads(line) for line in events.read_text().splitlines() if line.strip()]
    return {
        e["job"]["name"].split(".", 1)[1]: e
        for e in lines
        if e.get("eventType") == "COMPLETE" and "." in e["job"]["name"]
    }


def _ids(datasets: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(d["namespace"], d["name"]): d.get("facets") or {} for d in datasets}


def test_retraining_run_reports_data_code_and_model_lineage(
    local_env: LocalService, airflow_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The example's own bucket: its Assets' URIs name it, and the metadata DB may already hold them.
    monkeypatch.syspath_prepend(str(DAGS))
    from aip_examples import EXAMPLE_BUCKET
    from trainers.iris.trainer import util

    client = storage_client(local_env.gcs_url)
    bucket = client.lookup_bucket(EXAMPLE_BUCKET) or client.create_bucket(EXAMPLE_BUCKET)
    folder = f"data/iris/lineage-{uuid.uuid4().hex[:8]}"
    data = {}
    for name, rows in zip(("train", "eval"), util.load_split(seed=7, eval_fraction=0.3), strict=True):
        bucket.blob(f"{folder}/{name}.csv").upload_from_string(util.rows_to_csv(rows))
        data[f"{name}_data"] = f"gs://{bucket.name}/{folder}/{name}.csv"
    events = tmp_path / "openlineage.jsonl"

    project = f"lineage-{uuid.uuid4().hex[:8]}"
    run = _run_with_lineage(data, events, project)

    states, xcom = run["states"], run["xcom"]
    assert {t: states[t] for t in TASKS} == dict.fromkeys(TASKS, "success"), (states, run["log"])
    done = _completed(events)
    assert {e["job"]["namespace"] for e in done.values()} == {NAMESPACE}
    gs = f"gs://{bucket.name}"
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
    (version,) = _ids(register["outputs"]).items()
    assert version[0] == (f"vertexai://{project}/us-central1", "models/iris-retrained")
    assert version[1]["version"]["datasetVersion"] == registered["version_id"] == "1"

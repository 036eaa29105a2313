"""A Model Registry upload whose answer is lost after the service applied it: exactly one version.

``models.upload`` takes no request ID, so a re-sent upload would make a second version. Each
run registers one export with ``aip-local serve --fault-admin`` told to lose the upload's answer
after applying it (500, 503, 429, a dropped connection, a reset: one kind per run, in turn),
and a second time as a task retry would. The model must hold exactly one version, carrying the
alias the gate gave it, and the service must have applied exactly one upload.

``AIP_RELIABILITY_RUNS`` sets the number of runs (2 here; RELIABILITY.md's figure: 20) and
``AIP_RELIABILITY_REPORT`` a JSON file the measured figures are written to.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_aip.operators import RegisterModelOperator
from tests.fixtures.local_service import LocalService, StagedTrainer, own_service, storage_client
from tests.fixtures.operators import each_run, repeated, write_report
from tests.fixtures.vertex import LOCATION, aiplatform

pytestmark = pytest.mark.integration
RUNS = int(os.environ.get("AIP_RELIABILITY_RUNS") or 2)
KINDS: tuple[int | str, ...] = (500, 503, 429, "drop", "reset")


faulty_service = own_service("faulty_service", ["--fault-admin"])


def _export(bucket: Any, folder: str) -> str:
    bucket.blob(f"{folder}/model.joblib").upload_from_string(b"a model")
    manifest = {
        "model_uri": f"gs://{bucket.name}/{folder}",
        "job_id": folder.rsplit("/", 1)[-1],
        "metric": {"tag": "accuracy", "value": 0.9, "goal": "MAXIMIZE"},
        "airflow": {"dag_id": "d", "run_id": "r"},
    }
    bucket.blob(f"{folder}/manifest.json").upload_from_string(json.dumps(manifest))
    return f"gs://{bucket.name}/{folder}/manifest.json"


def _versions(service: LocalService, project: str, model_id: str) -> list[dict[str, Any]]:
    models = aiplatform(service.url).projects().locations().models()
    name = f"projects/{project}/locations/{LOCATION}/models/{model_id}"
    listed = models.listVersions(name=name, pageSize=100).execute()
    return list(listed.get("models", []))


def one_run(service: LocalService, trainer: StagedTrainer, kind: int | str) -> dict[str, Any]:
    project, model_id = f"rel-reg-{uuid.uuid4().hex[:8]}", f"m-{uuid.uuid4().hex[:6]}"
    bucket = storage_client(trainer.gcs_url).bucket(trainer.bucket)
    manifest = _export(bucket, f"rel-registry/{uuid.uuid4().hex[:8]}")
    operator = RegisterModelOperator(
        task_id="register",
        manifest_uri=manifest,
        model=model_id,
        project_id=project,
        region=LOCATION,
        api_endpoint=service.url,
        framework="scikit-learn",
        champion_alias="champion",
        ledger_uri=f"gs://{trainer.bucket}/rel-registry/{model_id}-ledger.json",
        deferrable=False,
        poll_interval=0.2,
    )
    context: Any = {"ti": SimpleNamespace(dag_id="d", task_id="register", run_id="r", try_number=1)}
    before = service.admin("_stats")
    service.admin("_faults", {"method": "models.upload", "when": "after", "kind": kind}, "POST")
    started = time.monotonic()
    result = operator.execute(context)
    retried = operator.execute(context)  # a task retry: finds the version, uploads nothing
    after = service.admin("_stats")
    return {
        "kind": kind,
        "versions": [
            (v["versionId"], sorted(v.get("versionAliases", [])))
            for v in _versions(service, project, model_id)
        ],
        "result": {k: result[k] for k in ("version_id", "uploaded", "promoted")},
        "retry": {k: retried[k] for k in ("version_id", "uploaded", "promoted")},
        "uploads_sent": after["requests"].get("models.upload", 0)
        - before["requests"].get("models.upload", 0),
        "faults": after["faults_injected"] - before["faults_injected"],
        "seconds": round(time.monotonic() - started, 1),
    }


def test_an_upload_whose_answer_is_lost_leaves_exactly_one_version(
    faulty_service: LocalService, staged_trainer: StagedTrainer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", staged_trainer.gcs_url)
    runs = repeated(
        RUNS,
        lambda number: one_run(faulty_service, staged_trainer, KINDS[number % len(KINDS)]),
        lambda number: {"kind": KINDS[number % len(KINDS)], "versions": []},
    )
    write_report({"runs": runs})
    for where, run in each_run(runs):
        assert run["versions"] == [("1", ["champion", "default"])], where
        assert run["result"] == {"version_id": "1", "uploaded": True, "promoted": True}, where
        assert run["retry"] == {"version_id": "1", "uploaded": False, "promoted": True}, where
        assert run["uploads_sent"] == 1, where  # the lost answer was recognised, never re-sent
        assert run["faults"] == 1, where

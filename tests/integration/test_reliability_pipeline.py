"""The example pipeline against ``aip-local serve --fault-rate 0.2``: it succeeds, and creates one job.

One in five Vertex AI calls (create, get, list, cancel), Cloud Logging reads and Cloud Storage
calls (the tasks' uploads, copies, reads and listings, through the service's proxy in front of
fake-gcs-server) fails with 429, 500 or 503, or its connection drops or resets, before or after
it was applied.
Each run uses its own project, so "exactly one job" is the project's job list, checked against
the service's own count of applied creates; the run's bucket is read on fake-gcs-server itself.

``AIP_RELIABILITY_RUNS`` sets the number of runs (3 here; ``make reliability`` runs 20) and
``AIP_RELIABILITY_REPORT`` a JSON file the measured figures are written to.
"""

from __future__ import annotations

import os
import random
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from airflow_aip.jobs.vertex.view import job_state
from airflow_aip.local.storage.gcs import FakeGcsServer
from tests.fixtures.local_service import LocalService, own_service, storage_client
from tests.fixtures.operators import each_run, repeated, write_report
from tests.fixtures.reliability import through_faults
from tests.fixtures.vertex import aiplatform

# A fault rate, many runs. make test: each kind of fault on a create, a staging and an export
# (test_reliability_faults.py, test_reliability_gcs_faults.py).
pytestmark = [pytest.mark.integration, pytest.mark.soak]
DAGS = Path(__file__).resolve().parents[2] / "dags"
FAULT_RATE = 0.2
RUNS = int(os.environ.get("AIP_RELIABILITY_RUNS") or 3)
SEED = int(os.environ.get("AIP_RELIABILITY_SEED") or random.randrange(1 << 30))


faulty_service = own_service("faulty_service", ["--fault-rate", str(FAULT_RATE), "--fault-seed", str(SEED)])


def storage_faults(stats: dict[str, Any]) -> int:
    faults: dict[str, dict[str, int]] = stats["faults"]
    return sum(sum(kinds.values()) for method, kinds in faults.items() if method.startswith("storage."))


def one_run(dag: Any, service: LocalService) -> dict[str, Any]:
    """Run the pipeline once in a project of its own; what it created and what failed under it."""
    project = f"rel-{uuid.uuid4().hex[:8]}"
    bucket = storage_client(service.gcs_url).create_bucket(f"aip-rel-{uuid.uuid4().hex[:10]}")
    before = service.admin("_stats")
    started = time.monotonic()
    run = dag.test(
        run_conf={"bucket": bucket.name, "project_id": project, "max_trials": 2, "max_parallel_trials": 2}
    )
    seconds = round(time.monotonic() - started, 1)
    after = service.admin("_stats")
    parent = f"projects/{project}/locations/us-central1"  # the pipeline runs on Vertex AI
    listed = through_faults(
        lambda: aiplatform(service.url).projects().locations().hyperparameterTuningJobs().list(parent=parent)
    )
    manifests = [b.name for b in bucket.list_blobs(prefix="models/iris/") if b.name.endswith("manifest.json")]
    return {
        "state": str(run.state),
        "tasks": {ti.task_id: str(ti.state) for ti in run.get_task_instances()},
        "jobs": [
            (job["displayName"], job_state(job["state"]).value)
            for job in listed.get("hyperparameterTuningJobs", [])
        ],
        "creates_applied": after["created"] - before["created"],
        "faults": after["faults_injected"] - before["faults_injected"],
        "storage_faults": storage_faults(after) - storage_faults(before),
        "calls": sum(after["requests"].values()) - sum(before["requests"].values()),
        "manifests": len(manifests),
        "seconds": seconds,
    }


def test_pipeline_at_a_20_percent_fault_rate_succeeds_with_one_job_per_run(
    faulty_service: LocalService, fake_gcs: FakeGcsServer, airflow_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.dag_processing.dagbag import BundleDagBag

    assert faulty_service.storage_url != fake_gcs.url  # the tasks' storage calls meet faults too
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", faulty_service.storage_url)
    monkeypatch.setenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_ML", faulty_service.url)
    monkeypatch.setenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM", faulty_service.url)
    monkeypatch.setenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING", faulty_service.url)
    monkeypatch.setenv("AIRFLOW__AIP__POLL_INTERVAL", "1")
    bag = BundleDagBag(dag_folder=str(DAGS), bundle_path=DAGS, bundle_name="dags-folder")
    dag = bag.dags["aip_training_pipeline"]

    lost = {"state": "error", "jobs": [], "creates_applied": 0, "faults": 0, "storage_faults": 0}
    runs = repeated(RUNS, lambda _: one_run(dag, faulty_service), lambda _: lost)
    write_report(
        {"fault_rate": FAULT_RATE, "seed": SEED, "runs": runs, "service": faulty_service.admin("_stats")}
    )
    for where, result in each_run(runs, f" (seed {SEED})"):
        assert result["state"] == "success", where
        assert len(result["jobs"]) == 1, where
        assert result["jobs"][0][1] == "SUCCEEDED", where
        assert result["creates_applied"] == 1, where
        assert result["manifests"] == 1, where
    assert sum(result["faults"] for result in runs) > 0  # the runs really met faults
    assert sum(result["storage_faults"] for result in runs) > 0  # Cloud Storage calls too

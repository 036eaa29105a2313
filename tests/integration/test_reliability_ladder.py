"""A capacity ladder against ``aip-local serve --fault-rate 0.2`` and a stockout: one job per rung.

The ladder is [an A100 rung the region is out of (``--stockout``), a CPU rung]. One in five
Vertex AI calls (creates, gets, lists, cancels) and Cloud Logging reads fails with 429, 500 or
503, or its connection drops or resets, before or after the service applied it. Each run
(``dag.test()``, its own project) must end exactly as without faults: the task succeeds, rung 1
has one job, FAILED with code 8 (the stockout), rung 2 one job, SUCCEEDED, the service applied
exactly two creates, and the summary's ``ladder`` names both. A lost create answer must not make
a rung's second job, and a faulty read must neither climb past a live rung nor stop the climb.

``AIP_RELIABILITY_RUNS`` sets the number of runs (2 here; ``make reliability``-style figures: 20)
and ``AIP_RELIABILITY_REPORT`` a JSON file the measured figures are written to.
"""

from __future__ import annotations

import os
import random
import time
import uuid
from typing import Any

import pytest

from airflow_aip.jobs.vertex.view import job_state
from tests.fixtures.ladder import A100_RUNG, CPU_RUNG
from tests.fixtures.local_service import LocalService, StagedTrainer, own_service
from tests.fixtures.operators import each_run, repeated, task_instance, write_report
from tests.fixtures.reliability import through_faults
from tests.fixtures.vertex import aiplatform

# A fault rate, many runs. make test: one job per rung after each kind of fault on a create
# (test_reliability_faults.py) and every rung rule (test_capacity_ladder.py).
pytestmark = [pytest.mark.integration, pytest.mark.soak]
FAULT_RATE = 0.2
RUNS = int(os.environ.get("AIP_RELIABILITY_RUNS") or 2)
SEED = int(os.environ.get("AIP_RELIABILITY_SEED") or random.randrange(1 << 30))
REGION = "us-central1"
A100, CPU = A100_RUNG, CPU_RUNG

DAG = """\
from datetime import datetime
from airflow.sdk import DAG
from airflow_aip.operators import SubmitTrainingJobOperator

with DAG({name!r}, schedule=None, start_date=datetime(2026, 1, 1)) as dag:
    SubmitTrainingJobOperator(
        task_id="submit", project_id="{{{{ dag_run.conf['project_id'] }}}}", region={region!r},
        training_input={training_input!r}, placement={ladder!r},
        executor_image_uri="us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest",
        deferrable=False, poll_interval=1, retries=0,
    )
"""


FLAGS = ["--fault-rate", str(FAULT_RATE), "--fault-seed", str(SEED), f"--stockout={REGION}:NVIDIA_TESLA_A100"]
faulty_service = own_service("faulty_service", FLAGS)


def jobs_of(service: LocalService, project: str) -> list[dict[str, Any]]:
    """The project's CustomJobs, oldest first, read through the faults (the test's reads meet them too)."""
    jobs = aiplatform(service.url).projects().locations().customJobs()
    listed = through_faults(lambda: jobs.list(parent=f"projects/{project}/locations/{REGION}", pageSize=100))
    found = sorted(listed.get("customJobs", []), key=lambda job: str(job["createTime"]))
    return [
        {
            "rung": job.get("labels", {}).get("aip_rung"),
            "job_id": job["displayName"],
            "state": job_state(job["state"]).value,
            "code": (job.get("error") or {}).get("code"),
        }
        for job in found
    ]


def one_run(dag: Any, service: LocalService) -> dict[str, Any]:
    """Run the ladder once in a project of its own; what it created and what failed under it."""
    project = f"rel-ladder-{uuid.uuid4().hex[:8]}"
    before = service.admin("_stats")
    started = time.monotonic()
    run = dag.test(run_conf={"project_id": project})
    seconds = round(time.monotonic() - started, 1)
    after = service.admin("_stats")
    summary = task_instance(run, "submit").xcom_pull(task_ids="submit") or {}
    was, now = (s["faults"].get("customJobs.create", {}) for s in (before, after))
    return {
        "state": str(run.state),
        "jobs": jobs_of(service, project),
        "ladder": [
            {key: rung.get(key) for key in ("label", "job_id", "state", "ended_because")}
            for rung in summary.get("ladder", [])
        ],
        "job_id": summary.get("job_id"),
        "creates_applied": after["created"] - before["created"],
        "faults": after["faults_injected"] - before["faults_injected"],
        "create_faults": {kind: n - was.get(kind, 0) for kind, n in now.items() if n > was.get(kind, 0)},
        "calls": sum(after["requests"].values()) - sum(before["requests"].values()),
        "seconds": seconds,
    }


def test_a_ladder_at_a_20_percent_fault_rate_makes_one_job_per_rung(
    faulty_service: LocalService,
    staged_trainer: StagedTrainer,
    load_test_dag: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", faulty_service.storage_url)
    monkeypatch.setenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM", faulty_service.url)
    monkeypatch.setenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING", faulty_service.url)
    name = f"aip_rel_ladder_{uuid.uuid4().hex[:8]}"
    source = DAG.format(
        name=name,
        region=REGION,
        training_input=staged_trainer.training_input("succeed", []),
        ladder=[A100, CPU],
    )
    dag = load_test_dag(name, source)

    lost = {"state": "error", "jobs": [], "creates_applied": 0, "faults": 0}
    runs = repeated(RUNS, lambda _: one_run(dag, faulty_service), lambda _: lost)
    write_report(
        {"fault_rate": FAULT_RATE, "seed": SEED, "runs": runs, "service": faulty_service.admin("_stats")}
    )
    for where, result in each_run(runs, f" (seed {SEED})"):
        assert result["state"] == "success", where
        jobs = result["jobs"]
        assert [(j["rung"], j["state"], j["code"]) for j in jobs] == [
            ("a100", "FAILED", 8),
            ("cpu", "SUCCEEDED", None),
        ], where
        assert result["creates_applied"] == 2, where
        assert result["job_id"] == jobs[1]["job_id"], where
        assert result["ladder"] == [
            {"label": "a100", "job_id": jobs[0]["job_id"], "state": "FAILED", "ended_because": "stockout"},
            {"label": "cpu", "job_id": jobs[1]["job_id"], "state": "SUCCEEDED", "ended_because": None},
        ], where
    assert sum(result["faults"] for result in runs) > 0  # the runs really met faults

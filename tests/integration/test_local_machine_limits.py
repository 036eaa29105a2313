"""A trainer gets its machine type's memory, and ends as Vertex AI ends it past it.

The smallest machine Vertex AI trains on, ``n4-highcpu-2`` (2 vCPUs, 4 GB), keeps the test cheap: the
trainer that asks for 4.5 GB is killed once it holds 4. Then the same service runs the next job, a
trainer within the machine's memory, to its end, and the log says what each used.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.fixtures.local_service import LocalService, StagedTrainer, log_entries, wait_for_job
from tests.fixtures.vertex import LOCATION, VERTEX_TERMINAL, aiplatform, worker_pool

pytestmark = pytest.mark.integration
SMALLEST = "n4-highcpu-2"


def _run(local_service: LocalService, trainer: StagedTrainer, project: str, gib: float) -> dict[str, Any]:
    jobs = aiplatform(local_service.url).projects().locations().customJobs()
    pool = worker_pool(trainer, "allocate", [f"--gib={gib}"])
    pool["machineSpec"] = {"machineType": SMALLEST}
    body = {"displayName": f"allocate-{gib}", "jobSpec": {"workerPoolSpecs": [pool]}}
    created = jobs.create(parent=f"projects/{project}/locations/{LOCATION}", body=body).execute()
    job: dict[str, Any] = wait_for_job(jobs, created["name"], VERTEX_TERMINAL, timeout=300)
    return job


def test_a_trainer_past_its_machines_memory_fails_as_on_vertex_and_the_next_job_runs(
    local_service: LocalService, staged_trainer: StagedTrainer
) -> None:
    project = f"proj-{uuid.uuid4().hex[:10]}"
    over = _run(local_service, staged_trainer, project, 4.5)
    assert over["state"] == "JOB_STATE_FAILED", over
    message = over["error"]["message"]
    assert message.startswith(
        "The replica workerpool0-0 ran out-of-memory and exited with a non-zero status of 9(SIGKILL). "
        "Its peak memory was 4 GB, of the 4 GB of its n4-highcpu-2 machine. "
        "To find out more about why your job exited please check the logs: "
    ), message
    assert "Internal error" not in message
    lines = [
        e["textPayload"] for e in log_entries(local_service.url, project, over["name"].rsplit("/", 1)[1])
    ]
    assert any(line.startswith(f"Pool workerpool0 ({SMALLEST}: 4 GB, 2 vCPUs): ") for line in lines), lines
    assert any("workerpool0-0 used at most 4 GB" in line and "OOM killer" in line for line in lines), lines

    within = _run(local_service, staged_trainer, project, 0.25)
    assert within["state"] == "JOB_STATE_SUCCEEDED", within.get("error")
    job_id = within["name"].rsplit("/", 1)[1]
    lines = [e["textPayload"] for e in log_entries(local_service.url, project, job_id)]
    assert any(
        line.startswith("workerpool0-0 used at most 0.") and "memory, within it" in line for line in lines
    ), lines

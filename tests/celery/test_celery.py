"""The example pipeline on CeleryExecutor with two workers that share no disk, and a worker lost.

- Build runs on worker A, stage on worker B (queues): B cannot see A's TMPDIR (a private tmpfs),
  so it rebuilds the trainer from its source and stages the build's exact bytes.
- A worker SIGKILLed while its task waits on a training job: the scheduler fails the try when
  the heartbeats stop, the retry runs on the other worker and adopts the job: still one job.
- The same mid-ladder: rung 1 out of stock (FAILED, code 8), the worker SIGKILLed under rung 2's
  job; the retry passes rung 1's job and adopts rung 2's: two jobs in all, one per rung.

``AIP_RELIABILITY_REPORT`` (a JSON file) receives the timings, figures for RELIABILITY.md, never
assertions.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.celery.conftest import CeleryStack
from tests.fixtures.local_service import storage_client
from tests.fixtures.vertex import aiplatform, vertex_jobs
from tests.fixtures.waiting import wait_until

pytestmark = [pytest.mark.celery, pytest.mark.soak]
PIPELINE = "aip_training_pipeline"
KILL = "aip_celery_kill"
LADDER = "aip_celery_ladder_kill"


def _report(**figures: Any) -> None:
    path = os.environ.get("AIP_RELIABILITY_REPORT")
    if path:
        found = json.loads(Path(path).read_text()) if Path(path).exists() else {}
        Path(path).write_text(json.dumps({**found, **figures}))


def _jobs(stack: CeleryStack, project: str) -> list[dict[str, Any]]:
    """The project's Vertex AI training jobs (the default backend), oldest first."""
    return vertex_jobs(stack.ml_url, project)


def test_build_and_stage_on_workers_that_share_no_disk(celery_stack: CeleryStack) -> None:
    stack, project = celery_stack, f"celery-{uuid.uuid4().hex[:8]}"
    conf = {"bucket": stack.bucket, "project_id": project, "max_trials": 2, "max_parallel_trials": 2}
    started = time.monotonic()
    run_id = stack.trigger(PIPELINE, conf)
    state = stack.wait_for_run(PIPELINE, run_id)
    _report(
        celery_stack_start_s=round(stack.started_in, 1),
        celery_pipeline_s=round(time.monotonic() - started, 1),
    )

    assert state == "success", stack.task_states(PIPELINE, run_id)
    # Each task ran where its queue sent it: its log is on that worker only.
    assert stack.ran_on(PIPELINE, run_id, "build_trainer") == ["worker_a"]
    assert stack.ran_on(PIPELINE, run_id, "stage_trainer") == ["worker_b"]
    assert stack.task_instance(PIPELINE, run_id, "build_trainer")["queue"] == "aip_a"
    assert stack.task_instance(PIPELINE, run_id, "stage_trainer")["queue"] == "aip_b"

    built = stack.xcom(PIPELINE, run_id, "build_trainer")
    worker_a = stack.workers["worker_a"]
    # The build wrote into worker A's TMPDIR, which nobody else sees: not even this test.
    assert Path(built["path"]).is_relative_to(worker_a.tmpdir)
    assert not Path(built["path"]).exists()
    assert list(worker_a.tmpdir.iterdir()) == []

    stage_log = stack.workers["worker_b"].task_log(PIPELINE, run_id, "stage_trainer").read_text()
    assert f"rebuilt {Path(built['path']).name} from its source, same sha256 {built['sha256']}" in stage_log
    (staged,) = stack.xcom(PIPELINE, run_id, "stage_trainer")
    assert staged == f"gs://{stack.bucket}/staging/{built['sha256']}/{Path(built['path']).name}"
    blob = storage_client(stack.gcs_url).bucket(stack.bucket).blob(staged.split("/", 3)[3])
    assert hashlib.sha256(blob.download_as_bytes()).hexdigest() == built["sha256"]

    jobs = _jobs(stack, project)
    assert [job["state"] for job in jobs] == ["SUCCEEDED"]
    spec = jobs[0]["job"]["trialJobSpec"]  # the pipeline tunes: a HyperparameterTuningJob
    assert spec["workerPoolSpecs"][0]["pythonPackageSpec"]["packageUris"] == [staged]
    bucket = storage_client(stack.gcs_url).bucket(stack.bucket)
    manifests = [b.name for b in bucket.list_blobs(prefix="models/iris/") if b.name.endswith("manifest.json")]
    assert [name for name in manifests if jobs[0]["jobId"] in name]


def test_a_worker_killed_while_its_job_trains_the_retry_adopts_the_job(celery_stack: CeleryStack) -> None:
    stack, project = celery_stack, f"celery-kill-{uuid.uuid4().hex[:6]}"
    conf = {
        "project_id": project,
        "package_uri": stack.package_uri,
        "job_dir": f"gs://{stack.bucket}/kill/{project}",
        "seconds": 60,
    }
    run_id = stack.trigger(KILL, conf)

    def training_under_a_worker() -> list[str]:
        jobs = _jobs(stack, project)
        running = stack.task_states(KILL, run_id).get("train") == "running"
        return (
            stack.ran_on(KILL, run_id, "train") if running and jobs and jobs[0]["state"] == "RUNNING" else []
        )

    (first,) = wait_until(training_under_a_worker, 180, "running job under a running task", every=0.5)
    # The task has logged its wait on the job: it holds the job, and nothing else will cancel it.
    log = stack.workers[first].task_log(KILL, run_id, "train")
    wait_until(
        lambda: "RUNNING" in log.read_text(), 60, "log of the task waiting on the running job", every=0.5
    )
    (job,) = _jobs(stack, project)
    killed_at = time.monotonic()
    killed = stack.workers[first].kill()

    state = stack.wait_for_run(KILL, run_id)
    recovered_s = round(time.monotonic() - killed_at, 1)
    _report(celery_kill={"processes_killed": len(killed), "kill_to_run_end_s": recovered_s, "job_s": 60})

    assert state == "success", stack.task_states(KILL, run_id)
    other = next(name for name in stack.workers if name != first)
    ti = stack.task_instance(KILL, run_id, "train")
    assert ti["try_number"] == 2
    assert stack.ran_on(KILL, run_id, "train", attempt=2) == [other]
    retry_log = stack.workers[other].task_log(KILL, run_id, "train", attempt=2).read_text()
    (adopted,) = [
        line
        for line in retry_log.splitlines()
        if f"Training job {job['jobId']} (" in line and " exists, " in line
    ]
    assert "exists, made by an earlier try of this task instance: adopt" in adopted
    assert stack.xcom(KILL, run_id, "train")["job_id"] == job["jobId"]
    jobs = _jobs(stack, project)
    assert [(j["jobId"], j["state"]) for j in jobs] == [(job["jobId"], "SUCCEEDED")]


def _rung_jobs(stack: CeleryStack, project: str, rung: str) -> list[dict[str, Any]]:
    """The project's CustomJobs of one ladder rung, found by their ``aip_rung`` label."""
    jobs = aiplatform(stack.ml_url).projects().locations().customJobs()
    parent = f"projects/{project}/locations/us-central1"
    listed = jobs.list(parent=parent, filter=f'labels.aip_rung="{rung}"').execute()
    return list(listed.get("customJobs", []))


def test_a_worker_lost_mid_ladder_the_retry_resumes_at_the_rung_reached(celery_stack: CeleryStack) -> None:
    stack, project = celery_stack, f"celery-ladder-{uuid.uuid4().hex[:6]}"
    for worker in stack.workers.values():  # an earlier test may have killed one: the retry needs it
        worker.revive()
    conf = {
        "project_id": project,
        "package_uri": stack.package_uri,
        "job_dir": f"gs://{stack.bucket}/ladder/{project}",
        "seconds": 20,  # it ends while the scheduler waits for the lost heartbeats: no cost
    }
    run_id = stack.trigger(LADDER, conf)

    def rung_two_held_by_a_worker() -> list[str]:
        cpu = _rung_jobs(stack, project, "cpu")
        running = stack.task_states(LADDER, run_id).get("train") == "running"
        return stack.ran_on(LADDER, run_id, "train") if running and cpu else []

    (first,) = wait_until(rung_two_held_by_a_worker, 180, "rung 2's job under a running task", every=0.5)
    (rung_two,) = _rung_jobs(stack, project, "cpu")
    # The task has announced rung 2's job: it climbed, and it holds that job now.
    log = stack.workers[first].task_log(LADDER, run_id, "train")
    wait_until(
        lambda: f"{rung_two['displayName']} on rung cpu" in log.read_text(),
        60,
        "rung 2 in the task log",
        every=0.5,
    )
    killed_at = time.monotonic()
    killed = stack.workers[first].kill()
    for worker in stack.workers.values():  # the retry's worker: ready long before the heartbeat timeout
        if worker.name != first:
            worker.wait_until_ready()

    state = stack.wait_for_run(LADDER, run_id)
    _report(
        celery_ladder_kill={
            "processes_killed": len(killed),
            "kill_to_run_end_s": round(time.monotonic() - killed_at, 1),
            "job_s": 20,
        }
    )

    assert state == "success", stack.task_states(LADDER, run_id)
    assert stack.task_instance(LADDER, run_id, "train")["try_number"] == 2
    other = next(name for name in stack.workers if name != first)
    assert stack.ran_on(LADDER, run_id, "train", attempt=2) == [other]
    retry_log = stack.workers[other].task_log(LADDER, run_id, "train", attempt=2).read_text()
    assert "Creating Vertex AI customJobs" not in retry_log  # nothing created again: rung 1 included
    (passed,) = [line for line in retry_log.splitlines() if "Capacity ladder: rung 1, a100" in line]
    assert "ended (stockout)" in passed
    (adopted,) = [
        line
        for line in retry_log.splitlines()
        if f"Training job {rung_two['displayName']} (" in line and " exists, " in line
    ]
    assert "exists, made by an earlier try of this task instance: adopt" in adopted

    jobs = _jobs(stack, project)
    assert [(j["job"]["labels"]["aip_rung"], j["state"]) for j in jobs] == [
        ("a100", "FAILED"),
        ("cpu", "SUCCEEDED"),
    ]
    assert jobs[0]["job"]["error"]["code"] == 8
    assert jobs[1]["jobId"] == rung_two["displayName"]
    summary = stack.xcom(LADDER, run_id, "train")
    assert summary["job_id"] == rung_two["displayName"]
    assert [(r["label"], r["job_id"], r["state"], r["ended_because"]) for r in summary["ladder"]] == [
        ("a100", jobs[0]["jobId"], "FAILED", "stockout"),
        ("cpu", jobs[1]["jobId"], "SUCCEEDED", None),
    ]

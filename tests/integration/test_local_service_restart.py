"""Job records outlive the service: a crash and a clean stop, then a restart on the same data dir."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.local_service import (
    TERMINAL,
    LocalService,
    Restarts,
    StagedTrainer,
    process_gone,
    wait_for_job,
    wait_for_state,
)
from tests.fixtures.tools import MOUNT_NAMESPACE_INSTALL, missing
from tests.fixtures.vertex import LOCATION, VERTEX_TERMINAL, aiplatform
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.integration
PROJECT = "restart-project"


def _start(restarts: Restarts, data_dir: Path, gcs_url: str) -> LocalService:
    """A service on ``data_dir`` running one job at a time."""
    return restarts.start(data_dir, gcs_url, max_running_jobs=1)


def _create(ml: Any, job_id: str, training_input: dict[str, Any]) -> dict[str, Any]:
    body = {"jobId": job_id, "trainingInput": training_input}
    job: dict[str, Any] = ml.projects().jobs().create(parent=f"projects/{PROJECT}", body=body).execute()
    return job


def test_crash_fails_running_jobs_and_requeues_queued_ones(
    restarts: Restarts, staged_trainer: StagedTrainer, fake_gcs: Any, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    first = _start(restarts, data_dir, fake_gcs.url)
    ml = first.ml()
    done_ti = staged_trainer.training_input("succeed")
    _create(ml, "finished_before", done_ti)
    wait_for_state(ml, f"projects/{PROJECT}/jobs/finished_before", TERMINAL)
    sleep_ti = staged_trainer.training_input("sleep")
    _create(ml, "running_at_crash", sleep_ti)
    wait_for_state(ml, f"projects/{PROJECT}/jobs/running_at_crash", {"RUNNING"})
    queued = _create(ml, "queued_at_crash", staged_trainer.training_input("succeed"))
    sleeper = staged_trainer.wait_for_json(sleep_ti["jobDir"] + "/sleeper.json")
    assert queued["state"] == "QUEUED"
    assert queued["jobPosition"] == "1"

    first.crash()
    second = _start(restarts, data_dir, fake_gcs.url)
    ml = second.ml()

    crashed = ml.projects().jobs().get(name=f"projects/{PROJECT}/jobs/running_at_crash").execute()
    assert crashed["state"] == "FAILED"
    assert "stopped while this job was RUNNING" in crashed["errorMessage"]
    assert process_gone(sleeper["pid"])
    before = ml.projects().jobs().get(name=f"projects/{PROJECT}/jobs/finished_before").execute()
    assert before["state"] == "SUCCEEDED"
    resumed = wait_for_state(ml, f"projects/{PROJECT}/jobs/queued_at_crash", TERMINAL)
    assert resumed["state"] == "SUCCEEDED"
    assert resumed["createTime"] == queued["createTime"]


def test_clean_stop_records_why_the_running_job_ended(
    restarts: Restarts, staged_trainer: StagedTrainer, fake_gcs: Any, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    first = _start(restarts, data_dir, fake_gcs.url)
    ti = staged_trainer.training_input("sleep")
    _create(first.ml(), "running_at_stop", ti)
    wait_for_state(first.ml(), f"projects/{PROJECT}/jobs/running_at_stop", {"RUNNING"})
    sleeper = staged_trainer.wait_for_json(ti["jobDir"] + "/sleeper.json")

    first.stop()
    second = _start(restarts, data_dir, fake_gcs.url)

    job = second.ml().projects().jobs().get(name=f"projects/{PROJECT}/jobs/running_at_stop").execute()
    assert job["state"] == "FAILED"
    assert "service was stopped while this job was running" in job["errorMessage"]
    assert process_gone(sleeper["pid"])


def test_vertex_jobs_outlive_a_crash_too(
    restarts: Restarts, staged_trainer: StagedTrainer, fake_gcs: Any, tmp_path: Path
) -> None:
    from tests.fixtures.vertex import worker_pool

    data_dir = tmp_path / "data"
    first = _start(restarts, data_dir, fake_gcs.url)
    jobs = aiplatform(first.url).projects().locations().customJobs()
    parent = f"projects/{PROJECT}/locations/{LOCATION}"
    running = jobs.create(
        parent=parent,
        body={"displayName": "r", "jobSpec": {"workerPoolSpecs": [worker_pool(staged_trainer, "sleep", [])]}},
    ).execute()
    wait_for_job(jobs, running["name"], {"JOB_STATE_RUNNING"})
    queued = jobs.create(
        parent=parent,
        body={
            "displayName": "q",
            "jobSpec": {"workerPoolSpecs": [worker_pool(staged_trainer, "tune", ["--x=3"])]},
        },
    ).execute()
    assert queued["state"] == "JOB_STATE_QUEUED"

    first.crash()
    second = _start(restarts, data_dir, fake_gcs.url)
    jobs = aiplatform(second.url).projects().locations().customJobs()

    crashed = jobs.get(name=running["name"]).execute()
    assert crashed["state"] == "JOB_STATE_FAILED"
    assert crashed["error"]["code"] == 3
    assert "stopped while this job was RUNNING" in crashed["error"]["message"]
    resumed = wait_for_job(jobs, queued["name"], VERTEX_TERMINAL)
    assert resumed["state"] == "JOB_STATE_SUCCEEDED"
    assert resumed["createTime"] == queued["createTime"]


def test_a_crashed_replicas_gcs_mount_is_unmounted_by_the_next_service(
    restarts: Restarts, fake_gcs: Any, tmp_path: Path
) -> None:
    """A container replica's /gcs/ is mounted in this machine's namespace: after a crash its rclone
    is dead and the mount answers "Transport endpoint is not connected" until the next service on
    the data dir unmounts it (here a mount made as the replica's would be, then its rclone killed)."""
    from airflow_aip.local.executor.gcs_mount import fuse_mounts, mount_unavailable, unmount_left_over

    if mount_unavailable() is not None or not (shutil.which("fusermount3") or shutil.which("fusermount")):
        missing("a FUSE mount (root, /dev/fuse, rclone, fusermount)", MOUNT_NAMESPACE_INSTALL)
    data_dir = tmp_path / "data"
    point = data_dir / "projects/1/jobs/j1/work/job/workerpool0-0/gcs"
    point.mkdir(parents=True)
    rclone = subprocess.Popen(["rclone", "mount", ":memory:", str(point), "--log-level", "ERROR"])
    try:
        wait_until(lambda: point in fuse_mounts(), 30, "the rclone mount")
    finally:
        rclone.kill()
        rclone.wait()
    try:
        with pytest.raises(OSError, match="not connected"):
            list(point.iterdir())  # what a crash leaves

        _start(restarts, data_dir, fake_gcs.url)

        assert point not in fuse_mounts()
        assert list(point.iterdir()) == []
    finally:
        unmount_left_over(data_dir)  # nothing left behind, whatever the outcome

"""``aip-local jobs ...`` against the running service, and ``serve``'s loopback guard."""

from __future__ import annotations

import uuid

import pytest

from airflow_aip.local.cli import main
from tests.fixtures.local_service import TERMINAL, LocalService, StagedTrainer, wait_for_job, wait_for_state
from tests.fixtures.vertex import LOCATION, VERTEX_TERMINAL, aiplatform, worker_pool

pytestmark = pytest.mark.integration


def test_jobs_commands(
    local_env: LocalService, staged_trainer: StagedTrainer, capsys: pytest.CaptureFixture[str]
) -> None:
    local_service = local_env
    project = f"cli-{uuid.uuid4().hex[:8]}"
    ml = local_service.ml()
    body = {
        "jobId": "cli_job",
        "trainingInput": staged_trainer.training_input("succeed", ["--message", "from-cli"]),
    }
    ml.projects().jobs().create(parent=f"projects/{project}", body=body).execute()
    sleeper = {"jobId": "cli_sleeper", "trainingInput": staged_trainer.training_input("sleep")}
    ml.projects().jobs().create(parent=f"projects/{project}", body=sleeper).execute()
    common = ["jobs", "--project", project]  # the endpoint comes from CLOUDSDK_API_ENDPOINT_OVERRIDES_ML

    assert main([*common, "logs", "cli_job", "--follow"]) == 0
    logs = capsys.readouterr().out
    assert main([*common, "describe", "cli_job"]) == 0
    described = capsys.readouterr().out
    wait_for_state(ml, f"projects/{project}/jobs/cli_sleeper", {"RUNNING"})
    assert main([*common, "cancel", "cli_sleeper"]) == 0
    wait_for_state(ml, f"projects/{project}/jobs/cli_sleeper", TERMINAL)
    capsys.readouterr()
    assert main([*common, "list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert main([*common, "describe", "no_such_job"]) == 1
    missing = capsys.readouterr().err

    assert "master-replica-0 INFO: training with message=from-cli" in logs
    assert "service INFO: Job state: SUCCEEDED" in logs
    assert "state: SUCCEEDED" in described
    assert "jobId: cli_job" in described
    assert listed[0].split() == ["JOB_ID", "STATUS", "CREATED", "KIND"]
    assert [line.split()[:2] for line in listed[1:]] == [
        ["cli_sleeper", "CANCELLED"],
        ["cli_job", "SUCCEEDED"],
    ]
    assert "HTTP 404" in missing


def test_jobs_commands_on_vertex_jobs(
    local_env: LocalService, staged_trainer: StagedTrainer, capsys: pytest.CaptureFixture[str]
) -> None:
    project = f"cli-{uuid.uuid4().hex[:8]}"
    jobs = aiplatform(local_env.url).projects().locations().customJobs()
    parent = f"projects/{project}/locations/{LOCATION}"
    done = {
        "displayName": "cli-ok",
        "jobSpec": {"workerPoolSpecs": [worker_pool(staged_trainer, "tune", ["--x=3"])]},
    }
    sleeper = {
        "displayName": "cli-sleep",
        "jobSpec": {"workerPoolSpecs": [worker_pool(staged_trainer, "sleep", [])]},
    }
    done_name = jobs.create(parent=parent, body=done).execute()["name"]
    sleep_name = jobs.create(parent=parent, body=sleeper).execute()["name"]
    done_id, sleep_id = done_name.rsplit("/", 1)[1], sleep_name.rsplit("/", 1)[1]
    common = ["jobs", "--project", project, "--location", LOCATION]

    assert main([*common, "logs", done_id, "--follow"]) == 0
    logs = capsys.readouterr().out
    wait_for_job(jobs, sleep_name, {"JOB_STATE_RUNNING"})
    assert main([*common, "cancel", sleep_id]) == 0
    wait_for_job(jobs, sleep_name, VERTEX_TERMINAL)
    capsys.readouterr()
    assert main([*common, "describe", sleep_id]) == 0
    described = capsys.readouterr().out
    assert main([*common, "list", "--api", "vertex", "--filter", 'display_name="cli-ok"']) == 0
    listed = capsys.readouterr().out.splitlines()

    assert "workerpool0-0 INFO: trial None x=3.0" in logs
    assert "service INFO: Job state: SUCCEEDED" in logs
    assert "state: JOB_STATE_CANCELLED" in described
    assert [line.split()[:2] for line in listed[1:]] == [[done_id, "JOB_STATE_SUCCEEDED"]]
    assert listed[1].split()[-2:] == ["customJob", "cli-ok"]


def test_serve_refuses_a_public_address_unless_allowed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--host", "0.0.0.0"]) == 2
    assert "--allow-remote" in capsys.readouterr().err

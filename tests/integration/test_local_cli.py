"""``aip-local jobs ...`` against the running service, and ``serve``'s loopback guard."""

from __future__ import annotations

import uuid

import pytest

from airflow_aip.local.cli import main
from tests.fixtures.local_service import TERMINAL, LocalService, StagedTrainer, wait_for_state

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
    assert listed[0].split() == ["JOB_ID", "STATUS", "CREATED"]
    assert [line.split()[:2] for line in listed[1:]] == [
        ["cli_sleeper", "CANCELLED"],
        ["cli_job", "SUCCEEDED"],
    ]
    assert "HTTP 404" in missing


def test_serve_refuses_a_public_address_unless_allowed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--host", "0.0.0.0"]) == 2
    assert "--allow-remote" in capsys.readouterr().err

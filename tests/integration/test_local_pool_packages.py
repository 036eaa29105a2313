"""Each worker pool installs its own ``packageUris`` only, as on Vertex AI.

A two-pool job whose second pool forgot the trainer's package fails locally as on Vertex (its
replica cannot import the module: ``ModuleNotFoundError``); with the package on both pools the
same job succeeds. Both pools run ``aip_test_trainer.succeed``: the chief waits for the worker's
report, so the worker's import decides the job, whichever replica starts first.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from airflow_aip.local.store import project_number
from airflow_aip.packaging import build_sdist
from tests.fixtures.local_service import (
    LocalService,
    StagedTrainer,
    log_entries,
    storage_client,
    wait_for_job,
)
from tests.fixtures.vertex import LOCATION, VERTEX_TERMINAL, aiplatform

pytestmark = pytest.mark.integration
IMAGE = "us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest"


def _helper_package(tmp: Path, trainer: StagedTrainer) -> str:
    """A one-module package that is not the trainer: what the forgetful pool installs instead."""
    root = tmp / "helper"
    (root / "aiphelper").mkdir(parents=True)
    (root / "aiphelper" / "__init__.py").write_text("")
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "aip-helper"\nversion = "0.1.0"\n\n[tool.setuptools]\npackages = ["aiphelper"]\n'
    )
    built = build_sdist(root / "aiphelper", tmp / "helper-dist")
    name = f"helpers/{uuid.uuid4().hex[:8]}/{built.path.name}"
    storage_client(trainer.gcs_url).bucket(trainer.bucket).blob(name).upload_from_filename(str(built.path))
    return f"gs://{trainer.bucket}/{name}"


def _pool(uris: list[str], base: str) -> dict[str, Any]:
    spec = {
        "executorImageUri": IMAGE,
        "packageUris": uris,
        "pythonModule": "aip_test_trainer.succeed",
        "args": [f"--job-dir={base}"],
    }
    return {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1", "pythonPackageSpec": spec}


def _run(url: str, project: str, worker_uris: list[str], trainer: StagedTrainer) -> dict[str, Any]:
    base = f"gs://{trainer.bucket}/pools/{uuid.uuid4().hex[:8]}"
    pools = [_pool([trainer.package_uri], base), _pool(worker_uris, base)]
    jobs = aiplatform(url).projects().locations().customJobs()
    body = {"displayName": "two-pools", "jobSpec": {"workerPoolSpecs": pools}}
    job = jobs.create(parent=f"projects/{project}/locations/{LOCATION}", body=body).execute()
    return wait_for_job(jobs, job["name"], VERTEX_TERMINAL, timeout=300)


def test_a_pool_that_forgot_the_package_fails_and_with_it_the_job_succeeds(
    local_service: LocalService, staged_trainer: StagedTrainer, tmp_path: Path
) -> None:
    project = f"pools-{uuid.uuid4().hex[:8]}"
    forgot = _run(local_service.url, project, [_helper_package(tmp_path, staged_trainer)], staged_trainer)
    assert forgot["state"] == "JOB_STATE_FAILED"
    assert forgot["error"]["message"].startswith(
        "The replica workerpool1-0 exited with a non-zero status of 1."
    )
    job_id = forgot["name"].rsplit("/", 1)[-1]
    lines = [str(e["textPayload"]) for e in log_entries(local_service.url, project_number(project), job_id)]
    assert any("ModuleNotFoundError: No module named 'aip_test_trainer'" in line for line in lines), lines

    both = _run(local_service.url, project, [staged_trainer.package_uri], staged_trainer)
    assert both["state"] == "JOB_STATE_SUCCEEDED", both.get("error")

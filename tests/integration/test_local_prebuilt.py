"""A pythonPackageSpec pool in its pre-built image when the container engine has it, else its environment.

As ``gcloud ai custom-jobs local-run`` runs it: the image's Python pip-installs the pool's staged
package and runs its module. The image here is a stand-in of ours tagged with a pre-built image's
name for the session (:func:`tests.fixtures.containers.prebuilt_standin`); what the trainer saw
(its Python, a variable baked into the stand-in) comes back through Cloud Storage. Without the
image the uv environment runs the pool and the job's log says why.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from airflow_aip.local.executor.containers import ContainerEngine
from airflow_aip.local.store import project_number
from tests.fixtures.containers import STANDIN_MARK, containers_of
from tests.fixtures.local_service import (
    LocalService,
    Restarts,
    StagedTrainer,
    log_entries,
    wait_for_job,
)
from tests.fixtures.vertex import LOCATION, VERTEX_TERMINAL, aiplatform

pytestmark = pytest.mark.integration
NOT_HELD = "us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest"  # never pulled here


def _package_pool(image: str, trainer: StagedTrainer, base: str) -> dict[str, Any]:
    spec = {
        "executorImageUri": image,
        "packageUris": [trainer.package_uri],
        "pythonModule": "aip_test_trainer.succeed",
        "args": [f"--job-dir={base}"],
    }
    return {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1", "pythonPackageSpec": spec}


def _run(url: str, project: str, pools: list[dict[str, Any]]) -> dict[str, Any]:
    jobs = aiplatform(url).projects().locations().customJobs()
    body = {"displayName": "prebuilt", "jobSpec": {"workerPoolSpecs": pools}}
    job = jobs.create(parent=f"projects/{project}/locations/{LOCATION}", body=body).execute()
    return wait_for_job(jobs, job["name"], VERTEX_TERMINAL, timeout=300)


def _log(url: str, project: str, job: dict[str, Any]) -> list[str]:
    job_id = job["name"].rsplit("/", 1)[-1]
    return [str(e["textPayload"]) for e in log_entries(url, project_number(project), job_id)]


def _base(trainer: StagedTrainer) -> str:
    return f"gs://{trainer.bucket}/prebuilt/{uuid.uuid4().hex[:8]}"


def test_a_package_job_runs_in_its_prebuilt_image_when_the_engine_has_it(
    local_service: LocalService,
    container_engine: ContainerEngine,
    prebuilt_standin: str,
    staged_trainer: StagedTrainer,
) -> None:
    project, base = f"pre-{uuid.uuid4().hex[:8]}", _base(staged_trainer)
    done = _run(local_service.url, project, [_package_pool(prebuilt_standin, staged_trainer, base)])
    lines = _log(local_service.url, project, done)
    assert done["state"] == "JOB_STATE_SUCCEEDED", "\n".join(lines)
    seen = staged_trainer.read_json(f"{base}/report.json")
    assert seen["AIP_TEST_ENV"] == STANDIN_MARK  # baked into the image, set by nothing else
    assert (seen["prefix"], seen["executable"]) == ("/usr", "/usr/bin/python3")  # the image's Python
    assert f"Pool workerpool0 runs in its pre-built image {prebuilt_standin} (podman has the image)" in lines
    label = f"{project_number(project)}/{done['name'].rsplit('/', 1)[-1]}"
    assert containers_of(container_engine, local_service.data_dir, label) == []


def test_without_the_image_the_pool_runs_in_its_environment_and_the_log_says_why(
    local_service: LocalService, container_engine: ContainerEngine, staged_trainer: StagedTrainer
) -> None:
    assert not container_engine.has_image(NOT_HELD)
    project, base = f"pre-{uuid.uuid4().hex[:8]}", _base(staged_trainer)
    done = _run(local_service.url, project, [_package_pool(NOT_HELD, staged_trainer, base)])
    assert done["state"] == "JOB_STATE_SUCCEEDED", done.get("error")
    assert staged_trainer.read_json(f"{base}/report.json")["prefix"] != "/usr"  # an environment's
    why = "podman has no such image and --prebuilt-images present pulls none"
    expected = f"Pool workerpool0 runs in a virtual environment, not in {NOT_HELD}: {why}"
    assert any(line.startswith(expected) for line in _log(local_service.url, project, done))


def test_pull_tries_an_image_once_per_service_then_falls_back(
    restarts: Restarts, fake_gcs: Any, staged_trainer: StagedTrainer, tmp_path: Path
) -> None:
    """No registry answers here: the first job's pull fails, the second job tries none; both run."""
    service = restarts.start(tmp_path / "data", fake_gcs.url, extra_args=["--prebuilt-images", "pull"])
    project = f"pre-{uuid.uuid4().hex[:8]}"
    whys = []
    for _ in range(2):
        done = _run(service.url, project, [_package_pool(NOT_HELD, staged_trainer, _base(staged_trainer))])
        assert done["state"] == "JOB_STATE_SUCCEEDED", done.get("error")
        prefix = f"Pool workerpool0 runs in a virtual environment, not in {NOT_HELD}: "
        whys += [line[len(prefix) :] for line in _log(service.url, project, done) if line.startswith(prefix)]
    assert whys[0].startswith("podman could not pull it: ")
    assert whys[1].startswith("its pull failed earlier in this service: ")
    assert len(whys) == 2


def test_a_tuning_jobs_trials_run_in_the_prebuilt_image_and_report_their_metric(
    local_service: LocalService, prebuilt_standin: str, staged_trainer: StagedTrainer
) -> None:
    """Each trial's replica reports through cloudml-hypertune in the image's own /tmp/hypertune."""
    project, base = f"pre-{uuid.uuid4().hex[:8]}", _base(staged_trainer)
    pool = _package_pool(prebuilt_standin, staged_trainer, base)
    pool["pythonPackageSpec"].update(pythonModule="aip_test_trainer.tune", args=["--report"])
    body = {
        "displayName": "prebuilt-tuning",
        "maxTrialCount": 2,
        "parallelTrialCount": 1,
        "studySpec": {
            "metrics": [{"metricId": "training/hptuning/metric", "goal": "MAXIMIZE"}],
            "parameters": [{"parameterId": "x", "discreteValueSpec": {"values": [2, 3]}}],
            "algorithm": "GRID_SEARCH",
        },
        "trialJobSpec": {"workerPoolSpecs": [pool], "baseOutputDirectory": {"outputUriPrefix": base}},
    }
    tuning = aiplatform(local_service.url).projects().locations().hyperparameterTuningJobs()
    created = tuning.create(parent=f"projects/{project}/locations/{LOCATION}", body=body).execute()
    done = wait_for_job(tuning, created["name"], VERTEX_TERMINAL, timeout=300)
    assert done["state"] == "JOB_STATE_SUCCEEDED", "\n".join(_log(local_service.url, project, done))
    finals = sorted(t["finalMeasurement"]["metrics"][0]["value"] for t in done["trials"])
    assert finals == [-1.0, 0.0]  # -(x - 3)^2 for x = 2, 3 ("bad": no bonus)
    for trial in done["trials"]:
        assert staged_trainer.read_json(f"{base}/{trial['id']}/model/report.json")["prefix"] == "/usr"

"""A deployment made for others (docker-compose.yaml's ``--deployment "docker compose"``) refuses at
create what it cannot run as Vertex AI would, in one line naming itself; a developer's own service
runs such a job and says so in its log.

What the deployment lacks is faked at the boundary the service asks (``mount_unavailable``,
``private_tmp_unavailable``): this machine has root and FUSE, a compose container may not.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_aip.exceptions import ValidationError
from airflow_aip.local import deployment
from airflow_aip.local.service import ServiceConfig, TrainingService
from airflow_aip.local.vertex.render import CUSTOM_JOBS
from airflow_aip.local.vertex.service import VertexJobs
from tests.fixtures.vertex import WORKER_POOL

NO_FUSE = "/gcs/ is not mounted: this machine has no /dev/fuse"
CONTAINER = {
    "machineSpec": {"machineType": "n1-standard-4"},
    "replicaCount": "1",
    "containerSpec": {"imageUri": "us-docker.pkg.dev/p/r/trainer:1"},
}


def _service(tmp_path: Path, name: str) -> Iterator[TrainingService]:
    running = TrainingService(ServiceConfig(tmp_path / name, storage_url=None, deployment=name))
    yield running
    running.stop()


@pytest.fixture
def compose(tmp_path: Path) -> Iterator[TrainingService]:
    yield from _service(tmp_path, "docker compose")


@pytest.fixture
def own(tmp_path: Path) -> Iterator[TrainingService]:
    yield from _service(tmp_path, "")


def _create(service: TrainingService, pool: dict[str, Any]) -> dict[str, Any]:
    body = {"displayName": "d", "jobSpec": {"workerPoolSpecs": [pool]}}
    return VertexJobs(service).create(CUSTOM_JOBS, "proj", "us-central1", body)


def test_without_fuse_a_vertex_job_is_refused_at_create_naming_the_deployment(
    compose: TrainingService, own: TrainingService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deployment, "mount_unavailable", lambda: NO_FUSE)
    with pytest.raises(ValidationError) as refused:
        _create(compose, WORKER_POOL)
    said = str(refused.value)
    assert said.startswith("jobSpec: the docker compose deployment of aip-local cannot run this job")
    assert NO_FUSE in said
    assert "\n" not in said
    assert compose.store.records() == []  # refused before any side effect
    # A developer's own service runs it (and its log says /gcs/ is not mounted).
    assert _create(own, WORKER_POOL)["state"] == "JOB_STATE_QUEUED"


def test_with_fuse_the_deployment_takes_the_job(
    compose: TrainingService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deployment, "mount_unavailable", lambda: None)
    assert _create(compose, WORKER_POOL)["state"] == "JOB_STATE_QUEUED"


def test_without_an_engine_a_container_is_refused_naming_the_deployment(
    compose: TrainingService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deployment, "mount_unavailable", lambda: None)
    with pytest.raises(ValidationError) as refused:
        _create(compose, CONTAINER)
    assert refused.value.field == "jobSpec.workerPoolSpecs[0].containerSpec"
    assert refused.value.rule.startswith(
        "the docker compose deployment of aip-local runs no container engine"
    )


def test_an_ml_tuning_job_without_a_private_tmp_is_refused_naming_the_deployment(
    compose: TrainingService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deployment, "private_tmp_unavailable", lambda: "no mount namespace can be made here")
    body = {
        "jobId": "t1",
        "trainingInput": {
            "region": "us-central1",
            "packageUris": ["gs://bucket/trainer-0.1.tar.gz"],
            "pythonModule": "trainer.task",
            "hyperparameters": {
                "goal": "MAXIMIZE",
                "hyperparameterMetricTag": "accuracy",
                "maxTrials": 2,
                "params": [{"parameterName": "lr", "type": "DOUBLE", "minValue": 0.01, "maxValue": 0.1}],
            },
        },
    }
    with pytest.raises(ValidationError) as refused:
        compose.create_job("proj", body)
    assert refused.value.field == "trainingInput.hyperparameters"
    assert "docker compose deployment" in refused.value.rule
    assert "private /tmp/hypertune: no mount namespace can be made here" in refused.value.rule

"""Seed 003's workflow through the example Dag: build the image, push it, tune in the container, export.

Real parts only: the worker's podman builds ``dags/trainers/iris_container``, Debian's
docker-registry on loopback stands in for Artifact Registry, and the local training service runs
each trial as a container of that image, pulled from the registry.
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from airflow_aip.local.executor.containers import ContainerEngine
from tests.fixtures.containers import BASE, untag
from tests.fixtures.local_service import LocalService

pytestmark = pytest.mark.dags


def _states(run: Any) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in run.get_task_instances()}


def _xcom(run: Any, task_id: str) -> Any:
    (ti,) = [ti for ti in run.get_task_instances() if ti.task_id == task_id]
    return ti.xcom_pull(task_ids=task_id)


def _tags(registry: str, repository: str) -> list[str]:
    path = repository.removeprefix(f"{registry}/")
    url = f"http://{registry.replace('localhost', '127.0.0.1')}/v2/{path}/tags/list"
    with urllib.request.urlopen(url) as answer:
        return list(json.load(answer)["tags"])


def test_container_pipeline_builds_pushes_tunes_and_exports_on_both_backends(
    dags: dict[str, Any],
    demo_bucket: Any,
    airflow_db: Path,
    local_env: LocalService,
    container_engine: ContainerEngine,
    base_image: str,
    local_registry: str,
) -> None:
    repository = f"{local_registry}/aip-tests-{uuid.uuid4().hex[:8]}/iris-trainer"
    conf = {"bucket": demo_bucket.name, "image_repository": repository, "base_image": BASE, "max_trials": 3}
    dag = dags["aip_container_pipeline"]
    first = dag.test(run_conf={**conf, "backend": "vertex"})
    expected = dict.fromkeys(["prepare_data", "build_image", "tune", "export_best_model"], "success")
    assert _states(first) == expected
    image = _xcom(first, "build_image")
    assert image.startswith(f"{repository}:ctx-")
    assert _tags(local_registry, repository) == [image.rsplit(":", 1)[1]]

    # The worker forgets the image: the next run finds it in the registry (nothing built or
    # pushed), and the training service pulls it from there, here for an ml v1 job.
    untag(container_engine, image)
    second = dag.test(run_conf={**conf, "backend": "ai_platform", "max_trials": 2})
    assert _states(second) == expected
    assert _xcom(second, "build_image") == image
    built_here = container_engine._run("image", "inspect", image, timeout=60).returncode == 0
    untag(container_engine, image)
    assert built_here  # pulled by the service, which shares the worker's engine store here

    exported = demo_bucket.list_blobs(prefix="models/iris-container/")
    manifests = [b for b in exported if b.name.endswith("manifest.json")]
    assert len(manifests) == 2
    for blob in manifests:
        manifest = json.loads(blob.download_as_bytes())
        names = {o["name"] for o in manifest["objects"]}
        assert {n.rsplit("/", 1)[-1] for n in names} == {"model.json", "metrics.json"}
        assert manifest["hyperparameters"].keys() == {"learning_rate", "epochs"}
        assert 0 < manifest["metric"]["value"] <= 1
    assert {json.loads(b.download_as_bytes())["backend"] for b in manifests} == {"vertex", "ai_platform"}

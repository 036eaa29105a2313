"""A package pool rewritten to run in its pre-built image, and when it is not (no engine, ``never``).

The rewritten pool is a container pool whose command is the image entrypoint's: pip-install the
pool's own packages from the bound directory, then ``python -m <module> <args>``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from airflow_aip.local.executor.containers import ContainerEngine
from airflow_aip.local.executor.plans import PoolPlan, ml_plan, vertex_plan
from airflow_aip.local.executor.prebuilt import (
    PACKAGES_MOUNT,
    PrebuiltImages,
    choose_paths,
    entrypoint,
    in_image,
)

IMAGE = "us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest"


def test_a_package_pool_becomes_a_container_pool_of_its_image(tmp_path: Path) -> None:
    packages = tmp_path / "packages"
    own = packages / "1" / "trainer-0.1.tar.gz"
    pool = PoolPlan(
        "workerpool1",
        "worker",
        "workerpool1-",
        2,
        "trainer.task",
        ("--epochs=1",),
        package_uris=("gs://b/trainer-0.1.tar.gz",),
        executor_image=IMAGE,
    )
    other = packages / "0" / "other.tar.gz"
    downloaded = {"gs://b/other.tar.gz": other, "gs://b/trainer-0.1.tar.gz": own}
    ran = in_image(pool, downloaded, packages)
    assert (ran.image_uri, ran.args) == (IMAGE, ("trainer.task", "--epochs=1"))
    assert ran.mounts == ((str(packages), f"{PACKAGES_MOUNT}:ro"),)
    assert f"{PACKAGES_MOUNT}/1/trainer-0.1.tar.gz" in ran.command[2]
    assert "other.tar.gz" not in ran.command[2]  # only the pool's own packages


def test_the_entrypoint_installs_then_runs_the_module_with_its_arguments(tmp_path: Path) -> None:
    """Run by sh with a stand-in ``python3`` that records its arguments: the order Vertex's image keeps."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python3").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/calls\n')
    (fake / "python3").chmod(0o755)
    command = entrypoint(["/opt/aip-local/packages/0/t 1.tar.gz"])
    env = {"PATH": f"{fake}:/usr/bin:/bin"}
    subprocess.run([*command, "t.task", "--a=1", "--job-dir", "gs://b/o"], env=env, check=True)
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls == [
        "-m pip install --user --quiet --no-warn-script-location /opt/aip-local/packages/0/t 1.tar.gz",
        "-m t.task --a=1 --job-dir gs://b/o",
    ]


def test_without_an_engine_or_with_never_no_image_is_chosen() -> None:
    assert PrebuiltImages(None, "pull").choose(IMAGE).why == (
        "the service has no container engine (--container-engine)"
    )
    engine = ContainerEngine(sys.executable, "0")  # never asked: ``never`` and --offline decide first
    never = PrebuiltImages(engine, "never").choose(IMAGE)
    assert (never.in_image, never.why) == (False, "aip-local serve --prebuilt-images never")
    offline = PrebuiltImages(engine, "pull", offline=True).choose(IMAGE)
    assert (offline.in_image, offline.why) == (
        False,
        "aip-local serve --offline: pip in the image would need a package index",
    )
    with pytest.raises(ValueError, match="present, pull, never"):
        PrebuiltImages(None, "sometimes")


def test_each_package_pool_says_which_path_it_takes(tmp_path: Path) -> None:
    """A custom container stays as it is; package pools without an engine stay in their environment."""
    package = {"executorImageUri": IMAGE, "packageUris": ["gs://b/t.tar.gz"], "pythonModule": "t.task"}
    container = {"imageUri": "r/img:1"}
    record = {
        "kind": "customJobs",
        "jobId": "1",
        "location": "us-central1",
        "projectNumber": "7",
        "resource": {
            "jobSpec": {
                "workerPoolSpecs": [
                    {"machineSpec": {}, "replicaCount": "1", "pythonPackageSpec": package},
                    {"machineSpec": {}, "replicaCount": "1", "containerSpec": container},
                ]
            }
        },
    }
    plan = vertex_plan(record)
    downloaded = {"gs://b/t.tar.gz": tmp_path / "0" / "t.tar.gz"}
    same, notes = choose_paths(plan, PrebuiltImages(None), downloaded, tmp_path)
    assert same.pools == plan.pools
    assert notes == [
        f"Pool workerpool0 runs in a virtual environment, not in {IMAGE}: "
        "the service has no container engine (--container-engine)"
    ]
    ml = ml_plan(
        "p", {"jobId": "j", "trainingInput": {"packageUris": ["gs://b/t.tar.gz"], "pythonModule": "t"}}
    )
    assert choose_paths(ml, PrebuiltImages(None), downloaded, tmp_path)[1] == [
        "Pool master runs in a virtual environment: AI Platform's runtimeVersion names no image that can be "
        "run here"
    ]


def test_pull_asks_the_engine_once_per_image_and_present_never_pulls(tmp_path: Path) -> None:
    """A stand-in ``podman`` that has no image and cannot pull one records what it was asked."""
    calls = tmp_path / "calls"
    podman = tmp_path / "podman"
    podman.write_text(f'#!/bin/sh\necho "$1" >> {calls}\nexit 1\n')
    podman.chmod(0o755)
    engine = ContainerEngine(str(podman), "0")
    pulling = PrebuiltImages(engine, "pull")
    first, second = pulling.choose(IMAGE), pulling.choose(IMAGE)
    assert (first.in_image, second.in_image) == (False, False)
    assert first.why.startswith("podman could not pull it: ")
    assert second.why.startswith("its pull failed earlier in this service: ")
    assert calls.read_text().split() == ["image", "pull", "image"]  # inspect, pull; then inspect only
    calls.unlink()
    present = PrebuiltImages(engine, "present").choose(IMAGE)
    assert present.why.startswith("podman has no such image and --prebuilt-images present pulls none")
    assert calls.read_text().split() == ["image"]

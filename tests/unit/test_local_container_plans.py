"""What a custom-container job becomes before an engine runs it: pool images, the engine command line.

The rules are Google's: a Vertex ``containerSpec``'s ``command`` replaces the image's entrypoint
and its ``args`` the image's command; on ml v1 a role without its own ``imageUri`` runs the
master's. A replica's variables reach the container by name only, so no value shows in ``ps``.
"""

from __future__ import annotations

import resource
from pathlib import Path

import pytest

from airflow_aip.engines import loopback_registry, ulimits
from airflow_aip.local.executor.containers import (
    JOB_LABEL,
    STORE_LABEL,
    ContainerEngine,
    store_key,
)
from airflow_aip.local.executor.plans import ml_plan, vertex_plan
from tests.fixtures.job_records import vertex_record

PACKAGE = {
    "executorImageUri": "us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest",
    "packageUris": ["gs://b/t.tar.gz"],
    "pythonModule": "t.task",
}


def test_vertex_container_pools_carry_image_command_args_and_env() -> None:
    container = {
        "imageUri": "r/img:1",
        "command": ["python3", "-m", "t"],
        "args": ["--a"],
        "env": [{"name": "K", "value": "v"}],
    }
    plan = vertex_plan(
        vertex_record(
            {"machineSpec": {}, "replicaCount": "1", "containerSpec": container},
            {"machineSpec": {}, "replicaCount": "2", "pythonPackageSpec": PACKAGE},
        )
    )
    chief, workers = plan.pools
    assert (chief.image_uri, chief.command, chief.args, chief.env) == (
        "r/img:1",
        ("python3", "-m", "t"),
        ("--a",),
        (("K", "v"),),
    )
    assert (workers.image_uri, workers.python_module, workers.count) == ("", "t.task", 2)
    assert plan.images == ("r/img:1",)
    assert plan.package_uris == ("gs://b/t.tar.gz",)


def test_ml_v1_roles_fall_back_to_the_masters_image() -> None:
    ti = {
        "scaleTier": "CUSTOM",
        "workerCount": "2",
        "parameterServerCount": "1",
        "masterConfig": {"imageUri": "r/master:1", "containerCommand": ["run"], "containerArgs": ["--c"]},
        "parameterServerConfig": {"imageUri": "r/ps:1"},
        "args": ["--epochs=1"],
    }
    plan = ml_plan("p", {"jobId": "j", "trainingInput": ti})
    images = {pool.cluster_key: pool.image_uri for pool in plan.pools}
    assert images == {"master": "r/master:1", "worker": "r/master:1", "ps": "r/ps:1"}
    master = plan.primary
    assert (master.command, master.args) == (("run",), ("--c", "--epochs=1"))
    assert plan.images == ("r/master:1", "r/ps:1")
    assert plan.package_uris == ()


def test_run_passes_variables_by_name_and_labels_the_container(tmp_path: Path) -> None:
    engine = ContainerEngine("/usr/bin/podman", store_key(tmp_path))
    name = engine.container_name("7", "1", "workerpool0-0", "2")
    argv = engine.run_argv(
        name, "7/1", "r/img:1", ("python3", "-m", "t"), ("--a",), ["TF_CONFIG"], {"/h": "/tmp/hypertune"}
    )
    assert argv[argv.index("--entrypoint") + 1 :] == ["python3", "r/img:1", "-m", "t", "--a"]
    assert argv[argv.index("--env") + 1] == "TF_CONFIG"  # the value comes from the client's environment
    assert f"{JOB_LABEL}=7/1" in argv
    assert f"{STORE_LABEL}={store_key(tmp_path)}" in argv
    assert name == f"aip-{store_key(tmp_path)}-7-1-workerpool0-0-trial-2"


def test_without_command_the_images_entrypoint_runs_with_the_args(tmp_path: Path) -> None:
    engine = ContainerEngine("/usr/bin/docker", store_key(tmp_path))
    argv = engine.run_argv("n", "p/j", "r/img:1", (), ("report",), [], {})
    assert "--entrypoint" not in argv
    assert argv[-2:] == ["r/img:1", "report"]


def test_gpu_flags_go_before_the_image(tmp_path: Path) -> None:
    engine = ContainerEngine("/usr/bin/podman", store_key(tmp_path))
    devices = ("--device", "nvidia.com/gpu=all")
    argv = engine.run_argv("n", "p/j", "r/img:1", (), ("report",), [], {}, devices)
    at = argv.index("--device")
    assert argv[at : at + 2] == list(devices)
    assert at < argv.index("r/img:1")


def test_only_podman_binds_a_replicas_own_gcs_mount(tmp_path: Path) -> None:
    """docker's daemon would bind its own empty /gcs: writes would land on this disk, not in Cloud Storage."""
    assert ContainerEngine("/usr/bin/podman", store_key(tmp_path)).gcs_unavailable() is None
    assert "daemon" in str(ContainerEngine("/usr/bin/docker", store_key(tmp_path)).gcs_unavailable())


@pytest.mark.parametrize(
    ("image", "loopback"),
    [
        ("localhost:5000/p/trainer:1", True),
        ("127.0.0.1:5000/trainer", True),
        ("localhost/aip-base:bookworm-py3", False),  # podman's local names: never pulled
        ("us-docker.pkg.dev/p/r/trainer:1", False),
        ("localhost.example.com:5000/t:1", False),
    ],
)
def test_only_loopback_registries_are_pulled_over_plain_http(image: str, loopback: bool) -> None:
    assert loopback_registry(image) is loopback


def test_a_container_asks_for_no_more_open_files_than_the_service_has() -> None:
    """A sandbox that caps rlimits refuses a container asking for more ("error setting rlimit")."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    flags = ulimits()
    assert flags[-2:] == ["--ulimit", "nproc=1024:1024"]
    if resource.RLIM_INFINITY not in (soft, hard):
        assert flags[:2] == ["--ulimit", f"nofile={soft}:{hard}"]


def test_each_vertex_pool_keeps_its_own_packages_and_accelerators() -> None:
    """On Vertex each pool installs only its pythonPackageSpec.packageUris: no merged environment."""
    t4 = {"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 2}
    worker = dict(PACKAGE, packageUris=["gs://b/other.tar.gz"])
    plan = vertex_plan(
        vertex_record(
            {"machineSpec": t4, "replicaCount": "1", "pythonPackageSpec": PACKAGE},
            {"machineSpec": {}, "replicaCount": "2", "pythonPackageSpec": worker},
            {"machineSpec": {}, "replicaCount": "1", "pythonPackageSpec": PACKAGE},
        )
    )
    assert [p.package_uris for p in plan.pools] == [
        ("gs://b/t.tar.gz",),
        ("gs://b/other.tar.gz",),
        ("gs://b/t.tar.gz",),
    ]
    assert plan.package_sets == (("gs://b/t.tar.gz",), ("gs://b/other.tar.gz",))  # one environment each
    assert [p.accelerators for p in plan.pools] == ["2 x NVIDIA_TESLA_T4", "", ""]
    assert plan.primary.executor_image == PACKAGE["executorImageUri"]


def test_ml_roles_share_the_jobs_packages_and_name_their_own_accelerators() -> None:
    ti = {
        "scaleTier": "CUSTOM",
        "masterType": "n1-standard-4",
        "workerCount": "1",
        "packageUris": ["gs://b/t.tar.gz"],
        "pythonModule": "t.task",
        "masterConfig": {"acceleratorConfig": {"count": "1", "type": "NVIDIA_TESLA_P100"}},
    }
    plan = ml_plan("p", {"jobId": "j", "trainingInput": ti})
    assert [p.package_uris for p in plan.pools] == [("gs://b/t.tar.gz",), ("gs://b/t.tar.gz",)]
    assert [p.accelerators for p in plan.pools] == ["1 x NVIDIA_TESLA_P100", ""]
    assert plan.primary.executor_image == ""  # a runtimeVersion names no image to run

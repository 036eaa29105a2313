"""Whether a replica asking for accelerators gets this machine's GPUs, from the facts that decide it.

The facts (which NVIDIA CDI specs exist, which runtimes ``docker info`` lists, whether
``/dev/nvidia0`` exists) are passed in; nothing is patched.
"""

from __future__ import annotations

from airflow_aip.local.executor.accelerators import (
    accelerator_notes,
    container_gpus,
    process_gpus,
    replica_note,
)
from airflow_aip.local.executor.plans import PoolPlan


def test_podman_passes_the_gpus_when_an_nvidia_cdi_spec_exists() -> None:
    access = container_gpus("podman", ["/etc/cdi/nvidia.yaml"], ())
    assert access.flags == ("--device", "nvidia.com/gpu=all")
    note = replica_note("workerpool0-0", "1 x NVIDIA_TESLA_T4", access)
    assert (
        note == "workerpool0-0 asks for 1 x NVIDIA_TESLA_T4: podman passes the GPUs of /etc/cdi/nvidia.yaml"
    )


def test_podman_without_a_cdi_spec_runs_on_the_cpu_and_says_why() -> None:
    access = container_gpus("podman", [], ("nvidia",))
    assert access.flags == ()
    note = replica_note("workerpool0-1", "2 x NVIDIA_L4", access)
    assert note.startswith(
        "workerpool0-1 asks for 2 x NVIDIA_L4 and will run on the CPU: no GPU can be passed"
    )
    assert "/etc/cdi/nvidia.yaml or /var/run/cdi/nvidia.yaml" in note


def test_docker_passes_the_gpus_only_with_an_nvidia_runtime() -> None:
    assert container_gpus("docker", [], ("io.containerd.runc.v2", "nvidia", "runc")).flags == (
        "--gpus",
        "all",
    )
    without = container_gpus("docker", ["/etc/cdi/nvidia.yaml"], ("runc",))
    assert (without.flags, without.passed) == ((), False)
    assert "docker info` lists no nvidia runtime" in without.why


def test_a_process_sees_a_gpu_only_if_this_machine_has_one() -> None:
    assert process_gpus(host_gpu=True).passed
    absent = process_gpus(host_gpu=False)
    assert replica_note("Pool workerpool1", "4 x NVIDIA_TESLA_T4", absent) == (
        "Pool workerpool1 asks for 4 x NVIDIA_TESLA_T4 and will run on the CPU: "
        "this machine has no GPU (/dev/nvidia0 is absent)"
    )


def test_a_process_pool_is_noted_once_and_a_pool_without_accelerators_not_at_all() -> None:
    pools = [
        PoolPlan("workerpool0", "chief", "workerpool0-", 1, "t", accelerators="1 x NVIDIA_TESLA_T4"),
        PoolPlan("workerpool1", "worker", "workerpool1-", 3, "t"),
    ]
    notes = accelerator_notes(pools, None)
    assert len(notes) == 1
    assert notes[0].startswith("Pool workerpool0 asks for 1 x NVIDIA_TESLA_T4")

"""Whether a replica asking for accelerators gets this machine's GPUs, from the facts that decide it.

The facts (which NVIDIA CDI specs exist, which runtimes ``docker info`` lists, what ``nvidia-smi``
prints or which ``/dev/nvidiaN`` exist) are passed in; nothing is patched. This machine has no GPU:
a fake inventory at the boundary where the service discovers GPUs (``nvidia-smi``'s output, a
``/dev`` directory) stands in for one, and the ledger that assigns them runs for real.
"""

from __future__ import annotations

from pathlib import Path

from airflow_aip.local.executor.accelerators import (
    CPU_ONLY,
    NVIDIA_SMI,
    GpuAccess,
    GpuLedger,
    accelerator_notes,
    container_gpus,
    gpu_count,
    gpu_devices,
    machine_gpus,
    pool_gpu_note,
    replica_note,
    visible_devices,
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


def test_the_machine_gpus_are_what_nvidia_smi_lists_else_the_nvidia_devices(tmp_path: Path) -> None:
    asked: list[tuple[str, ...]] = []

    def smi(argv: object) -> str:
        asked.append(tuple(argv))  # type: ignore[arg-type]
        return "0\n1\n3\n"

    assert machine_gpus(smi, tmp_path) == (0, 1, 3)
    assert asked == [NVIDIA_SMI]
    for name in ("nvidia1", "nvidia0", "nvidiactl", "nvidia-uvm", "null"):
        (tmp_path / name).touch()
    assert machine_gpus(lambda argv: None, tmp_path) == (0, 1)  # no nvidia-smi: the devices
    assert machine_gpus(lambda argv: None, tmp_path / "absent") == ()
    # A service started with CUDA_VISIBLE_DEVICES shares only those GPUs (CUDA's rule: "-1" ends it).
    assert machine_gpus(smi, tmp_path, visible="3,1") == (1, 3)
    assert machine_gpus(smi, tmp_path, visible="0,-1,3") == (0,)
    assert machine_gpus(smi, tmp_path, visible="") == ()


def test_replicas_get_distinct_gpus_while_the_machine_has_them_then_share_the_least_used() -> None:
    ledger = GpuLedger((0, 1, 2, 3))
    first, second = ledger.lease(2), ledger.lease(2)
    assert (first, second) == ((0, 1), (2, 3))
    third = ledger.lease(1)  # all four held once: it shares the lowest
    assert third == (0,)
    ledger.release(second)  # a job ended: its GPUs are the least used again
    assert ledger.lease(2) == (2, 3)
    assert GpuLedger((0, 1)).lease(4) == (0, 1)  # more than the machine has: all it has
    assert GpuLedger(()).lease(1) == ()


def test_a_process_sees_exactly_its_gpus_and_a_cpu_pool_none() -> None:
    assert visible_devices((2, 3)) == {"CUDA_VISIBLE_DEVICES": "2,3", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    # CUDA: an invalid index ends the list, so nothing before it is visible: no GPU at all.
    assert visible_devices(()) == {"CUDA_VISIBLE_DEVICES": CPU_ONLY} == {"CUDA_VISIBLE_DEVICES": "-1"}


def test_a_pool_asking_more_gpus_than_the_machine_has_runs_and_the_log_says_so() -> None:
    def note(count: int, replicas: int, gpus: tuple[int, ...]) -> str:
        pool = PoolPlan("workerpool1", "worker", "workerpool1-", replicas, "t", accelerators=f"{count} x T4")
        (line,) = accelerator_notes([pool], None, gpus)
        return line

    assert note(4, 1, ()) == (
        "Pool workerpool1 asks for 4 x T4 and will run on the CPU: "
        "this machine has no GPU (nvidia-smi lists none), so its replicas see none"
    )
    assert note(4, 1, (0, 1)) == (
        "Pool workerpool1 asks for 4 x T4: this machine has 2 GPU(s): each replica sees all 2, "
        "fewer than it asks for (CUDA_VISIBLE_DEVICES)"
    )
    assert "its 3 replicas ask for 6 GPUs and this machine has 4: they share" in note(2, 3, (0, 1, 2, 3))
    assert "each replica sees 1 of this machine's 2 GPU(s) of its own" in note(1, 2, (0, 1))


def test_a_process_pool_is_noted_once_and_a_pool_without_accelerators_not_at_all() -> None:
    pools = [
        PoolPlan("workerpool0", "chief", "workerpool0-", 1, "t", accelerators="1 x NVIDIA_TESLA_T4"),
        PoolPlan("workerpool1", "worker", "workerpool1-", 3, "t"),
    ]
    notes = accelerator_notes(pools, None, (0,))
    assert len(notes) == 1
    assert notes[0].startswith("Pool workerpool0 asks for 1 x NVIDIA_TESLA_T4")


def test_a_container_gets_the_host_indices_of_its_lease_as_its_devices_and_a_cpu_pool_none() -> None:
    """The same ledger as a process's: two 2-GPU replicas on a 4-GPU machine get distinct GPUs, passed
    by their host index (inside the container they are numbered from 0, as on Vertex AI)."""
    podman = GpuAccess(("--device", "nvidia.com/gpu=all"), "podman passes the GPUs")
    docker = GpuAccess(("--gpus", "all"), "docker passes the GPUs")
    ledger = GpuLedger((0, 1, 2, 3))
    first, second = ledger.lease(gpu_count("2 x NVIDIA_TESLA_T4")), ledger.lease(2)
    assert gpu_devices(podman, first) == ["--device", "nvidia.com/gpu=0", "--device", "nvidia.com/gpu=1"]
    assert gpu_devices(podman, second) == ["--device", "nvidia.com/gpu=2", "--device", "nvidia.com/gpu=3"]
    assert gpu_devices(docker, second) == ["--gpus", '"device=2,3"']
    assert gpu_devices(docker, (1,)) == ["--gpus", '"device=1"']
    assert gpu_devices(podman, ()) == []  # a CPU pool, or a machine without a GPU
    assert gpu_devices(GpuAccess((), "no CDI spec"), (0,)) == []


def test_only_a_gpu_asks_the_ledger_for_gpus() -> None:
    assert (gpu_count("2 x NVIDIA_TESLA_T4"), gpu_count("1 x NVIDIA_L4")) == (2, 1)
    assert (gpu_count(""), gpu_count("8 x TPU_V3"), gpu_count("4 x TPU_V5_LITEPOD")) == (0, 0, 0)


def test_a_container_pool_is_noted_once_with_the_engines_means_and_a_tpu_pool_runs_on_the_cpu() -> None:
    """This machine's engine passes no GPU: the engine's means are where :func:`container_gpus` ends."""
    pool = PoolPlan("workerpool0", "chief", "workerpool0-", 2, "", accelerators="1 x NVIDIA_L4")
    why = container_gpus("docker", [], ("nvidia",)).why
    note = pool_gpu_note(pool, (0, 1), f"{why}, by index")
    assert note == (
        "Pool workerpool0 asks for 1 x NVIDIA_L4: each replica sees 1 of this machine's 2 GPU(s) of its own "
        "(docker passes the GPUs through its nvidia runtime, by index)"
    )
    tpu = PoolPlan("workerpool0", "chief", "workerpool0-", 1, "t", accelerators="8 x TPU_V3")
    assert accelerator_notes([tpu], None, (0, 1)) == [
        "Pool workerpool0 asks for 8 x TPU_V3 and will run on the CPU: this machine has no TPU"
    ]

"""A replica that asks for accelerators: this machine's GPUs if they can reach it, else the CPU, said once.

Vertex gives a replica the GPUs its pool's ``machineSpec`` names (ml v1: the role's
``acceleratorConfig``). Locally:

- a container replica gets this machine's NVIDIA GPUs when its engine can pass them: podman
  through the CDI spec the NVIDIA Container Toolkit writes (``/etc/cdi/nvidia.yaml`` or
  ``/var/run/cdi/nvidia.yaml``: ``--device nvidia.com/gpu=all``), docker through the ``nvidia``
  runtime ``docker info`` lists (``--gpus``). Each replica gets its pool's ``acceleratorCount``
  GPUs, by index, as its own Vertex AI machine numbers them: ``nvidia.com/gpu=0`` ... ``=<n-1>``
  (podman), ``--gpus "device=0,...,<n-1>"`` (docker) (:func:`gpu_devices`); a CPU pool none. Replicas
  of one job share this machine's GPUs from index 0, where each has its own on Vertex AI; one that
  asks for more than this machine has (``/dev/nvidia<N>``) gets all of them, and the log says so;
- a process replica runs on this machine as any process does: it sees its GPUs (``/dev/nvidia0``)
  if it has any, with whatever framework build its environment holds.

Otherwise the replica runs on the CPU, and the job's log says so once per replica (a process
pool: once per pool, as its replicas share the machine), with the reason. The decision
(:func:`container_gpus`, :func:`process_gpus`) takes the machine's facts as arguments;
:func:`engine_gpus` reads them, once per engine.
"""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from airflow_aip.local.executor.containers import ContainerEngine
from airflow_aip.local.executor.plans import PoolPlan

CDI_SPECS = (Path("/etc/cdi/nvidia.yaml"), Path("/var/run/cdi/nvidia.yaml"))
HOST_GPU = Path("/dev/nvidia0")


@dataclass(frozen=True)
class GpuAccess:
    """The engine's flags that pass the GPUs (empty: none can be), and what the log says."""

    flags: tuple[str, ...]
    why: str

    @property
    def passed(self) -> bool:
        return bool(self.flags)


def container_gpus(engine: str, cdi_specs: Sequence[str], runtimes: Sequence[str]) -> GpuAccess:
    """Whether ``engine`` (podman or docker) can give a container the GPUs, from the facts it rests on:
    the NVIDIA CDI specs that exist (podman) and the runtimes ``docker info`` lists (docker)."""
    if engine == "podman":
        if cdi_specs:
            return GpuAccess(("--device", "nvidia.com/gpu=all"), f"podman passes the GPUs of {cdi_specs[0]}")
        where = " or ".join(str(p) for p in CDI_SPECS)
        why = f"no GPU can be passed: podman has no NVIDIA CDI spec ({where}; nvidia-ctk writes it)"
        return GpuAccess((), why)
    if engine == "docker":
        if "nvidia" in runtimes:
            return GpuAccess(("--gpus", "all"), "docker passes the GPUs through its nvidia runtime")
        return GpuAccess(
            (),
            "no GPU can be passed: `docker info` lists no nvidia runtime (NVIDIA Container Toolkit)",
        )
    return GpuAccess((), f"no GPU can be passed: {engine} has no known way to pass one")


def accelerator_count(accelerators: str) -> int:
    """The count of a pool's ``"<count> x <type>"`` (:attr:`.plans.PoolPlan.accelerators`); 0 for none."""
    count, _, kind = accelerators.partition(" x ")
    return int(count) if kind and count.isdigit() else 0


def host_gpu_count() -> int:
    """How many NVIDIA GPUs this machine has: its ``/dev/nvidia<N>`` device nodes."""
    return sum(1 for path in HOST_GPU.parent.glob("nvidia*") if path.name[len("nvidia") :].isdigit())


def gpu_devices(access: GpuAccess, accelerators: str, host_gpus: int) -> list[str]:
    """The engine's flags giving one container replica its pool's GPUs by index, and no more
    (this machine's ``host_gpus`` at most, where it can count them).

    A TPU, or an engine that can pass none, gets none. [U] unverified: that docker takes the
    quoted ``"device=0,1"`` form for a list (its documentation's, for the CLI's CSV parsing).
    """
    count = accelerator_count(accelerators)
    count = min(count, host_gpus) if host_gpus else count
    if not access.passed or not count or "TPU" in accelerators:
        return []
    if access.flags[0] == "--device":  # podman's CDI names, one per GPU
        return [flag for index in range(count) for flag in ("--device", f"nvidia.com/gpu={index}")]
    return ["--gpus", '"device=' + ",".join(str(index) for index in range(count)) + '"']


def process_gpus(host_gpu: bool) -> GpuAccess:
    """Whether a process replica sees a GPU: it does whenever this machine has one."""
    if host_gpu:
        return GpuAccess(("host",), f"a process sees this machine's GPUs ({HOST_GPU})")
    return GpuAccess((), f"this machine has no GPU ({HOST_GPU} is absent)")


def host_gpu() -> bool:
    """Whether this machine has an NVIDIA GPU device a process could use."""
    return HOST_GPU.exists()


def _docker_runtimes(binary: str) -> tuple[str, ...]:
    try:
        done = subprocess.run(
            [binary, "info", "--format", "{{range $name, $_ := .Runtimes}}{{$name}} {{end}}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return ()
    return tuple(done.stdout.split()) if done.returncode == 0 else ()


@functools.cache
def engine_gpus(name: str, binary: str) -> GpuAccess:
    """:func:`container_gpus` on this machine's facts, read once per engine."""
    cdi = [str(p) for p in CDI_SPECS if p.exists()] if name == "podman" else []
    runtimes = _docker_runtimes(binary) if name == "docker" else ()
    return container_gpus(name, cdi, runtimes)


def replica_note(replica: str, accelerators: str, access: GpuAccess) -> str:
    """The log's line for a replica (or a process pool) that asks for ``accelerators``."""
    if access.passed:
        return f"{replica} asks for {accelerators}: {access.why}"
    return f"{replica} asks for {accelerators} and will run on the CPU: {access.why}"


def accelerator_notes(pools: Sequence[PoolPlan], engine: ContainerEngine | None) -> list[str]:
    """Once per container replica (once per process pool) that asks for accelerators: GPU or CPU."""
    notes = []
    for pool in pools:
        if not pool.accelerators:
            continue
        if not pool.image_uri or engine is None:
            notes.append(
                replica_note(f"Pool {pool.cluster_key}", pool.accelerators, process_gpus(host_gpu()))
            )
            continue
        access = engine_gpus(engine.name, engine.binary)
        notes += [replica_note(pool.task_name(i), pool.accelerators, access) for i in range(pool.count)]
        host = host_gpu_count()
        if access.passed and 0 < host < accelerator_count(pool.accelerators):
            notes.append(
                f"Pool {pool.cluster_key} asks for {pool.accelerators}; this machine has {host} GPUs: "
                "each replica gets all of them"
            )
    return notes

"""A replica that asks for accelerators: its lease of this machine's GPUs if they can reach it, else the CPU.

Vertex gives a replica the GPUs its pool's ``machineSpec`` names (ml v1: the role's
``acceleratorConfig``), on a machine of its own, numbered from 0; a CPU pool none. Locally one rule
holds for both kinds of replica: the machine-wide :class:`GpuLedger` leases each replica of a GPU
pool its ``acceleratorCount`` of this machine's GPUs (by ``nvidia-smi``'s index; the least used
first, so distinct replicas, and replicas of jobs running at once, get distinct GPUs while the
machine has them; past that they share, and a pool asking for more than the machine has gets all it
has); a service started with ``CUDA_VISIBLE_DEVICES`` (indices) leases only those. The lease is given
back when the attempt stops. What the replica is given of it:

- a process replica: ``CUDA_VISIBLE_DEVICES`` names exactly its leased indices, in ``nvidia-smi``'s
  order (``CUDA_DEVICE_ORDER=PCI_BUS_ID``), so CUDA numbers them from 0 as on Vertex AI. A CPU pool
  (a TPU pool too), and a GPU pool on a machine without one, get ``CUDA_VISIBLE_DEVICES=-1``: CUDA
  documents that an invalid index ends the list, so torch, TensorFlow and JAX see no GPU, and
  unlike an empty value no Python code can take ``-1`` for "unset" and use every GPU;
- a container replica: the same host indices as its devices (:func:`gpu_devices`), when its engine
  can pass GPUs: podman through the CDI spec the NVIDIA Container Toolkit writes
  (``/etc/cdi/nvidia.yaml`` or ``/var/run/cdi/nvidia.yaml``: ``--device nvidia.com/gpu=<index>``,
  one per GPU), docker through the ``nvidia`` runtime ``docker info`` lists (``--gpus
  "device=<index>,..."``). Inside, they are numbered from 0, as on its Vertex AI machine; it gets no
  ``CUDA_VISIBLE_DEVICES``. A CPU or TPU pool gets no device; an engine that can pass none leases
  none.

Where a pool cannot have what it asks for, it runs anyway, on what it gets (the CPU when the
machine has no GPU or the engine cannot pass one), and the job's log says so once per pool (a
container pool whose engine can pass none: once per replica). The decisions
(:func:`container_gpus`, :func:`pool_gpu_note`, :class:`GpuLedger`, :func:`gpu_devices`) take the
machine's facts as arguments; :func:`engine_gpus` and :func:`machine_gpus` read them.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from airflow_aip.local.executor.containers import ContainerEngine
from airflow_aip.local.executor.plans import PoolPlan

CDI_SPECS = (Path("/etc/cdi/nvidia.yaml"), Path("/var/run/cdi/nvidia.yaml"))


@dataclass(frozen=True)
class GpuAccess:
    """The engine's flags that pass every GPU (empty: none can be), and what the log says; a replica
    gets only its lease, in the same form (:func:`gpu_devices`)."""

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


NVIDIA_SMI = ("nvidia-smi", "--query-gpu=index", "--format=csv,noheader")
_DEVICE = re.compile(r"nvidia(\d+)")
CPU_ONLY = "-1"  # CUDA_VISIBLE_DEVICES that shows no GPU (the module's reasons)


def parse_gpu_indices(output: str) -> tuple[int, ...]:
    """The GPU indices ``nvidia-smi --query-gpu=index --format=csv,noheader`` lists, one a line."""
    return tuple(sorted({int(line.strip()) for line in output.splitlines() if line.strip().isdigit()}))


def _nvidia_smi(argv: Sequence[str]) -> str | None:
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def machine_gpus(
    run: Callable[[Sequence[str]], str | None] = _nvidia_smi,
    devices: Path = Path("/dev"),
    visible: str | None = None,
) -> tuple[int, ...]:
    """This machine's NVIDIA GPUs by index: what ``nvidia-smi`` lists (``run`` runs it: None when it
    cannot), else the ``/dev/nvidiaN`` devices, else none; only those of ``visible`` (the service's
    own ``CUDA_VISIBLE_DEVICES``, indices: a service started on some GPUs shares only those)."""
    output = run(NVIDIA_SMI)
    if output is not None:
        found = parse_gpu_indices(output)
    else:
        try:
            names = [entry.name for entry in devices.iterdir()]
        except OSError:
            names = []
        found = tuple(sorted(int(m.group(1)) for n in names if (m := _DEVICE.fullmatch(n))))
    if visible is None:
        return found
    allowed = []
    for token in (t.strip() for t in visible.split(",")):
        if not token.isdigit():  # CUDA: an invalid index (or "-1") ends the list
            break
        allowed.append(int(token))
    return tuple(gpu for gpu in found if gpu in allowed)


def gpu_count(accelerators: str) -> int:
    """GPUs per replica of a pool's ``"<count> x <type>"`` (:attr:`.plans.PoolPlan.accelerators`):
    0 for a CPU pool, and for a TPU pool (a TPU is not a GPU: it runs on the CPU here)."""
    count, _, kind = accelerators.partition(" x ")
    if not kind or "TPU" in kind or not count.strip().isdigit():
        return 0
    return int(count)


class GpuLedger:
    """Which of this machine's GPUs the running replicas hold: a lease takes the least used."""

    def __init__(self, gpus: Sequence[int]) -> None:
        self.gpus = tuple(gpus)
        self._held = dict.fromkeys(self.gpus, 0)
        self._lock = threading.Lock()

    def lease(self, count: int) -> tuple[int, ...]:
        """``count`` GPUs (all the machine has, when it has fewer), the least held first, by index."""
        with self._lock:
            chosen = sorted(self.gpus, key=lambda gpu: (self._held[gpu], gpu))[:count]
            for gpu in chosen:
                self._held[gpu] += 1
        return tuple(sorted(chosen))

    def release(self, gpus: Sequence[int]) -> None:
        with self._lock:
            for gpu in gpus:
                self._held[gpu] = max(0, self._held[gpu] - 1)


@functools.cache
def machine_ledger() -> GpuLedger:
    """The one ledger of this machine's GPUs, shared by every job of every service in this process."""
    return GpuLedger(machine_gpus(visible=os.environ.get("CUDA_VISIBLE_DEVICES")))


def visible_devices(gpus: Sequence[int]) -> dict[str, str]:
    """A process replica's CUDA variables: exactly ``gpus``, in nvidia-smi's order; none: no GPU."""
    if not gpus:
        return {"CUDA_VISIBLE_DEVICES": CPU_ONLY}
    return {"CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus)), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def gpu_devices(access: GpuAccess, gpus: Sequence[int]) -> list[str]:
    """The engine's flags giving one container replica exactly ``gpus``, the host indices it leased
    (none: a CPU pool, or an engine that can pass none). [U] unverified: that docker takes the quoted
    ``"device=0,1"`` form for a list (its documentation's, for the CLI's CSV parsing)."""
    if not access.passed or not gpus:
        return []
    if access.flags[0] == "--device":  # podman's CDI names, one per GPU
        return [flag for gpu in gpus for flag in ("--device", f"nvidia.com/gpu={gpu}")]
    return ["--gpus", '"device=' + ",".join(str(gpu) for gpu in gpus) + '"']


def pool_gpu_note(pool: PoolPlan, gpus: Sequence[int], means: str) -> str:
    """The log's line for a pool asking for accelerators, whose replicas lease from ``gpus`` (this
    machine's) and are given them by ``means`` (``CUDA_VISIBLE_DEVICES``, or the engine's flags)."""
    asked, have = gpu_count(pool.accelerators), len(gpus)
    name = f"Pool {pool.cluster_key}"
    if not asked:
        return replica_note(name, pool.accelerators, GpuAccess((), "this machine has no TPU"))
    if not have:
        why = "this machine has no GPU (nvidia-smi lists none), so its replicas see none"
        return replica_note(name, pool.accelerators, GpuAccess((), why))
    if asked > have:
        why = f"this machine has {have} GPU(s): each replica sees all {have}, fewer than it asks for"
    elif asked * pool.count > have:
        total = asked * pool.count
        why = f"its {pool.count} replicas ask for {total} GPUs and this machine has {have}: they share"
    else:
        why = f"each replica sees {asked} of this machine's {have} GPU(s) of its own"
    return replica_note(name, pool.accelerators, GpuAccess((means,), f"{why} ({means})"))


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


def accelerator_notes(
    pools: Sequence[PoolPlan], engine: ContainerEngine | None, gpus: Sequence[int] | None = None
) -> list[str]:
    """Once per pool that asks for accelerators (once per replica of a container pool whose engine
    can pass no GPU): what its replicas get. ``gpus``: this machine's (default: :func:`machine_ledger`'s,
    read only when a pool asks)."""
    notes = []
    for pool in pools:
        if not pool.accelerators:
            continue
        machine = machine_ledger().gpus if gpus is None else gpus
        if not pool.image_uri or engine is None:
            notes.append(pool_gpu_note(pool, machine, "CUDA_VISIBLE_DEVICES"))
            continue
        access = engine_gpus(engine.name, engine.binary)
        if access.passed or not gpu_count(pool.accelerators):
            notes.append(pool_gpu_note(pool, machine, f"{access.why}, by index"))
            continue
        notes += [replica_note(pool.task_name(i), pool.accelerators, access) for i in range(pool.count)]
    return notes

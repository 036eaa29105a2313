"""A replica held to its machine type's memory and vCPUs, as the machine Vertex AI gives it holds it.

Vertex AI runs each replica on a machine of its pool's ``machineSpec.machineType``: ``n4-highcpu-2``
has 2 vCPUs and 4 GB (the table: :data:`airflow_aip.jobs.vertex.hardware.MACHINES`, GB as Compute
Engine counts them, GiB). A trainer that needs more memory is killed by the kernel there, and the
job ends FAILED: "The replica workerpool0-0 ran out-of-memory and exited with a non-zero status of
9(SIGKILL)" (:meth:`.runner.AttemptOutcome.error_message`). Locally, the rule, strongest first:

1. **A container** gets the engine's limits: ``--memory`` and ``--memory-swap`` (no swap, as a
   Vertex AI machine has none [U] unverified) at the machine's memory, ``--cpus`` at its vCPUs.
2. **A process replica, where the service may create a cgroup** (root on cgroup v1, as on the
   machine this project is developed on; root on cgroup v2 with the memory controller), runs in one
   of its own under the service's cgroup: ``memory.limit_in_bytes`` / ``memory.max`` at the
   machine's memory, swap at 0, ``cpu.cfs_quota_us`` / ``cpu.max`` at its vCPUs. The kernel kills
   it as Vertex AI's would (the kernel's OOM killer, SIGKILL), and the group's ``oom_kill`` count
   says that is why it ended. Only the trainer is in the group: the ``/gcs/`` FUSE client and the
   wrappers that start the trainer are not (on Vertex AI they are not in the trainer's container).
3. **Otherwise** (no cgroup can be made: not root, cgroup v2 without delegation, a container
   without its cgroup mounted writable) a **watchdog** reads the resident memory (RSS) of the
   replica's process tree at each poll of the job (every 0.2 s) and kills the tree with SIGKILL past
   the machine's memory: the same end and the same message. It can miss a peak shorter than its
   interval (false green), and RSS counts neither the page cache nor kernel memory a cgroup counts.
   No vCPU limit is possible there: ``sched_setaffinity`` pins cores, it does not meter CPU time
   (on a 2-core machine a 4-vCPU replica would get 2 either way), so vCPUs are not enforced and the
   log says so.

   Not ``RLIMIT_AS`` / ``RLIMIT_DATA``: they bound one process's address space (or writable
   mappings), not the tree's resident memory. Reserved-but-untouched memory counts (thread stacks,
   malloc arenas, numpy's ``calloc``, a framework's up-front reservations), so a trainer well within
   its machine fails here, and what fails is a ``MemoryError`` in Python rather than the kernel's
   SIGKILL; each DataLoader worker or uv-started child would get a whole machine of its own.

Never a silent pass: each replica's peak memory is logged against its machine's when it ends
(``memory.max_usage_in_bytes`` / ``memory.peak``, or the watchdog's highest reading). Where a
machine type has more memory or vCPUs than this machine, the replica gets what this machine has,
and the log says so once per pool (a trainer that needs it fails here and passes on Vertex AI:
false red). Replicas of one job share this machine, where Vertex AI gives each its own.
``aip-local serve --machine-limits off`` runs every replica unbounded, as before (false green).
"""

from __future__ import annotations

import errno
import functools
import os
import re
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from airflow_aip.jobs.vertex.hardware import MACHINES

GIB = 1 << 30
_SAFE = re.compile(r"[^a-zA-Z0-9_.-]+")
# Join the cgroups named before "--", then become the trainer: nothing of the wrapper stays in them.
_JOIN = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'


@dataclass(frozen=True)
class MachineSize:
    """What Vertex AI's machine of this type has: its name, memory in bytes and vCPUs."""

    machine_type: str
    memory_bytes: int
    vcpus: int

    @property
    def memory(self) -> str:
        return gigabytes(self.memory_bytes)


def gigabytes(size: int) -> str:
    """``15 GB``, ``1.02 GB``: Compute Engine's GB (GiB), as the machine table counts them."""
    return f"{size / GIB:.3g} GB"


def machine_size(machine_type: str) -> MachineSize | None:
    """The size of a machine type of the table; None for a name it has not (nothing to hold to)."""
    row = MACHINES.get(machine_type)
    if row is None or not row.memory_gb:
        return None
    return MachineSize(machine_type, int(row.memory_gb * GIB), row.vcpus)


def host_cpus() -> int:
    return os.cpu_count() or 1


def host_memory() -> int:
    return int(psutil.virtual_memory().total)


def container_limits(size: MachineSize | None, cpus: int) -> list[str]:
    """The engine's ``run`` flags that hold a container to ``size`` on a machine of ``cpus`` CPUs
    (podman and docker refuse ``--cpus`` above the host's count: the replica gets what there is)."""
    if size is None:
        return []
    memory = str(size.memory_bytes)
    return [f"--memory={memory}", f"--memory-swap={memory}", f"--cpus={min(size.vcpus, cpus)}"]


@dataclass(frozen=True)
class Cgroups:
    """Where this service may make a replica's cgroup: the parent per controller, and the version."""

    version: int  # 1 or 2
    memory: Path
    cpu: Path | None  # v1: the cpu hierarchy's parent, if there is one; v2: the same as memory

    def files(self) -> dict[str, str]:
        """The interface files this version names: limit, swap, peak, events, cpu."""
        if self.version == 1:
            return {
                "limit": "memory.limit_in_bytes",
                "swap": "memory.memsw.limit_in_bytes",
                "peak": "memory.max_usage_in_bytes",
                "events": "memory.oom_control",
            }
        return {
            "limit": "memory.max",
            "swap": "memory.swap.max",
            "peak": "memory.peak",
            "events": "memory.events",
        }


def _own_groups(text: str) -> dict[str, str]:
    """``/proc/self/cgroup``: controller -> this process's group path (``""`` for v2's unified one)."""
    groups = {}
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            groups[controller] = path
    return groups


def _mounts(text: str) -> dict[str, Path]:
    """``/proc/self/mountinfo``: controller -> the mount of its hierarchy (``""``: cgroup v2's)."""
    mounts: dict[str, Path] = {}
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        fields = right.split()
        if len(fields) < 3:
            continue
        point = Path(left.split()[4])
        if fields[0] == "cgroup2":
            mounts.setdefault("", point)
        elif fields[0] == "cgroup":
            for option in fields[2].split(","):
                if option in ("memory", "cpu"):
                    mounts[option] = point
    return mounts


def _made(parent: Path) -> bool:
    """Whether this process may make (and remove) a group under ``parent``."""
    probe = parent / f"aip-local-probe-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError:
        return False
    return True


def find_cgroups(mountinfo: str, own: str) -> Cgroups | None:
    """Where replicas' groups go, from this process's mounts and groups; None where none can be made.

    cgroup v1: beside nothing, under this process's own memory (and cpu) group. cgroup v2: under the
    hierarchy's root, when it hands the memory controller down (v2 lets no group with processes in
    it hand a controller down, and the service's own group has them). Each replica's group is
    removed when it ends, so nothing of the service stays behind. [U] unverified: a systemd user
    session's delegated subtree (``systemd-run --user --scope -p MemoryMax=``) is not tried.
    """
    mounts, groups = _mounts(mountinfo), _own_groups(own)
    if "memory" in mounts and "memory" in groups:
        memory = mounts["memory"] / groups["memory"].lstrip("/")
        if not _made(memory):
            return None
        cpu = None
        if "cpu" in mounts and "cpu" in groups:
            cpu = mounts["cpu"] / groups["cpu"].lstrip("/")
            cpu = cpu if _made(cpu) else None
        return Cgroups(1, memory, cpu)
    root = mounts.get("")
    enabled = [name.lstrip("+") for name in _read(root / "cgroup.subtree_control").split()] if root else []
    if root is None or "memory" not in enabled or not _made(root):
        return None
    return Cgroups(2, root, root if "cpu" in enabled else None)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


@functools.cache
def this_machine_cgroups() -> Cgroups | None:
    """:func:`find_cgroups` for this service process, probed once."""
    return find_cgroups(_read(Path("/proc/self/mountinfo")), _read(Path("/proc/self/cgroup")))


@dataclass
class MemoryUse:
    """How a replica ended against its machine: its peak memory and whether the limit killed it."""

    size: MachineSize
    peak: int | None  # bytes; None where nothing measured it
    killed: bool = False
    how: str = ""  # "cgroup v1", "cgroup v2", "watchdog"

    def note(self, replica: str) -> str:
        """The log's line: peak against the machine's, and what held it."""
        used = gigabytes(self.peak) if self.peak is not None else "an unmeasured amount"
        verdict = "and the kernel's OOM killer ended it" if self.killed else "within it"
        return (
            f"{replica} used at most {used} of {self.size.machine_type}'s {self.size.memory} memory, "
            f"{verdict} ({self.how})"
        )


class ReplicaLimit:
    """One process replica held to its machine: a cgroup of its own where one can be made, else the
    watchdog (the module's rule). :meth:`wrap` its argv, :meth:`check` it at each poll, and
    :meth:`finish` once it ended (idempotent; removes its groups)."""

    def __init__(self, size: MachineSize, cgroups: Cgroups | None, name: str, cpus: int) -> None:
        self.size = size
        self._cgroups = cgroups
        self._groups: list[Path] = []
        self._finished = False
        self.use = MemoryUse(size, None, how="watchdog")
        if cgroups is not None:
            try:
                self._make(cgroups, f"aip-local-{_SAFE.sub('_', name)[:200]}-{uuid.uuid4().hex[:8]}", cpus)
                self.use.how = f"cgroup v{cgroups.version}"
            except OSError:
                self._remove()  # half made: the watchdog holds this replica instead
                self._cgroups = None

    def _make(self, cgroups: Cgroups, name: str, cpus: int) -> None:
        files, limit = cgroups.files(), str(self.size.memory_bytes)
        memory = cgroups.memory / name
        memory.mkdir()
        self._groups.append(memory)
        (memory / files["limit"]).write_text(limit)
        if (memory / files["swap"]).exists():  # no swap beyond the machine's memory
            (memory / files["swap"]).write_text(limit if cgroups.version == 1 else "0")
        if cgroups.cpu is None or self.size.vcpus >= cpus:
            return
        if cgroups.version == 2:
            (memory / "cpu.max").write_text(f"{self.size.vcpus * 100000} 100000")
            return
        cpu = cgroups.cpu / name
        cpu.mkdir()
        self._groups.append(cpu)
        period = int((cpu / "cpu.cfs_period_us").read_text())
        (cpu / "cpu.cfs_quota_us").write_text(str(self.size.vcpus * period))

    @property
    def groups(self) -> tuple[Path, ...]:
        """This replica's cgroups (memory, then cpu on cgroup v1); none under the watchdog."""
        return tuple(self._groups)

    @property
    def enforced_by_kernel(self) -> bool:
        return bool(self._groups)

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """``argv`` started inside this replica's groups (``argv`` itself for the watchdog)."""
        if not self._groups:
            return list(argv)
        procs = [str(group / "cgroup.procs") for group in self._groups]
        return ["sh", "-c", _JOIN, "aip-limit", *procs, "--", *argv]

    def check(self, pid: int) -> bool:
        """The watchdog's reading of the process tree led by ``pid``: True once it was killed for
        exceeding the machine's memory. A replica in a cgroup is the kernel's: always False."""
        if self._groups or self._finished:
            return False
        try:
            leader = psutil.Process(pid)
            tree = [leader, *leader.children(recursive=True)]
        except psutil.Error:
            return False
        rss = 0
        for process in tree:
            try:
                rss += int(process.memory_info().rss)
            except psutil.Error:
                continue
        self.use.peak = max(self.use.peak or 0, rss)
        if rss <= self.size.memory_bytes:
            return False
        try:
            os.killpg(pid, 9)
        except OSError:
            return False
        self.use.killed = True
        self.use.how = "watchdog, which killed it"
        return True

    def finish(self) -> MemoryUse:
        """The replica's memory use once it ended; its groups are removed."""
        if self._finished or self._cgroups is None or not self._groups:
            self._finished = True
            return self.use
        files, memory = self._cgroups.files(), self._groups[0]
        peak = _read(memory / files["peak"]).strip()
        self.use.peak = int(peak) if peak.isdigit() else None
        events = dict(line.split() for line in _read(memory / files["events"]).splitlines() if " " in line)
        self.use.killed = int(events.get("oom_kill", "0")) > 0
        self._remove()
        self._finished = True
        return self.use

    def _remove(self) -> None:
        """Remove this replica's groups: empty once its processes are reaped (a moment after)."""
        for group in reversed(self._groups):
            for _ in range(50):
                try:
                    group.rmdir()
                    break
                except OSError as exc:
                    if exc.errno != errno.EBUSY:  # gone, or not a cgroup
                        break
                    time.sleep(0.02)
        self._groups = []


def pool_notes(
    pools: Sequence[tuple[str, str, bool]], cgroups: Cgroups | None, cpus: int, memory: int
) -> list[str]:
    """The log's lines, once per pool ``(name, machine type, runs in a container)``: how its replicas
    are held to their machine, and where this machine is smaller than it."""
    notes = []
    for name, machine_type, container in pools:
        size = machine_size(machine_type)
        if size is None:
            notes.append(
                f"Pool {name}: no size is known for machine type {machine_type!r}; it runs unbounded"
            )
            continue
        what = f"Pool {name} ({machine_type}: {size.memory}, {size.vcpus} vCPUs)"
        if container:
            held = "each container gets the engine's --memory and --cpus"
        elif cgroups is not None:
            cpu = "and its vCPUs" if cgroups.cpu is not None else "(vCPUs are not held: no cpu controller)"
            held = f"each replica is held to its memory {cpu} by a cgroup v{cgroups.version} of its own"
        else:
            held = (
                "no cgroup can be made here: a watchdog kills a replica whose processes' resident memory "
                "exceeds the machine's (read every poll; vCPUs are not held)"
            )
        notes.append(f"{what}: {held}")
        if size.vcpus > cpus:
            notes.append(f"{what}: this machine has {cpus} CPUs; a replica gets at most {cpus} (slower only)")
        if size.memory_bytes > memory:
            notes.append(
                f"{what}: this machine has {gigabytes(memory)}; a trainer that needs more fails here "
                "and passes on Vertex AI"
            )
    return notes

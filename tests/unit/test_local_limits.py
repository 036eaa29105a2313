"""A replica held to its machine type's memory and vCPUs: the engine's flags, this machine's cgroups,
the watchdog, and the words a replica killed for its memory ends with.

The kernel tests run real processes in a real cgroup of this machine (cgroup v1 here, as root) with a
small made-up machine, so they allocate megabytes, not a machine's gigabytes; the service's own test
(tests/integration/test_local_machine_limits.py) runs a real machine type. cgroup v2 is not mounted
with controllers on this machine: its rules are read from a directory laid out as one, which proves
the files written and read, not the kernel's answer.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from airflow_aip.local.executor.limits import (
    GIB,
    MachineSize,
    MemoryUse,
    ReplicaLimit,
    container_limits,
    find_cgroups,
    machine_size,
    pool_notes,
    this_machine_cgroups,
)
from airflow_aip.local.executor.runner import AttemptOutcome
from tests.fixtures.tools import missing

MIB = 1 << 20
ALLOCATE = "import time; held = [b'x' * (16 << 20) for _ in range({n})]; time.sleep({hold})"


def test_the_engine_gets_the_machines_memory_without_swap_and_its_vcpus() -> None:
    size = machine_size("n4-highcpu-2")
    assert size == MachineSize("n4-highcpu-2", 4 * GIB, 2)
    assert container_limits(size, 8) == ["--memory=4294967296", "--memory-swap=4294967296", "--cpus=2"]
    # More vCPUs than this machine has: the engines refuse --cpus above it, the replica gets all.
    assert container_limits(machine_size("n1-standard-4"), 2)[-1] == "--cpus=2"
    assert container_limits(machine_size("n1-standard-4"), 2)[0] == f"--memory={15 * GIB}"
    assert container_limits(None, 2) == []
    assert machine_size("standard") is None  # not a machine type: nothing to hold to


def test_the_memory_kill_ends_in_googles_words_with_the_peak() -> None:
    size = MachineSize("n4-highcpu-2", 4 * GIB, 2)
    killed = AttemptOutcome(
        -9, "workerpool0-0", "", "http://x/logs", MemoryUse(size, 4 * GIB, True, "cgroup v1")
    )
    assert killed.error_message() == (
        "The replica workerpool0-0 ran out-of-memory and exited with a non-zero status of 9(SIGKILL). "
        "Its peak memory was 4 GB, of the 4 GB of its n4-highcpu-2 machine. "
        "To find out more about why your job exited please check the logs: http://x/logs"
    )
    ml = AttemptOutcome(-9, "master-replica-0", "", "", MemoryUse(size, None, True, "watchdog"))
    assert ml.error_message() == (
        "The replica master 0 ran out-of-memory and exited with a non-zero status of 9(SIGKILL)."
    )
    within = AttemptOutcome(1, "workerpool0-0", "", "", MemoryUse(size, GIB, False, "cgroup v1"))
    assert within.error_message() == "The replica workerpool0-0 exited with a non-zero status of 1."


def _v1_mountinfo(root: Path) -> str:
    return (
        f"40 30 0:35 / {root}/memory rw,relatime - cgroup cgroup rw,memory\n"
        f"41 30 0:36 / {root}/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
    )


def test_cgroup_v1_groups_go_under_the_services_own(tmp_path: Path) -> None:
    (tmp_path / "memory" / "svc").mkdir(parents=True)
    (tmp_path / "cpu,cpuacct" / "svc").mkdir(parents=True)
    found = find_cgroups(_v1_mountinfo(tmp_path), "4:memory:/svc\n2:cpu,cpuacct:/svc\n0::/\n")
    assert found is not None
    assert (found.version, found.memory, found.cpu) == (
        1,
        tmp_path / "memory/svc",
        tmp_path / "cpu,cpuacct/svc",
    )
    assert found.files()["limit"] == "memory.limit_in_bytes"


def test_cgroup_v2_groups_get_the_memory_and_cpu_controllers(tmp_path: Path) -> None:
    (tmp_path / "cgroup.subtree_control").write_text("cpu io memory pids\n")
    found = find_cgroups(f"30 1 0:27 / {tmp_path} rw - cgroup2 cgroup2 rw\n", "0::/user.slice/x\n")
    assert found is not None
    assert (found.version, found.memory, found.cpu) == (2, tmp_path, tmp_path)
    size = MachineSize("n4-highcpu-2", 4 * GIB, 2)
    limit = ReplicaLimit(size, found, "job/workerpool0-0", 8)
    group = next(tmp_path.glob("aip-local-job_workerpool0-0-*"))
    assert (group / "memory.max").read_text() == str(4 * GIB)
    assert (group / "cpu.max").read_text() == "200000 100000"
    assert limit.wrap(["python", "-m", "t"])[-5:] == [str(group / "cgroup.procs"), "--", "python", "-m", "t"]
    (group / "memory.peak").write_text(f"{5 * GIB}\n")
    (group / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    use = limit.finish()
    assert (use.peak, use.killed, use.how) == (5 * GIB, True, "cgroup v2")


def test_no_cgroup_when_none_can_be_made(tmp_path: Path) -> None:
    assert find_cgroups("", "0::/\n") is None
    (tmp_path / "cgroup.subtree_control").write_text("cpu io pids\n")  # the memory controller not handed down
    assert find_cgroups(f"30 1 0:27 / {tmp_path} rw - cgroup2 cgroup2 rw\n", "0::/\n") is None


def _held(limit: ReplicaLimit, megabytes: int, hold: float = 0.5) -> subprocess.Popen[bytes]:
    code = ALLOCATE.format(n=megabytes // 16, hold=hold)
    return subprocess.Popen(limit.wrap([sys.executable, "-c", code]), start_new_session=True)


def _kernel_cgroups() -> None:
    if this_machine_cgroups() is None:
        missing(
            "a cgroup this service may create (root on cgroup v1, or v2 with the memory controller)",
            "run as root",
        )


def test_the_kernel_kills_a_replica_past_its_machines_memory_and_says_so() -> None:
    _kernel_cgroups()
    limit = ReplicaLimit(MachineSize("tiny", 96 * MIB, 1), this_machine_cgroups(), "test-over", 2)
    assert limit.enforced_by_kernel
    process = _held(limit, 256)
    assert process.wait(timeout=60) == -9
    use = limit.finish()
    assert use.killed
    assert use.how.startswith("cgroup v")
    assert use.peak is not None
    assert 80 * MIB <= use.peak <= 96 * MIB
    assert "and the kernel's OOM killer ended it" in use.note("workerpool0-0")


def test_a_replica_within_its_machines_memory_runs_to_its_end() -> None:
    _kernel_cgroups()
    limit = ReplicaLimit(MachineSize("small", 256 * MIB, 1), this_machine_cgroups(), "test-within", 2)
    memory = limit.groups[0]
    assert memory.name.startswith("aip-local-test-within-")
    if (memory / "memory.limit_in_bytes").exists():  # cgroup v1: the memory and the cpu hierarchies
        assert int((memory / "memory.limit_in_bytes").read_text()) == 256 * MIB
        assert len(limit.groups) == 2
        cpu = limit.groups[1]  # 1 vCPU of this machine's 2: a quota of one period per period
        assert int((cpu / "cpu.cfs_quota_us").read_text()) == int((cpu / "cpu.cfs_period_us").read_text())
    else:
        assert (memory / "memory.max").read_text().strip() == str(256 * MIB)
        assert (memory / "cpu.max").read_text().split()[0] == "100000"
    process = _held(limit, 64, hold=0)
    assert process.wait(timeout=60) == 0
    use = limit.finish()
    assert not use.killed
    assert use.peak is not None
    assert 64 * MIB <= use.peak < 256 * MIB
    assert use.note("workerpool0-0").startswith("workerpool0-0 used at most 0.")
    assert limit.finish() is use  # once: its groups are gone
    assert not memory.exists()


def test_the_watchdog_kills_a_replica_where_no_cgroup_can_be_made() -> None:
    limit = ReplicaLimit(MachineSize("tiny", 96 * MIB, 1), None, "test-watchdog", 2)
    assert not limit.enforced_by_kernel
    process = _held(limit, 256, hold=30)
    deadline = time.monotonic() + 30
    while not limit.check(process.pid):
        assert time.monotonic() < deadline
        assert process.poll() is None
        time.sleep(0.05)
    assert process.wait(timeout=30) == -9
    use = limit.finish()
    assert use.killed
    assert use.peak is not None
    assert use.peak > 96 * MIB
    assert use.how == "watchdog, which killed it"


def test_the_log_says_how_each_pool_is_held_and_where_this_machine_is_smaller() -> None:
    notes = pool_notes(
        [("workerpool0", "n1-standard-4", False), ("workerpool1", "e2-standard-4", True), ("m", "x", False)],
        None,
        2,
        8 * GIB,
    )
    assert notes[0].startswith("Pool workerpool0 (n1-standard-4: 15 GB, 4 vCPUs): no cgroup can be made")
    assert "this machine has 2 CPUs; a replica gets at most 2" in notes[1]
    assert "this machine has 8 GB; a trainer that needs more fails here" in notes[2]
    assert "each container gets the engine's --memory and --cpus" in notes[3]
    assert notes[-1] == "Pool m: no size is known for machine type 'x'; it runs unbounded"

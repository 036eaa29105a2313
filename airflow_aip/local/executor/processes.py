"""Child processes the service owns: start in their own process group, stop by PID, log every line.

Every job process (pip, a replica, a trial) runs in a new session, so stopping it stops
everything it spawned, and nothing else. The PID is recorded together with the process
start time, so after a crash a restarted service kills its own orphans and never a stranger
that happens to reuse the PID.
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

import psutil

# (stream, line): stream is "stdout" or "stderr".
LineSink = Callable[[str, str], None]
STDERR_TAIL_LINES = 100  # enough for a deep traceback (a failed job's message carries it)


def start_ticks(pid: int) -> int | None:
    """When the process started, in hundredths of a second since the epoch, or None if it is gone.

    psutil reads it from the kernel (on Linux ``/proc/<pid>/stat``'s start time over the boot
    time), so the same process always gives the same number and a reused PID another one.
    """
    try:
        return round(float(psutil.Process(pid).create_time()) * 100)
    except psutil.Error:
        return None


def kill_group(pid: int, expected_ticks: int | None, grace: float = 5.0) -> bool:
    """SIGTERM then SIGKILL the process group led by ``pid`` if it is still the process we started.

    Returns True if something was signalled. Without a start time to confirm identity, nothing is
    killed: a PID the kernel gave to another process since must never be signalled.
    """
    if expected_ticks is None or start_ticks(pid) != expected_ticks:
        return False
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if start_ticks(pid) != expected_ticks or _is_zombie(pid):
            return True
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    return True


def _is_zombie(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


class ManagedProcess:
    """One child process whose stdout/stderr lines go to ``sink`` and whose stderr tail is kept."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        sink: LineSink,
    ) -> None:
        self.argv = list(argv)
        self._tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._sink = sink
        self.popen = subprocess.Popen(
            self.argv,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self.pid = self.popen.pid
        self.ticks = start_ticks(self.pid)
        self._pumps = [
            threading.Thread(target=self._pump, args=(self.popen.stdout, "stdout"), daemon=True),
            threading.Thread(target=self._pump, args=(self.popen.stderr, "stderr"), daemon=True),
        ]
        for pump in self._pumps:
            pump.start()

    def _pump(self, stream: IO[bytes] | None, name: str) -> None:
        if stream is None:
            return
        with stream:
            for raw in iter(stream.readline, b""):
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                if name == "stderr":
                    self._tail.append(line)
                self._sink(name, line)

    def poll(self) -> int | None:
        """The exit code once exited and its output fully logged, else None."""
        code = self.popen.poll()
        if code is None:
            return None
        for pump in self._pumps:
            pump.join(timeout=5)
        return code

    def stderr_tail(self) -> str:
        return "\n".join(self._tail)

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM the process group, SIGKILL after ``grace`` seconds; reaps the child."""
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=grace)
            # The leader may be gone while its children still hold the group (and our pipes).
            # Signalled right after our own wait, the group id cannot belong to a stranger yet.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
            self.popen.wait()
        for pump in self._pumps:
            pump.join(timeout=5)

    def ref(self) -> dict[str, int]:
        """What the store records to find this process again after a crash."""
        return {"pid": self.pid, "ticks": self.ticks if self.ticks is not None else -1}


def run_to_end(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    sink: LineSink,
    should_stop: Callable[[], bool],
    poll_interval: float = 0.1,
) -> tuple[int | None, str]:
    """Run to completion; ``(exit code, stderr tail)``, or ``(None, tail)`` if stopped first."""
    process = ManagedProcess(argv, cwd=cwd, env=env, sink=sink)
    while (code := process.poll()) is None:
        if should_stop():
            process.stop()
            return None, process.stderr_tail()
        time.sleep(poll_interval)
    return code, process.stderr_tail()

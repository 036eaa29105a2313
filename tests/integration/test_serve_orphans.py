"""A SIGKILLed ``aip-local serve`` leaves no fake-gcs-server behind holding its port.

SIGKILL runs no ``finally``: before PR_SET_PDEATHSIG, the emulator lived on (found after a test
harness killed the service) and the next ``serve`` on that port failed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.local_service import process_gone
from tests.fixtures.waiting import wait_until

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's"),
]


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def _listening(port: int) -> bool:
    """Whether any socket LISTENs on ``port`` (Linux /proc/net/tcp*: state 0A).

    Not "can I bind it": the port is in the ephemeral range, and under a busy machine an
    outgoing connection may borrow it for a moment, which says nothing about an orphan.
    """
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                return True
    return False


def test_sigkill_of_serve_takes_its_emulator_along(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "airflow_aip.local.cli", "serve", "--data-dir", str(tmp_path / "data")]
    argv += ["--port", "0", "--gcs-port", "0", "--offline"]
    serve = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    emulators: list[int] = []
    try:
        assert serve.stdout is not None
        gcs_url = ""
        for line in serve.stdout:
            if line.startswith("export STORAGE_EMULATOR_HOST="):
                gcs_url = line.strip().split("=", 1)[1]
            if line.startswith("# aip-local"):
                break
        port = int(gcs_url.rsplit(":", 1)[1])
        emulators = [
            pid for pid in _children(serve.pid) if "fake-gcs" in Path(f"/proc/{pid}/cmdline").read_text()
        ]
        assert len(emulators) == 1
        assert _listening(port)

        os.kill(serve.pid, signal.SIGKILL)
        serve.wait()
        wait_until(
            lambda: process_gone(emulators[0]) and not _listening(port),
            5.0,
            "end of the orphaned emulator and its listening port",
            every=0.05,
            state=lambda: f"emulator gone: {process_gone(emulators[0])}, port listening: {_listening(port)}",
        )
        assert process_gone(emulators[0])
        assert not _listening(port)
    finally:
        for pid in emulators:  # only if the test failed: never leave our own emulator running
            if not process_gone(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        if serve.poll() is None:
            serve.kill()
            serve.wait()

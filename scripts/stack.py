"""The local stack `make demo` and `make ui` run on: `aip-local serve` and a project-local Airflow home.

Everything binds to 127.0.0.1 and is stopped by PID (its whole process group) on the way out.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from airflow_aip.local.storage.gcs import free_port

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def exit_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit, so `finally` blocks stop what was started (as Ctrl-C does)."""
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))


def airflow_env(home: Path) -> dict[str, str]:
    """An Airflow that keeps its SQLite DB, logs and config under ``home`` and parses ``dags/``."""
    return {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__AIP__POLL_INTERVAL": "2",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "NO_GCE_CHECK": "True",
    }


@contextmanager
def local_service(
    data_dir: Path, log: Path, max_running_jobs: int = 2, *, fault_admin: bool = False
) -> Iterator[dict[str, str]]:
    """Run ``aip-local serve`` (training API + fake-gcs-server); yield the variables it prints.

    ``fault_admin`` (tests only) serves ``GET /_stats`` (requests counted per API method) and
    accepts targeted faults; no fault happens unless one is asked for.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    argv = [str(BIN / "aip-local"), "serve", "--data-dir", str(data_dir)]
    argv += ["--max-running-jobs", str(max_running_jobs)]
    argv += ["--fault-admin"] if fault_admin else []
    argv += ["--port", str(free_port()), "--gcs-port", str(free_port())]
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=out, start_new_session=True, text=True)
    try:
        env = _read_exports(proc)
        _wait_for(env["CLOUDSDK_API_ENDPOINT_OVERRIDES_ML"])
        yield env
    finally:
        stop_group(proc, timeout=30)


def stop_group(proc: subprocess.Popen[str] | subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM the process's whole group (it was started in a session of its own), then SIGKILL."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _read_exports(proc: subprocess.Popen[str]) -> dict[str, str]:
    assert proc.stdout is not None
    env: dict[str, str] = {}
    for line in proc.stdout:
        if line.startswith("export "):
            key, _, value = line.removeprefix("export ").strip().partition("=")
            env[key] = value
        elif line.startswith("# aip-local"):
            return env
    raise RuntimeError(f"aip-local serve exited ({proc.wait()}) before it was ready")


def _wait_for(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def migrate(env: dict[str, str], log: Path) -> None:
    with log.open("ab") as out:
        subprocess.run(["airflow", "db", "migrate"], env=env, check=True, stdout=out, stderr=out)

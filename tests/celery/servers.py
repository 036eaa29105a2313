"""Debian's PostgreSQL and Redis as the Celery tier's own processes: loopback, own data dirs, by PID.

PostgreSQL refuses to run as root, so as root it runs as ``nobody`` (``setpriv`` execs in place:
the PID we hold is the postmaster's), with its data dir in a fresh directory that user owns.
Neither server writes anything outside its data dir: no socket file, no snapshot, no log file.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from airflow_aip.local.storage.gcs import free_port


def postgres_bin() -> Path | None:
    """The newest installed PostgreSQL's bin dir (Debian keeps it off PATH)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(p.split("/")[4]))
    return Path(found[-1]).parent if found else None


def missing() -> str | None:
    """Why the servers cannot run here, or None."""
    if postgres_bin() is None or shutil.which("redis-server") is None:
        return (
            "no PostgreSQL or redis-server: `make test` installs Debian's postgresql and redis-server as root"
        )
    return None


def _unprivileged() -> list[str]:
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] if os.geteuid() == 0 else []


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 30) -> None:
    """``sig`` to the process by PID, then SIGKILL if it has not exited within ``timeout``."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_until(ready: object, proc: subprocess.Popen[bytes], what: str, log: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited ({proc.returncode}); see {log}")
        with contextlib.suppress(Exception):
            if callable(ready) and ready():
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not ready within 60s; see {log}")
        time.sleep(0.2)


@contextlib.contextmanager
def postgres(log: Path) -> Iterator[str]:
    """A fresh cluster on 127.0.0.1 with database ``airflow``; yields its SQLAlchemy URL."""
    import psycopg2

    pg_bin = postgres_bin()
    assert pg_bin is not None
    data = Path(tempfile.mkdtemp(prefix="aip-celery-pg-"))  # not under pytest's root-only tmp dir
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        os.chown(data, nobody.pw_uid, nobody.pw_gid)
    port = free_port()
    try:
        with log.open("ab") as out:
            initdb = [str(pg_bin / "initdb"), "-D", str(data), "-U", "airflow", "--auth=trust", "--no-sync"]
            subprocess.run([*_unprivileged(), *initdb], check=True, stdout=out, stderr=out)
            settings = ["listen_addresses=127.0.0.1", f"port={port}", "unix_socket_directories="]
            settings += ["fsync=off", "synchronous_commit=off", "full_page_writes=off", "max_connections=300"]
            argv = [str(pg_bin / "postgres"), "-D", str(data)]
            for setting in settings:
                argv += ["-c", setting]
            proc = subprocess.Popen([*_unprivileged(), *argv], stdout=out, stderr=out)
        try:
            dsn = {"host": "127.0.0.1", "port": port, "user": "airflow", "dbname": "postgres"}
            _wait_until(
                lambda: psycopg2.connect(**dsn, connect_timeout=2).close() is None, proc, "postgres", log
            )
            conn = psycopg2.connect(**dsn)
            conn.autocommit = True
            with conn.cursor() as cursor:
                cursor.execute("CREATE DATABASE airflow")
            conn.close()
            yield f"postgresql+psycopg2://airflow@127.0.0.1:{port}/airflow"
        finally:
            stop(proc, signal.SIGINT)  # PostgreSQL's fast shutdown
    finally:
        shutil.rmtree(data, ignore_errors=True)


@contextlib.contextmanager
def redis(data: Path, log: Path) -> Iterator[str]:
    """redis-server on 127.0.0.1, no persistence; yields its URL (database 0)."""
    import redis as redis_client

    data.mkdir(parents=True, exist_ok=True)
    port = free_port()
    argv = ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--dir", str(data)]
    argv += ["--save", "", "--appendonly", "no", "--daemonize", "no", "--protected-mode", "yes"]
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=out)
    try:
        client = redis_client.Redis(host="127.0.0.1", port=port, socket_timeout=2)
        _wait_until(client.ping, proc, "redis-server", log)
        client.close()
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        stop(proc)

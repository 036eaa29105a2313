"""Airflow's metadata DB for `make ui` and `make demo`: a PostgreSQL cluster of the home's own.

``airflow standalone`` runs a scheduler, a dag-processor, a triggerer, an api-server and the
tasks' processes at once, and they all write to the metadata DB. On SQLite a write locks the
whole file: while the example chain's first tasks ran, a user's trigger waited out SQLite's 5 s
lock timeout and got a 500 "Database error" (issue 47, 1 fresh start in 3). Airflow supports
SQLite only for trying it out with one process writing at a time; for anything concurrent it
names PostgreSQL (or MySQL), as the e2e and Celery tiers and every deployment use.

So the home gets a cluster of Debian's PostgreSQL (``make deps``) under ``<home>/postgres``:
created once (``initdb``), started for the stack on 127.0.0.1 and a free port (no socket
file), password-protected (scram-sha-256; the password is kept in ``<home>/postgres.password``,
readable by its owner only), and stopped by PID with PostgreSQL's fast shutdown when the stack
stops. Nothing runs in between, and nothing outside the home is written. Where no PostgreSQL is
installed, or as root when the user PostgreSQL runs as (``nobody``: it refuses root) cannot
reach the home, the DB is SQLite under the home, as before, and the script says so.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from airflow_aip.local.ports import free_port
from scripts.stack import running, sqlite_url, start, stop_group

CLUSTER = "postgres"  # under the home
PASSWORD = "postgres.password"  # under the home, mode 0600
USER = "airflow"
DATABASE = "airflow"
READY_TIMEOUT = 60.0
# Beside the defaults: loopback only and no Unix socket (nothing written outside the home);
# a commit does not wait for its WAL flush (a crash of the machine may lose the last moments,
# never corrupts: fsync stays on); room for every component's connection pool.
SETTINGS = (
    "listen_addresses=127.0.0.1",
    "unix_socket_directories=",
    "synchronous_commit=off",
    "max_connections=200",
)


def postgres_bin() -> Path | None:
    """The newest installed PostgreSQL's bin dir (Debian keeps it off PATH)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(p.split("/")[4]))
    return Path(found[-1]).parent if found else None


def why_not_postgres(home: Path) -> str | None:
    """Why the home cannot have its own PostgreSQL here, or None."""
    if postgres_bin() is None:
        return "Debian's postgresql is not installed (`make deps` installs it as root)"
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody").pw_uid
        for folder in [home.resolve(), *home.resolve().parents]:
            if folder.exists():
                mode = folder.stat()
                if not (mode.st_mode & stat.S_IXOTH or mode.st_uid == nobody):
                    return f"PostgreSQL runs as nobody under root, and nobody cannot enter {folder}"
    return None


@contextmanager
def metadata_db(home: Path, log: Path, *, fresh: bool = False) -> Iterator[str]:
    """The home's PostgreSQL, running; yields Airflow's ``sql_alchemy_conn`` for it.

    ``fresh``: an empty database (the cluster and its password are kept: ``make demo``). Where
    the home can have no PostgreSQL (:func:`why_not_postgres`), SQLite under the home.
    """
    why = why_not_postgres(home)
    if why is not None:
        print(
            f"note: {why}: Airflow's metadata DB is SQLite, where a trigger may wait on a locked "
            "database while tasks run",
            file=sys.stderr,
        )
        yield sqlite_url(home)
        return
    with _cluster(home, log) as (port, password):
        _create_database(port, password, fresh)
        yield f"postgresql+psycopg2://{USER}:{password}@127.0.0.1:{port}/{DATABASE}"


def _as_postgres_user() -> list[str]:
    """PostgreSQL refuses root: as root it runs as nobody (``setpriv`` execs in place, so the PID
    held is the postmaster's)."""
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] if os.geteuid() == 0 else []


def _owned_by_postgres_user(path: Path) -> None:
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        os.chown(path, nobody.pw_uid, nobody.pw_gid)


def _init(data: Path, password_file: Path, log: Path) -> None:
    """``initdb`` once: a cluster whose superuser ``airflow`` logs in with a new password."""
    bin_dir = postgres_bin()
    assert bin_dir is not None
    shutil.rmtree(data, ignore_errors=True)  # a start that failed half-way leaves no half cluster
    data.mkdir(parents=True)
    _owned_by_postgres_user(data)
    password = secrets.token_urlsafe(24)
    with tempfile.TemporaryDirectory(prefix="aip-pg-init-") as scratch:
        pwfile = Path(scratch) / "pw"
        pwfile.write_text(password)
        pwfile.chmod(0o600)
        _owned_by_postgres_user(Path(scratch))
        _owned_by_postgres_user(pwfile)
        argv = [str(bin_dir / "initdb"), "-D", str(data), "-U", USER, "--pwfile", str(pwfile)]
        argv += ["--auth=scram-sha-256", "--encoding=UTF8", "--locale=C.UTF-8"]
        with log.open("ab") as out:  # started like the rest: a stop meanwhile ends its tree
            proc = start([*_as_postgres_user(), *argv], stdout=out, stderr=out)
        try:
            returncode = proc.wait()
        finally:
            stop_group(proc, timeout=30)
    if returncode:
        raise subprocess.CalledProcessError(returncode, argv)
    password_file.touch(mode=0o600)
    password_file.write_text(password)


@contextmanager
def _cluster(home: Path, log: Path) -> Iterator[tuple[int, str]]:
    """The home's cluster (created if need be) running on a free port; yields the port and password."""
    import psycopg2

    data, password_file = home / CLUSTER, home / PASSWORD
    if not (data / "PG_VERSION").exists() or not password_file.exists():
        print("Creating the metadata DB's PostgreSQL cluster (once) ...", flush=True)
        _init(data, password_file, log)
    password = password_file.read_text().strip()
    bin_dir = postgres_bin()
    assert bin_dir is not None
    port = free_port()
    argv = [str(bin_dir / "postgres"), "-D", str(data), "-c", f"port={port}"]
    for setting in SETTINGS:
        argv += ["-c", setting]
    with log.open("ab") as out:
        # SIGINT: PostgreSQL's fast shutdown (its postmaster ends its own processes)
        proc = start([*_as_postgres_user(), *argv], stdout=out, stderr=out, leader_signal=signal.SIGINT)
    try:
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            try:
                psycopg2.connect(**_dsn(port, password, "postgres"), connect_timeout=2).close()
                break
            except psycopg2.OperationalError:  # refused, or "the database system is starting up"
                if not running(proc) or time.monotonic() > deadline:
                    raise RuntimeError(f"PostgreSQL did not start ({data}): see {log}") from None
                time.sleep(0.1)
        yield port, password
    finally:
        stop_group(proc, timeout=30)


def _dsn(port: int, password: str, dbname: str) -> dict[str, object]:
    return {"host": "127.0.0.1", "port": port, "user": USER, "password": password, "dbname": dbname}


def _create_database(port: int, password: str, fresh: bool) -> None:
    import psycopg2

    conn = psycopg2.connect(**_dsn(port, password, "postgres"))
    conn.autocommit = True
    try:
        with conn.cursor() as cursor:
            if fresh:
                cursor.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
            cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,))
            if cursor.fetchone() is None:
                cursor.execute(f"CREATE DATABASE {DATABASE}")
    finally:
        conn.close()

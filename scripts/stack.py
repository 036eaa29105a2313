"""The local stack `make demo` and `make ui` run on: `aip-local serve` and a project-local Airflow home.

Everything binds to 127.0.0.1 and is stopped by PID on the way out: each process started here
leads a process group of its own, and a stop ends that group and every descendant of it.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

import psutil

from airflow_aip.local.ports import free_port

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def sqlite_url(home: Path) -> str:
    """The SQLite metadata DB under ``home``: where no PostgreSQL is installed (`scripts.postgres`)."""
    return f"sqlite:///{home / 'airflow.db'}"


def airflow_env(home: Path, db_url: str | None = None) -> dict[str, str]:
    """An Airflow that keeps its logs and config under ``home`` and parses ``dags/``; its
    metadata DB is ``db_url`` (`scripts.postgres.metadata_db`), else SQLite under ``home``."""
    return {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": db_url or sqlite_url(home),
        "AIRFLOW__AIP__POLL_INTERVAL": "2",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__CORE__PARALLELISM": "4",
        # A task's supervisor gives up on the api-server after 5 tries of 5 s each by default, and
        # fails the task. On 2 cores that start Airflow, train and serve at once, the api-server
        # answered later than that now and then (Airflow's own advice: raise it under load).
        "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "30",
        "NO_GCE_CHECK": "True",
    }


PORTS_FILE = "ports.json"


def port_is_free(port: int) -> bool:
    """Whether a server could listen on 127.0.0.1:``port`` now."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def kept_ports(data_dir: Path) -> tuple[int, int]:
    """The service's and Cloud Storage's ports, the same at every start on ``data_dir``.

    A local job's page is ``http://127.0.0.1:<port>/console/...``, and that URL is stored with
    the task (its "Training job" link): with a new port at each start, every stored link died
    when ``make ui`` restarted. The ports are chosen once and kept beside the service's data;
    only when one is taken by something else are both chosen anew (and the old links say so by
    failing to connect, as before).
    """
    path = data_dir / PORTS_FILE
    with suppress(OSError, ValueError, KeyError, TypeError):
        kept = json.loads(path.read_text())
        ports = (int(kept["service"]), int(kept["gcs"]))
        if all(port_is_free(port) for port in ports):
            return ports
        print(
            f"note: port {ports[0]} or {ports[1]} is taken: earlier job links will not open", file=sys.stderr
        )
    ports = (free_port(), free_port())
    data_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"service": ports[0], "gcs": ports[1]}))
    return ports


@contextmanager
def local_service(
    data_dir: Path,
    log: Path,
    max_running_jobs: int = 2,
    *,
    fault_admin: bool = False,
    capacity_admin: bool = False,
    keep_ports: bool = False,
) -> Iterator[dict[str, str]]:
    """Run ``aip-local serve`` (training API + fake-gcs-server); yield the variables it prints.

    ``fault_admin`` (tests only) serves ``GET /_stats`` (requests counted per API method) and
    accepts targeted faults; no fault happens unless one is asked for. ``capacity_admin`` (make ui,
    make demo) lets a process on this machine change the region's capacity (a Dag's
    ``local_stockout`` Param), and nothing else. ``keep_ports``: the same
    ports as the last start on ``data_dir`` (:func:`kept_ports`), else any free ones.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    argv = [str(BIN / "aip-local"), "serve", "--data-dir", str(data_dir)]
    argv += ["--max-running-jobs", str(max_running_jobs)]
    argv += ["--fault-admin"] if fault_admin else []
    argv += ["--capacity-admin"] if capacity_admin else []
    port, gcs_port = kept_ports(data_dir) if keep_ports else (free_port(), free_port())
    argv += ["--port", str(port), "--gcs-port", str(gcs_port)]
    # keep_ports (make ui): the client proxy's fixed default port, else any (stacks side by side)
    argv += [] if keep_ports else ["--proxy-port", "0"]
    with log.open("ab") as out:
        proc = start(argv, stdout=subprocess.PIPE, stderr=out, text=True)
    try:
        env = _read_exports(proc, log)
        _wait_for(env["CLOUDSDK_API_ENDPOINT_OVERRIDES_ML"])
        yield env
    finally:
        stop_group(proc, timeout=30)


def google_client_env(data_dir: Path) -> dict[str, str]:
    """What ``aip-local env`` prints for the service on ``data_dir``: Google's own clients (the
    Google provider's operators, the SDK on gRPC) in Airflow's processes then reach it."""
    argv = [str(BIN / "aip-local"), "env", "--data-dir", str(data_dir)]
    printed = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    pairs = [shlex.split(line.removeprefix("export "))[0] for line in printed.splitlines() if line]
    return dict(pair.split("=", 1) for pair in pairs)


def _read_exports(proc: subprocess.Popen[str], log: Path) -> dict[str, str]:
    assert proc.stdout is not None
    env: dict[str, str] = {}
    for line in proc.stdout:
        if line.startswith("export "):
            key, _, value = line.removeprefix("export ").strip().partition("=")
            env[key] = value
        elif line.startswith("# aip-local"):
            return env
    raise RuntimeError(f"aip-local serve stopped before it was ready: see {log}")


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


MIGRATE = ["airflow", "db", "migrate"]


def migrate(env: dict[str, str], log: Path) -> None:
    """``airflow db migrate``, started like the rest, so a stop while it runs ends it too."""
    finish_migration(start_migration(env, log))


def start_migration(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """``airflow db migrate`` in the background: it needs no service, so it runs while one starts."""
    with log.open("ab") as out:
        return start(MIGRATE, env=env, stdout=out, stderr=out)


def finish_migration(proc: subprocess.Popen[bytes]) -> None:
    """Wait for :func:`start_migration`'s process; CalledProcessError when it failed."""
    try:
        returncode = proc.wait()
    finally:
        stop_group(proc, timeout=30)
    if returncode:
        raise subprocess.CalledProcessError(returncode, MIGRATE)


def compile_sources() -> None:
    """Byte-compile this checkout's package and example DAGs where their ``.pyc`` are stale.

    ``make install`` compiles the virtualenv's packages, but this package is installed editable:
    its modules are the checkout's, and under ``PYTHONDONTWRITEBYTECODE`` (set in many CI and
    container images) every process of the stack (the service, ``airflow dags test``, each
    task) compiled them from source again, ~0.5 s a process on 2 cores. Up-to-date ones are
    only looked at (a few ms).
    """
    import compileall

    compileall.compile_dir(REPO / "airflow_aip", quiet=1)
    # the DAG files only: dags/trainers/ is a package the pipeline builds, and a __pycache__ in
    # its sources would be one more thing for the build to keep out
    compileall.compile_dir(REPO / "dags", quiet=1, maxlevels=0)
    compileall.compile_dir(REPO / "dags" / "aip_examples", quiet=1)


# What was started, and how it is stopped. A stop must end everything, every time: `make ui` is
# stopped by SIGTERM to its process group, and GNU make forwards that SIGTERM to this script, so
# the script gets it twice at once; when the second one raised in the middle of the cleanup, the
# whole `airflow standalone` group was left running (4 stops in 9). Hence: the first signal stops
# everything before anything is raised, and signals that arrive while a stop runs are deferred.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_POLL = 0.2  # seconds between looks at a process tree while it stops
_KILLED_GRACE = 10.0  # after SIGKILL: the kernel ends the process; this only bounds the wait


@dataclass
class _Started:
    """The process groups started here, and the state of the signal handling."""

    procs: list[subprocess.Popen[Any]] = field(default_factory=list)
    stopped: list[subprocess.Popen[Any]] = field(default_factory=list)
    # PID -> the signal its leader is asked to stop with first (PostgreSQL's fast shutdown)
    leader_signals: dict[int, int] = field(default_factory=dict)
    shielded: int = 0  # > 0 while a stop runs or a process is being put on the list
    deferred: int | None = None  # the signal that arrived while shielded
    notice: str = ""


_STARTED = _Started()


def exit_on_sigterm(notice: str = "") -> None:
    """On SIGTERM, SIGINT (Ctrl-C) or SIGHUP: stop everything started here, then exit.

    The handler stops first and raises after (SystemExit, or KeyboardInterrupt for SIGINT): no
    `finally` has to run before the stop happens, so no second signal can cut in before it is
    shielded. Whichever signal comes first does the whole stop; one that comes while a stop (or
    a `start`) runs waits until it is done. ``notice`` is written to stderr when a signal starts
    the stop. Call it from the main thread, first thing.
    """
    _STARTED.notice = notice
    for signum in STOP_SIGNALS:
        signal.signal(signum, _on_signal)


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    if _STARTED.shielded:
        _STARTED.deferred = _STARTED.deferred or signum
        return
    with _shielded():
        _say(_STARTED.notice)
        stop_all()
    _exit_for(signum)


def _say(text: str) -> None:
    """To stderr by ``os.write``: a signal handler may run in the middle of a print, and after
    SIGHUP the terminal may be gone (what is said then is lost, the stop goes on)."""
    with suppress(OSError):
        os.write(sys.stderr.fileno(), text.encode())


def _exit_for(signum: int) -> NoReturn:
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise SystemExit(128 + signum)


@contextmanager
def _shielded() -> Iterator[None]:
    """A stretch no stop signal interrupts: one that arrives is acted on once it ends.

    Acting on it means what the first signal does: stop everything, then exit. (When a stop was
    what ran, that is quick: what it stopped is not stopped twice.)
    """
    _STARTED.shielded += 1
    try:
        yield
    finally:
        _STARTED.shielded -= 1
    if not _STARTED.shielded and _STARTED.deferred is not None:
        signum, _STARTED.deferred = _STARTED.deferred, None
        stop_all()
        _exit_for(signum)


def start(argv: list[str], *, leader_signal: int | None = None, **popen: Any) -> subprocess.Popen[Any]:
    """``Popen`` in a session (so a process group) of its own, on the list `stop_all` stops.

    A stop signal waits until the process is on the list, so none is started and then missed.
    ``leader_signal``: a stop sends it to the leader alone first, and gives it the stop's timeout
    to end its tree itself (a server that must stop its own children: PostgreSQL); only what is
    left then gets the group's SIGTERM (and SIGKILL).
    """
    with _shielded():
        proc: subprocess.Popen[Any] = subprocess.Popen(argv, start_new_session=True, **popen)
        _STARTED.procs.append(proc)
        if leader_signal is not None:
            _STARTED.leader_signals[proc.pid] = leader_signal
    return proc


def running(proc: subprocess.Popen[Any]) -> bool:
    """Whether ``proc`` still runs, without reaping it (``Popen.poll`` would).

    While the leader is unreaped its PID, which is also its group's ID, cannot be reused, so
    `stop_group` can still find the group's members by that ID after the leader exited.
    """
    try:
        return bool(psutil.Process(proc.pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def stop_all(timeout: float = 60.0) -> None:
    """Stop every process group `start` started, the newest first (Airflow before the service
    its tasks talk to). Idempotent: what is stopped already is not stopped again."""
    with _shielded():
        for proc in reversed(_STARTED.procs):
            stop_group(proc, timeout)


def stop_group(proc: subprocess.Popen[Any], timeout: float) -> None:
    """End ``proc``, its process group and all their descendants; return when none is left.

    ``proc`` leads a group of its own (it was started in a session of its own). SIGTERM goes to
    the group; a descendant that made a group of its own (fake-gcs-server under the service, a
    task's supervisor under Airflow's scheduler) is its parent's to stop, and gets SIGTERM from
    here only once its parent is gone. Every one of them is awaited, not only the leader (when
    ``airflow standalone`` has exited, its api-server may still hold the port). Whatever is
    left after ``timeout`` seconds gets SIGKILL. Processes are found and signalled by PID
    (psutil checks a PID was not reused), never by name. Idempotent, and shielded from stop
    signals while it runs.
    """
    with _shielded():
        if any(done is proc for done in _STARTED.stopped):
            proc.poll()
            return
        # A leader reaped earlier (``Popen.poll``/``wait``) may have had its PID, the group's ID,
        # reused: then only what is left of its tree can be named, and that is nothing.
        if proc.returncode is None:
            leader_signal = _STARTED.leader_signals.get(proc.pid)
            if leader_signal is not None and running(proc):
                _stop_leader(proc, leader_signal, timeout)
            _stop_tree(proc.pid, timeout)
        _STARTED.stopped.append(proc)
        proc.poll()  # reap the leader (None if the main code is inside its wait: it reaps it then)


def _stop_leader(proc: subprocess.Popen[Any], signum: int, timeout: float) -> None:
    """``signum`` to the leader alone; wait up to ``timeout`` for it to end (unreaped)."""
    with suppress(ProcessLookupError):
        os.kill(proc.pid, signum)
    deadline = time.monotonic() + timeout
    while running(proc) and time.monotonic() < deadline:
        time.sleep(_POLL)


def _stop_tree(pgid: int, timeout: float) -> None:
    """SIGTERM, then SIGKILL after ``timeout``, until no process of the tree is left."""
    seen: dict[int, psutil.Process] = {}
    termed: set[int] = set()  # PIDs (and the group's ID) already sent SIGTERM
    deadline, killed_at = time.monotonic() + timeout, 0.0
    group_alive = True
    while True:
        group_alive = _look(pgid, seen, group_alive)
        alive = [p for p in seen.values() if _alive(p)]
        if not alive:
            return
        if time.monotonic() > deadline:  # SIGKILL to what is left, and to what forks meanwhile
            killed_at = killed_at or time.monotonic()
            if time.monotonic() > killed_at + _KILLED_GRACE:
                _say(f"still running after SIGKILL: PIDs {' '.join(str(p.pid) for p in alive)}\n")
                return
            _signal(pgid if group_alive else None, alive, signal.SIGKILL)
        else:
            # the group once; a process outside it once its parent, whose to stop it was, is gone
            orphans = [p for p in alive if p.pid not in termed and _orphaned(p, pgid, seen)]
            _signal(pgid if group_alive and pgid not in termed else None, orphans, signal.SIGTERM)
            termed.update([pgid, *(p.pid for p in orphans)])
        time.sleep(_POLL)


def _look(pgid: int, seen: dict[int, psutil.Process], group_alive: bool) -> bool:
    """Add the group's members and every descendant of what was seen to ``seen`` (one scan).

    Each look adds what was forked since; a process whose parent died is still known from an
    earlier look. Returns whether the group still has members: once it has none, its ID may be
    reused, so it is not looked for again.
    """
    children: dict[int, list[psutil.Process]] = {}
    members = []
    for p in psutil.process_iter(["ppid"]):
        children.setdefault(p.info["ppid"], []).append(p)
        if group_alive and _pgid(p) == pgid:
            members.append(p)
    todo = [*members, *(p for p in seen.values() if _alive(p))]
    while todo:
        p = todo.pop()
        seen.setdefault(p.pid, p)
        todo += [c for c in children.get(p.pid, []) if c.pid not in seen]
    return bool(members) if group_alive else False


def _pgid(p: psutil.Process) -> int | None:
    try:
        return os.getpgid(p.pid)
    except OSError:  # ended meanwhile
        return None


def _alive(p: psutil.Process) -> bool:
    """Running, and not a zombie: a zombie holds no port and ends when its parent reaps it."""
    try:
        return bool(p.is_running() and p.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _orphaned(p: psutil.Process, pgid: int, seen: dict[int, psutil.Process]) -> bool:
    """Outside the group (its SIGTERM did not reach it) with no live parent of ours to stop it."""
    if _pgid(p) in (pgid, None):
        return False
    try:
        parent = seen.get(p.ppid())
    except psutil.Error:
        return False
    return parent is None or not _alive(parent)


def _signal(pgid: int | None, procs: list[psutil.Process], signum: int) -> None:
    """``signum`` to the group ``pgid`` (if any) and to each of ``procs``, by PID."""
    if pgid is not None:
        with suppress(ProcessLookupError):
            os.killpg(pgid, signum)
    for p in procs:
        with suppress(psutil.Error):
            p.send_signal(signum)  # psutil: only if the PID still names the same process

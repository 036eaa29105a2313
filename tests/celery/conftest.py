"""The Celery tier: the example pipeline on a real CeleryExecutor, with workers that share no disk.

One stack for the tier, stopped once its last test ran (idle, it still takes CPU): Debian's
PostgreSQL (metadata DB, Celery results) and Redis (broker) as our own processes; ``airflow
scheduler``, ``dag-processor``, ``triggerer`` and ``api-server``;
two ``airflow celery worker``s, each with its own HOME, AIRFLOW_HOME (its task logs) and queue,
and its own TMPDIR on a tmpfs mounted in a mount namespace of its own: what one worker writes
there, the other worker (and this test) cannot see, as on two machines. Both also serve the
default queue, so a retry can go to either. Everything listens on 127.0.0.1 and is stopped by PID.

The region is out of A100s (``POST /_capacity``; the service runs with ``--fault-admin``, which
injects nothing unless asked), so a capacity ladder's A100 rung fails for capacity and climbs; no
other test asks for an A100. A worker a test SIGKILLed can be started again (``Worker.revive``).
"""

from __future__ import annotations

import json
import secrets
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from airflow_aip.local.ports import free_port
from scripts.stack import REPO, airflow_env, local_service, migrate, stop_group
from tests.fixtures import servers
from tests.fixtures.airflow_stack import AirflowApi, dag_bundles
from tests.fixtures.local_service import stage_trainer, storage_client
from tests.fixtures.tools import MOUNT_NAMESPACE, MOUNT_NAMESPACE_INSTALL, SERVERS_INSTALL, missing
from tests.fixtures.waiting import wait_until

QUEUES = {"worker_a": "aip_a", "worker_b": "aip_b"}  # worker -> its own queue
HEARTBEAT_TIMEOUT = 30  # seconds without a task heartbeat before the scheduler fails the try
STOCKOUTS = ["us-central1:NVIDIA_TESLA_A100"]  # what the tier's region lacks (a ladder's first rung)
DAG_IDS = ["aip_training_pipeline", "aip_celery_kill", "aip_celery_ladder_kill"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "celery: CeleryExecutor, two workers that share no disk")


@dataclass
class Worker:
    """One ``airflow celery worker``: its process and the directories no other worker sees."""

    name: str
    queue: str
    home: Path
    tmpdir: Path
    proc: subprocess.Popen[bytes]
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    log: Path | None = None
    started_at: int = 0  # the log's size when the process started: its own lines follow

    def task_log(self, dag_id: str, run_id: str, task_id: str, attempt: int = 1) -> Path:
        """Where this worker keeps a try's log (Airflow's default layout, under its own home)."""
        run = self.home / "airflow" / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}"
        return run / f"task_id={task_id}" / f"attempt={attempt}.log"

    def stop(self) -> None:
        """SIGTERM the worker's group (a warm shutdown), then SIGKILL whatever of its tree is left:
        a task process lives in a process group of its own."""
        import psutil

        with suppress(psutil.NoSuchProcess):
            tree = psutil.Process(self.proc.pid).children(recursive=True)
            stop_group(self.proc, 60)
            for process in tree:
                with suppress(psutil.NoSuchProcess):
                    process.kill()

    def kill(self) -> list[int]:
        """SIGKILL the worker and every process under it, by PID: a machine lost, nothing cleans up.

        The task supervisor puts each task in a process group of its own, so the worker's group
        alone would miss it; the tree is read from /proc first.
        """
        import psutil

        tree = [psutil.Process(self.proc.pid), *psutil.Process(self.proc.pid).children(recursive=True)]
        for process in tree:
            with suppress(psutil.NoSuchProcess):
                process.send_signal(signal.SIGKILL)
        self.proc.wait()
        return [process.pid for process in tree]

    def revive(self) -> None:
        """Start the worker again if a test killed it (same name, home, queues; a fresh tmpfs); see
        ``wait_until_ready``. The stack's cleanup stops this object's process, so the new one."""
        if self.proc.poll() is None:
            return
        assert self.log is not None
        self.started_at = self.log.stat().st_size
        self.proc = _start(self.argv, self.env, self.log)

    def wait_until_ready(self, timeout: float = 240) -> None:
        """Until the (re)started worker logs that it is ready to take tasks."""
        wait_until(self.ready, timeout, f"{self.name} ready", every=0.5, state=lambda: f"see {self.log}")

    def ready(self) -> bool:
        """Whether this start of the worker has logged that it is ready; raises if it exited."""
        assert self.log is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited ({self.proc.returncode}); see {self.log}")
        with self.log.open("rb") as out:
            out.seek(self.started_at)
            return b" ready." in out.read()


class CeleryStack(AirflowApi):
    """The running stack: Airflow's REST API (all-admins: no login), the workers, the local services."""

    def __init__(self, base_url: str, workers: dict[str, Worker], service_env: dict[str, str]) -> None:
        super().__init__(base_url)
        self.workers = workers
        self.ml_url = service_env["CLOUDSDK_API_ENDPOINT_OVERRIDES_ML"]
        self.gcs_url = service_env["STORAGE_EMULATOR_HOST"]
        self.bucket = ""
        self.package_uri = ""
        self.started_in = 0.0
        self.procs: list[subprocess.Popen[bytes]] = []

    def ran_on(self, dag_id: str, run_id: str, task_id: str, attempt: int = 1) -> list[str]:
        """The workers holding that try's log: the one that ran it (logs stay on the worker)."""
        return [
            w.name for w in self.workers.values() if w.task_log(dag_id, run_id, task_id, attempt).exists()
        ]


def capacity(ml_url: str, body: dict[str, Any]) -> dict[str, Any]:
    """``POST /_capacity`` on the local service: what its region lacks from now on."""
    found: dict[str, Any] = (
        httpx.post(f"{ml_url.rstrip('/')}/_capacity", json=body, timeout=30).raise_for_status().json()
    )
    return found


def _private_tmp_works(probe: Path) -> bool:
    """Can this user give a process a tmpfs of its own (a mount namespace)? Root can."""
    probe.mkdir(parents=True, exist_ok=True)
    argv = ["unshare", "--mount", "--propagation", "private", "--", "mount", "-t", "tmpfs", "aip", str(probe)]
    return subprocess.run(argv, capture_output=True).returncode == 0


def _start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            argv, env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _start_worker(name: str, root: Path, env: dict[str, str]) -> Worker:
    home, tmpdir = root / name / "home", root / name / "tmp"
    home.mkdir(parents=True)
    tmpdir.mkdir()
    worker_env = {
        **env,
        "HOME": str(home),
        "TMPDIR": str(tmpdir),
        "AIRFLOW_HOME": str(home / "airflow"),
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
    }
    queues = f"{QUEUES[name]},default"
    # unshare execs in place (a mount namespace needs no fork): the PID is the worker's.
    script = 'mount -t tmpfs -o mode=1777 aip-worker-tmp "$TMPDIR" && exec "$@"'
    argv = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh"]
    argv += ["airflow", "celery", "worker", "-H", f"{name}@%h", "-q", queues, "-c", "2"]
    argv += ["--without-gossip", "--without-mingle"]
    log = root / f"{name}.log"
    proc = _start(argv, worker_env, log)
    return Worker(name, QUEUES[name], home, tmpdir, proc, argv, worker_env, log)


def _wait_until_ready(stack: CeleryStack, dag_ids: list[str], root: Path) -> None:
    def ready() -> bool:
        for proc in stack.procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{proc.args!r} exited ({proc.returncode}); logs in {root}")
        return stack.ready(dag_ids) and all(worker.ready() for worker in stack.workers.values())

    wait_until(ready, 240, "the Celery stack ready", every=1, state=lambda: f"logs in {root}")


def _airflow_env(root: Path, db_url: str, broker_url: str, service_env: dict[str, str]) -> dict[str, str]:
    port = free_port()
    return {
        **airflow_env(root / "control"),
        **service_env,
        "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": db_url,
        "AIRFLOW__CELERY__BROKER_URL": broker_url,
        "AIRFLOW__CELERY__RESULT_BACKEND": "db+"
        + db_url,  # SQLAlchemy 2.1's default postgresql driver is psycopg 3: name ours
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        # Every component signs or checks the same tokens (one airflow.cfg would, on real machines).
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(16),
        "AIRFLOW__API__SECRET_KEY": secrets.token_hex(16),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT),
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "5",
        "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": dag_bundles(),
        "AIP_EXAMPLE_QUEUE_BUILD": QUEUES["worker_a"],
        "AIP_EXAMPLE_QUEUE_STAGE": QUEUES["worker_b"],
    }


@pytest.fixture(scope="package")
def celery_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CeleryStack]:
    if reason := servers.missing():
        missing("PostgreSQL and redis-server", SERVERS_INSTALL, reason)
    root = tmp_path_factory.mktemp("airflow-celery")
    if not _private_tmp_works(root / "probe"):
        missing(MOUNT_NAMESPACE, MOUNT_NAMESPACE_INSTALL, "a worker's private TMPDIR")
    started = time.monotonic()
    log = root / "stack.log"
    with ExitStack() as cleanup:
        db_url = cleanup.enter_context(servers.postgres(root / "postgres.log"))
        broker_url = cleanup.enter_context(servers.redis(root / "redis", root / "redis.log"))
        service_env = cleanup.enter_context(
            local_service(root / "aip-local", log, max_running_jobs=4, fault_admin=True)
        )
        capacity(service_env["CLOUDSDK_API_ENDPOINT_OVERRIDES_ML"], {"stockouts": STOCKOUTS})
        gcs_url = service_env["STORAGE_EMULATOR_HOST"]
        trainer = stage_trainer(gcs_url, root / "sdist")
        bucket = storage_client(gcs_url).create_bucket(f"aip-celery-{uuid.uuid4().hex[:12]}")
        env = {
            **_airflow_env(root, db_url, broker_url, service_env),
            "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT": json.dumps(
                {"conn_type": "google_cloud_platform", "extra": {"project": "celery-project"}}
            ),
            "AIP_EXAMPLE_BUCKET": bucket.name,
        }
        migrate(env, log)
        procs = [
            _start(["airflow", component], env, root / f"{component}.log")
            for component in ("api-server", "scheduler", "dag-processor", "triggerer")
        ]
        for proc in procs:
            cleanup.callback(stop_group, proc, 60)
        workers = {name: _start_worker(name, root, env) for name in QUEUES}
        for worker in workers.values():
            cleanup.callback(worker.stop)
        procs += [worker.proc for worker in workers.values()]
        stack = CeleryStack(f"http://127.0.0.1:{env['AIRFLOW__API__PORT']}", workers, service_env)
        cleanup.callback(stack.close)
        stack.bucket, stack.package_uri, stack.procs = bucket.name, trainer.package_uri, procs
        _wait_until_ready(stack, DAG_IDS, root)
        stack.started_in = time.monotonic() - started
        yield stack

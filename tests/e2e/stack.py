"""The e2e tier's Airflow, one for the whole pytest run: ``python -m tests.e2e.stack STATE``.

A real ``airflow standalone`` (scheduler, triggerer, dag-processor, api-server) on the local
training service, its metadata in a PostgreSQL of its own (SQLite where Debian's postgresql is
missing), in a temporary AIRFLOW_HOME, on 127.0.0.1 and free ports. Started by the first xdist
worker that needs it (``tests/e2e/conftest.py``), outside every worker's process tree, so any
worker's e2e modules can use it: each test works in a project of its own. It writes what the
tests need to ``STATE`` once every component is healthy and the Dags are parsed, and stops
everything it started on SIGTERM, which the pytest controller sends once the tier's last test
ran (``tests/fixtures/shared.py``). On its way out it books its CPU-seconds for the run's report.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import traceback
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import httpx
import psutil

from airflow_aip.local.ports import free_port
from scripts.stack import REPO, airflow_env, local_service, migrate, stop_group
from tests.fixtures import servers
from tests.fixtures.airflow_stack import AirflowApi, dag_bundles, login
from tests.fixtures.cpu import book_shared, tree_cpu_seconds
from tests.fixtures.local_service import stage_trainer, storage_client
from tests.fixtures.tools import SERVERS_INSTALL, missing, under_ci
from tests.fixtures.waiting import wait_until

TOKEN_SECRET = "token-marker-e2e-41d7a2"
FLAGGED_SECRET = "flagged-marker-e2e-93c0b5"
KEY_SECRET = "PRIVATE-KEY-MARKER-e2e-6f1e0d"
PROJECT = "e2e-project"
# Real logins (no all-admins shortcut), so the UI plugin's 401 and 403 can be proved: "outsider"
# has no role, hence no access to any Dag. Passwords are written before Airflow starts.
USERS = {"admin": "admin", "viewer": "viewer", "outsider": ""}
DAG_IDS = ["aip_training_pipeline", "aip_e2e_kill", "aip_e2e_secrets", "aip_e2e_tuning"]
READY_BOUND = 420  # seconds; a bound to fail on rather than hang, never a measure
# the kill test keeps five jobs running at once, the many-waits test fifty in make test-soak
MAX_RUNNING_JOBS = 50


@contextlib.contextmanager
def metadata_db(home: Path) -> Iterator[str]:
    """Airflow's metadata DB: a PostgreSQL of the stack's own, as deployments have; SQLite (with
    its lock waits under load) only where Debian's postgresql is not installed (under CI, a failure:
    tests/fixtures/tools.py)."""
    if reason := servers.missing(redis=False):
        if under_ci():
            missing("PostgreSQL", SERVERS_INSTALL, reason)
        yield f"sqlite:///{home / 'airflow.db'}"
    else:
        with servers.postgres(home / "postgres.log") as url:
            yield url


def _env(home: Path, db_url: str, port: int, service_env: dict[str, str], bucket: str) -> dict[str, str]:
    keyfile = {
        "type": "service_account",
        "project_id": PROJECT,
        "private_key": f"-----BEGIN PRIVATE KEY-----\n{KEY_SECRET}\n-----END PRIVATE KEY-----\n",
        "client_email": "trainer@e2e-project.iam.gserviceaccount.com",
    }
    connection = {
        "conn_type": "google_cloud_platform",
        "extra": {"project": PROJECT, "keyfile_dict": keyfile},
    }
    return {
        **airflow_env(home),
        **service_env,
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": db_url,
        "AIRFLOW__API__PORT": str(port),
        # Every task defers at once, the example Dags' too: this tier proves deferral and the
        # trigger in the triggerer (the first wait in the worker: tests/integration, and bench/)
        "AIRFLOW__AIP__DEFER_AFTER": "0",
        # Tasks waiting in a worker hold a slot each (the kill Dag has two for 600 s, and tests run
        # at once on the one stack): 4 slots queued the tasks resuming from a trigger behind them.
        "AIRFLOW__CORE__PARALLELISM": "8",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{u}:{r}" for u, r in USERS.items()),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": dag_bundles(),
        # The Dags never change during a run: parsed once, not again every 30 s (each pass parses
        # every file in a process of its own, CPU the tests' own tasks need on two cores).
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "600",
        "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT": json.dumps(
            {"conn_type": "google_cloud_platform", "extra": {"project": PROJECT}}
        ),
        "AIRFLOW_CONN_AIP_SECRET_CONN": json.dumps(connection),
        "AIRFLOW_VAR_AIP_API_TOKEN": TOKEN_SECRET,
        "AIP_E2E_FLAGGED_SECRET": FLAGGED_SECRET,
        "AIP_EXAMPLE_BUCKET": bucket,
    }


def serve(home: Path, publish: Path) -> None:
    """Start everything, publish the stack's state to ``publish``, run until SIGTERM."""
    log = home / "stack.log"
    with (
        metadata_db(home) as db_url,
        local_service(
            home / "aip-local", log, max_running_jobs=MAX_RUNNING_JOBS, fault_admin=True
        ) as service,
    ):
        gcs_url = service["STORAGE_EMULATOR_HOST"]
        trainer = stage_trainer(gcs_url, home / "sdist")
        bucket = storage_client(gcs_url).create_bucket(f"aip-e2e-{uuid.uuid4().hex[:12]}").name
        port = free_port()
        passwords = {user: f"{user}-{uuid.uuid4().hex[:12]}" for user in USERS}
        env = _env(home, db_url, port, service, bucket)
        migrate(env, log)
        (home / "passwords.json").write_text(json.dumps(passwords))
        with log.open("ab") as out:
            proc = subprocess.Popen(
                ["airflow", "standalone"],
                env=env,
                cwd=REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        base_url = f"http://127.0.0.1:{port}"
        try:
            _wait_until_ready(base_url, passwords["admin"], proc, log)
            state = {
                "base_url": base_url,
                "passwords": passwords,
                "home": str(home),
                "log": str(log),
                "ml_url": service["CLOUDSDK_API_ENDPOINT_OVERRIDES_ML"],
                "gcs_url": gcs_url,
                "bucket": bucket,
                "package_uri": trainer.package_uri,
            }
            publish.write_text(json.dumps(state))
            signal.pause()  # until SIGTERM (which raises SystemExit)
        finally:
            stop_group(proc, timeout=60)


def _wait_until_ready(base_url: str, password: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Every component healthy and the Dags parsed; fails if standalone exits or at the bound."""
    api: list[AirflowApi] = []

    def ready() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"airflow standalone exited ({proc.returncode}); see {log}")
        if not api:
            api.append(AirflowApi(base_url, login(base_url, "admin", password)))
        return api[0].ready(DAG_IDS)

    try:
        wait_until(
            ready,
            READY_BOUND,
            "ready airflow standalone",
            every=1,
            state=lambda: f"see {log}",
            ignoring=(httpx.HTTPError,),
        )
    finally:
        for client in api:
            client.close()


_CPU_AT_STOP: list[float] = []


def _stop(signum: int, _frame: FrameType | None) -> None:
    """Read the whole tree's CPU while it still runs (a stopped group's orphans are reaped by
    init, their CPU with them), then unwind: the ``with`` blocks stop everything."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one stop
    _CPU_AT_STOP.append(tree_cpu_seconds(psutil.Process()))
    raise SystemExit(0)


def spawn(publish: Path, pid_file: Path, log: Path) -> None:
    """Start the stack detached (``setsid --fork``: no worker's child); it writes ``pid_file`` first.

    ``-m`` from the repository puts it on this process's path alone: on Airflow's, the package's
    metadata would be found twice (its ``.egg-info`` beside the editable install's), and so its
    UI plugin (an import error on the plugins page)."""
    with log.open("ab") as out:
        subprocess.run(
            ["setsid", "--fork", sys.executable, "-m", "tests.e2e.stack", str(publish), str(pid_file)],
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            check=True,
        )


def main(argv: list[str]) -> int:
    publish, pid_file = Path(argv[0]), Path(argv[1])
    pid_file.write_text(str(os.getpid()))
    home = publish.parent / "airflow-e2e"
    home.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    signal.signal(signal.SIGTERM, _stop)
    try:
        serve(home, publish)
    except SystemExit:
        pass
    except BaseException:
        publish.write_text(json.dumps({"error": traceback.format_exc()}))
        raise
    finally:
        cpu = max([*_CPU_AT_STOP, tree_cpu_seconds(psutil.Process())])
        book_shared("tests/e2e (the tier's shared Airflow stack)", cpu, time.monotonic() - started)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""`make ui`: Airflow's UI on 127.0.0.1 with the local training service behind it.

Runs `airflow standalone` (api-server, scheduler, dag-processor and triggerer, so deferrable
waits work) against `aip-local serve`, with the example DAGs ready to trigger with parameters
and created unpaused, so the aip_prepare_data -> aip_retraining chain runs as the README says.
With ``--demo`` (``make ui DEMO=1``) it opens the last ``make demo``'s Airflow home instead,
so that run and its trials are there. With ``--google-clients`` (``make ui GOOGLE_CLIENTS=1``)
Airflow's processes also get ``aip-local env``'s variables: Google's own clients (the Google
provider's Vertex AI operators, the SDK on gRPC) in a Dag reach the service. Airflow's metadata
DB is the home's own PostgreSQL (scripts/postgres.py), started first and stopped last: on SQLite,
a trigger right after the start waited on the lock the example chain's first tasks held, and
failed (issue 47).

Stop it with Ctrl-C, or SIGTERM to its process group: the first signal stops everything
started here (each process group, every process in it and under it, awaited, SIGKILL after a
timeout: `scripts.stack.stop_group`), and the script exits only then, with the port free. A
signal that comes while it stops (make forwards SIGTERM, so it comes twice) waits for the stop.
A stop on purpose is a success: the script says it stopped and exits 0 (with 143 for SIGTERM,
make printed ``Error 143`` after every clean stop, as if something had failed).

Airflow's own output goes to ``<home>/ui.log``: on the terminal it buried the login details
under ~90 lines. What a user needs (URL, user, password) is printed once the UI answers HTTP,
as the last thing on the screen, and again on Ctrl-C.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import urllib.request
from pathlib import Path
from subprocess import Popen

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.demo import BUCKET, _create_bucket
from scripts.postgres import metadata_db
from scripts.registry import LOCAL_BASE_IMAGE, image_registry
from scripts.stack import (
    BIN,
    REPO,
    STOP_SIGNALS,
    airflow_env,
    exit_on_sigterm,
    finish_migration,
    google_client_env,
    local_service,
    port_is_free,
    running,
    start,
    start_migration,
    stop_all,
)

PORT = int(os.environ.get("AIP_UI_PORT", "8080"))
URL = f"http://127.0.0.1:{PORT}"
USER = "admin"  # airflow standalone's simple auth manager user (compose uses airflow/airflow)
READY_TIMEOUT = 300.0
REGISTRY_PORT = int(os.environ.get("AIP_UI_REGISTRY_PORT", "5000"))  # another when 5000 is taken


def main() -> int:
    """`make ui`; 0 when a SIGTERM stopped it (everything is stopped when the handler raises)."""
    exit_on_sigterm(notice="\nStopping Airflow and the local training service ...\n")
    try:
        return _serve()
    except SystemExit as stop:
        if stop.code != 128 + signal.SIGTERM:
            raise
        for signum in STOP_SIGNALS:  # all is stopped: a later signal has nothing left to do
            signal.signal(signum, signal.SIG_IGN)
        print("Stopped: Airflow and the local training service are no longer running.", flush=True)
        return 0


def _serve() -> int:
    # kept between runs: your DAG runs and their logs stay; --demo: the last `make demo`'s run.
    # AIP_UI_HOME: another home (the tests' own, so they never touch yours)
    default_home = REPO / (".airflow" if "--demo" in sys.argv[1:] else ".airflow-ui")
    home = Path(os.environ.get("AIP_UI_HOME") or default_home)
    home.mkdir(parents=True, exist_ok=True)
    log = home / "ui.log"
    passwords = home / "simple_auth_manager_passwords.json.generated"
    _require_free_port()
    print(f"Starting the local training service and Airflow (about 30 s; Airflow's output: {log}) ...")
    greeting = ""
    try:
        # The metadata DB is the home's own PostgreSQL (scripts/postgres.py: on SQLite a trigger
        # waited on the lock the example chain's first tasks held); it is migrated while the
        # service starts. The same service ports at every start: the jobs' stored links (the
        # local job pages) keep working.
        with metadata_db(home, log) as db_url:
            migration = start_migration(airflow_env(home, db_url), log)
            with (
                local_service(home / "aip-local", log, capacity_admin=True, keep_ports=True) as service_env,
                image_registry(home / "registry", REGISTRY_PORT) as registry,
            ):
                service_env = {**service_env, **example_images(registry)}
                if "--google-clients" in sys.argv[1:]:  # make ui GOOGLE_CLIENTS=1
                    service_env.update(google_client_env(home / "aip-local"))
                os.environ.update(service_env)
                _create_bucket()
                finish_migration(migration)
                env = _env(home, db_url, service_env)
                with log.open("ab") as out:
                    proc = start(["airflow", "standalone"], env=env, stdout=out, stderr=out)
                greeting = _wait_until_ready(proc, passwords, service_env, log)
                print(greeting, flush=True)
                while running(proc):  # not Popen.wait: the group's ID stays reserved until the stop
                    time.sleep(1)
                stop_all()
                print(f"airflow standalone exited with {proc.returncode}: see {log}", file=sys.stderr)
                return 1
    except KeyboardInterrupt:  # Ctrl-C: the handler has stopped everything already
        if greeting:
            print(f"\nStopped. The next `make ui` has the same login:\n{login(passwords)}", flush=True)
        return 0
    finally:
        stop_all()


def example_images(registry: str | None) -> dict[str, str]:
    """Where aip_container_pipeline pushes its image, and what it builds FROM: this machine's."""
    if registry is None:
        print("note: docker-registry is not installed (make deps): aip_container_pipeline has no registry")
        return {}
    repository = f"{registry}/aip-examples/iris-trainer"
    return {"AIP_EXAMPLE_IMAGE_REPOSITORY": repository, "AIP_EXAMPLE_BASE_IMAGE": LOCAL_BASE_IMAGE}


def _env(home: Path, db_url: str, service_env: dict[str, str]) -> dict[str, str]:
    env = {**airflow_env(home, db_url), **service_env, "AIRFLOW__API__PORT": str(PORT)}
    # Tasks reach the API server at its base URL (else localhost:8080, whatever the port).
    env["AIRFLOW__API__BASE_URL"] = URL
    env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] = f"{USER}:admin"
    env["AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT"] = (
        '{"conn_type": "google_cloud_platform", "extra": {"project": "local-project"}}'
    )
    # New Dags start unpaused here, so the example chain works as the README says: a run of
    # aip_prepare_data starts aip_retraining, which a paused Dag would not. For this local UI
    # only (not in airflow_env): a real deployment keeps Airflow's default, paused at creation,
    # and so do the tests that share airflow_env (no scheduled run sneaks in).
    env["AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION"] = "False"
    # ... and so aip_prepare_data's first task starts while `airflow standalone` still starts its
    # api-server: on a loaded machine its supervisor's 5 tries (~17 s of random exponential
    # backoff) met "connection refused" and the chain's first run failed. 10 tries: ~3 min.
    env["AIRFLOW__WORKERS__EXECUTION_API_RETRIES"] = "10"
    return env


def _require_free_port() -> None:
    """Fail at once if something listens on the port: its answers would pass for Airflow's.

    (A ``make ui`` still running in another shell, say; else Airflow's api-server would fail to
    bind while the old one answered every check.)
    """
    if not port_is_free(PORT):
        raise SystemExit(f"Port {PORT} is in use: stop what uses it, or set AIP_UI_PORT.")


def _wait_until_ready(proc: Popen[bytes], passwords: Path, service_env: dict[str, str], log: Path) -> str:
    """Once the UI answers and the password exists: the greeting (else SystemExit naming the log)."""
    deadline = time.monotonic() + READY_TIMEOUT
    while not (_answers(f"{URL}/api/v2/monitor/health") and passwords.exists()):
        if not running(proc):
            stop_all()  # the rest of its group, then reap it for the exit code
            raise SystemExit(f"airflow standalone exited with {proc.returncode}: see {log}")
        if time.monotonic() > deadline:
            raise SystemExit(f"Airflow's UI did not answer on {URL} within {READY_TIMEOUT:.0f} s: see {log}")
        time.sleep(0.5)
    return greeting(passwords, service_env["CLOUDSDK_API_ENDPOINT_OVERRIDES_ML"])


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except OSError:
        return False


def login(passwords: Path) -> str:
    """URL, user and password: the password is the one Airflow generated (kept between runs)."""
    try:
        password = json.loads(passwords.read_text()).get(USER, "?")
    except (OSError, ValueError):
        password = f"(see {passwords})"
    return f"  Airflow UI:  {URL}\n  user:        {USER}\n  password:    {password}\n"


def greeting(passwords: Path, endpoint: str) -> str:
    """The login first, then what to do."""
    aip_local = BIN / "aip-local"  # absolute: a fresh shell has no .venv/bin on PATH
    return (
        f"\n{login(passwords)}\n"
        f"  Open Dags > aip_training_pipeline > Trigger to set trials, region, bucket ('{BUCKET}' "
        "exists) and run it.\n"
        "  aip_container_pipeline builds the trainer's image, pushes it to a registry on this machine\n"
        "  and tunes it in its container (podman or docker).\n"
        "  aip_prepare_data -> aip_retraining are unpaused: trigger aip_prepare_data and a "
        "retraining run follows.\n"
        f"  Jobs on the local service: {endpoint}console/  (or, in another shell:\n"
        f"    CLOUDSDK_API_ENDPOINT_OVERRIDES_ML={endpoint} {aip_local} jobs list)\n"
        "  Ctrl-C stops everything.\n"
    )


if __name__ == "__main__":
    sys.exit(main())

"""`make ui`: Airflow's UI on 127.0.0.1 with the local training service behind it.

Runs `airflow standalone` (api-server, scheduler, dag-processor and triggerer, so deferrable
waits work) against `aip-local serve`, with the example DAGs ready to trigger with parameters.
Stop it with Ctrl-C: everything started here is stopped. With ``--demo`` (``make ui DEMO=1``)
it opens the last ``make demo``'s Airflow home instead, so that run and its trials are there.

Airflow's own output goes to ``<home>/ui.log``: on the terminal it buried the login details
under ~90 lines. What a user needs (URL, user, password) is printed once the UI answers HTTP,
as the last thing on the screen, and again on Ctrl-C.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.demo import BUCKET, _create_bucket
from scripts.stack import BIN, REPO, airflow_env, exit_on_sigterm, local_service, migrate, stop_group

PORT = int(os.environ.get("AIP_UI_PORT", "8080"))
URL = f"http://127.0.0.1:{PORT}"
USER = "admin"  # airflow standalone's simple auth manager user (compose uses airflow/airflow)
READY_TIMEOUT = 300.0


def main() -> int:
    exit_on_sigterm()
    # kept between runs: your DAG runs and their logs stay; --demo: the last `make demo`'s run
    home = REPO / (".airflow" if "--demo" in sys.argv[1:] else ".airflow-ui")
    home.mkdir(parents=True, exist_ok=True)
    log = home / "ui.log"
    print(f"Starting the local training service and Airflow (about 30 s; Airflow's output: {log}) ...")
    with local_service(home / "aip-local", log) as service_env:
        env = {**airflow_env(home), **service_env, "AIRFLOW__API__PORT": str(PORT)}
        # Tasks reach the API server at its base URL (else localhost:8080, whatever the port).
        env["AIRFLOW__API__BASE_URL"] = URL
        env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] = f"{USER}:admin"
        env["AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT"] = (
            '{"conn_type": "google_cloud_platform", "extra": {"project": "local-project"}}'
        )
        os.environ.update(service_env)
        _create_bucket()
        migrate(env, log)
        with log.open("ab") as out:
            proc = subprocess.Popen(
                ["airflow", "standalone"], env=env, start_new_session=True, stdout=out, stderr=out
            )
        passwords = home / "simple_auth_manager_passwords.json.generated"
        greeting = ""
        try:
            greeting = _wait_until_ready(proc, passwords, service_env, log)
            print(greeting, flush=True)
            return proc.wait()
        except KeyboardInterrupt:
            if greeting:
                print(f"\nStopping. The next `make ui` has the same login:\n{login(passwords)}", flush=True)
            return 0
        finally:
            stop_group(proc, timeout=60)


def _wait_until_ready(
    proc: subprocess.Popen[bytes], passwords: Path, service_env: dict[str, str], log: Path
) -> str:
    """Once the UI answers and the password exists: the greeting (else SystemExit naming the log)."""
    deadline = time.monotonic() + READY_TIMEOUT
    while not (_answers(f"{URL}/api/v2/monitor/health") and passwords.exists()):
        if proc.poll() is not None:
            raise SystemExit(f"airflow standalone exited with {proc.returncode}: see {log}")
        if time.monotonic() > deadline:
            raise SystemExit(f"Airflow's UI did not answer on {URL} within {READY_TIMEOUT:.0f} s: see {log}")
        time.sleep(1)
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
        f"  Jobs on the local service: {endpoint}console/  (or, in another shell:\n"
        f"    CLOUDSDK_API_ENDPOINT_OVERRIDES_ML={endpoint} {aip_local} jobs list)\n"
        "  Ctrl-C stops everything.\n"
    )


if __name__ == "__main__":
    sys.exit(main())

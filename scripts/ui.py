"""`make ui`: Airflow's UI on 127.0.0.1 with the local training service behind it.

Runs `airflow standalone` (api-server, scheduler, dag-processor and triggerer, so deferrable
waits work) against `aip-local serve`, with the example DAGs ready to trigger with parameters.
Stop it with Ctrl-C: everything started here is stopped. With ``--demo`` (``make ui DEMO=1``)
it opens the last ``make demo``'s Airflow home instead, so that run and its trials are there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.demo import BUCKET, _create_bucket
from scripts.stack import REPO, airflow_env, exit_on_sigterm, local_service, migrate, stop_group

PORT = int(os.environ.get("AIP_UI_PORT", "8080"))


def main() -> int:
    exit_on_sigterm()
    # kept between runs: your DAG runs and their logs stay; --demo: the last `make demo`'s run
    home = REPO / (".airflow" if "--demo" in sys.argv[1:] else ".airflow-ui")
    home.mkdir(parents=True, exist_ok=True)
    log = home / "ui.log"
    with local_service(home / "aip-local", log) as service_env:
        env = {**airflow_env(home), **service_env, "AIRFLOW__API__PORT": str(PORT)}
        env["AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT"] = (
            '{"conn_type": "google_cloud_platform", "extra": {"project": "local-project"}}'
        )
        os.environ.update(service_env)
        _create_bucket()
        migrate(env, log)
        proc = subprocess.Popen(["airflow", "standalone"], env=env, start_new_session=True)
        passwords = home / "simple_auth_manager_passwords.json.generated"
        try:
            _announce(passwords, service_env)
            return proc.wait()
        except KeyboardInterrupt:
            return 0
        finally:
            stop_group(proc, timeout=60)


def _announce(passwords: Path, service_env: dict[str, str]) -> None:
    for _ in range(120):
        if passwords.exists():
            break
        time.sleep(1)
    print(
        f"\nAirflow UI: http://127.0.0.1:{PORT}  — log in with the user and password in {passwords}\n"
        f"Trigger 'aip_training_pipeline' with 'Trigger DAG' to fill in trials, tier, region, bucket "
        f"(bucket '{BUCKET}' exists).\n"
        f"Watch jobs: CLOUDSDK_API_ENDPOINT_OVERRIDES_ML={service_env['CLOUDSDK_API_ENDPOINT_OVERRIDES_ML']} "
        "aip-local jobs list\nCtrl-C stops everything.\n",
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())

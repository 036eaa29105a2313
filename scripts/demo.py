"""`make demo`: the example pipeline end to end on the local training service.

Starts `aip-local serve` (the ml v1 API and fake-gcs-server on 127.0.0.1), runs
`aip_training_pipeline` with `airflow dags test` on a SQLite metadata DB under `.airflow/`,
prints what it produced, and stops everything it started. No cloud account, no network.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.stack import REPO, airflow_env, exit_on_sigterm, local_service, migrate

BUCKET = "aip-demo"
PROJECT = "local-project"


def main() -> int:
    exit_on_sigterm()
    home = REPO / ".airflow"
    shutil.rmtree(home, ignore_errors=True)  # a fresh run each time: the demo shows a whole pipeline
    home.mkdir(parents=True)
    log = home / "demo.log"
    started = time.monotonic()
    print(f"Starting the local training service and fake GCS (log: {log.relative_to(REPO)})")
    with local_service(home / "aip-local", log) as service_env:
        env = {**airflow_env(home), **service_env}
        os.environ.update(service_env)
        _create_bucket()
        print("Migrating the Airflow metadata DB (SQLite)")
        migrate(env, log)
        conf = {"bucket": BUCKET, "project_id": PROJECT, "max_trials": 6, "max_parallel_trials": 2}
        print(f"Running aip_training_pipeline with {json.dumps(conf)} ...")
        with log.open("ab") as out:
            done = subprocess.run(
                ["airflow", "dags", "test", "aip_training_pipeline", "-c", json.dumps(conf)],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        if done.returncode != 0 or not _report():
            print(f"The pipeline failed; the last lines of {log}:", file=sys.stderr)
            print("".join(log.read_text(errors="replace").splitlines(True)[-40:]), file=sys.stderr)
            return 1
    print(f"Done in {time.monotonic() - started:.0f} s; everything started was stopped.")
    return 0


def _create_bucket() -> None:
    from airflow_aip.hooks import StorageHook

    client = StorageHook().client
    if client.lookup_bucket(BUCKET) is None:
        client.create_bucket(BUCKET)


def _report() -> bool:
    """Print the jobs, the best trial and the exported model; False when something is missing."""
    from airflow_aip.hooks import StorageHook, TrainingJobHook
    from airflow_aip.jobs import summarize_job

    jobs = TrainingJobHook(project_id=PROJECT).list_jobs()
    storage = StorageHook()
    manifests = [o for o in storage.list(f"gs://{BUCKET}/models/iris/") if o.uri.endswith("/manifest.json")]
    if not jobs or not manifests:
        return False
    print("\nTraining jobs:")
    for job in jobs:
        s = summarize_job(job, PROJECT)
        print(f"  {s['job_id']}  {s['state']}  trials={len(s['trials'])}")
        for trial in s["trials"]:
            metric = (trial.get("finalMetric") or {}).get("objectiveValue")
            print(f"    trial {trial['trialId']}: {trial.get('hyperparameters')}  accuracy={metric}")
        if s["best_trial"]:
            best = s["best_trial"]
            print(f"  best trial: {best['trialId']} accuracy={best['finalMetric']['objectiveValue']}")
    manifest: dict[str, Any] = json.loads(storage.read_bytes(manifests[-1].uri))
    print(f"\nExported model: {manifest['model_uri']}")
    print(f"Manifest ({manifests[-1].uri}):")
    print(json.dumps({k: manifest[k] for k in ("job_id", "trial_id", "hyperparameters", "metric")}, indent=2))
    print("Objects:", ", ".join(f"{o['name']} ({o['size']} B)" for o in manifest["objects"]))
    return True


if __name__ == "__main__":
    sys.exit(main())

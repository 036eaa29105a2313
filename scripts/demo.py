"""`make demo`: the example pipeline end to end on the local training service.

Starts `aip-local serve` (Vertex AI's and the ml v1 API, and fake-gcs-server on 127.0.0.1), runs
`aip_training_pipeline` on the Vertex AI backend with `airflow dags test` on a SQLite
metadata DB under `.airflow/`,
shows its progress as it goes (tasks, the job's states, each trial with the best so far), prints
what it produced and how to open the run in Airflow's UI, and stops everything it started.
No cloud account, no network.
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
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.progress import ProgressTracker, latest_run_id, look, printer_for
from scripts.stack import REPO, airflow_env, exit_on_sigterm, local_service, migrate, stop_group

BUCKET = "aip-demo"
PROJECT = "local-project"
DAG_ID = "aip_training_pipeline"
REGION = "us-central1"


def main() -> int:
    exit_on_sigterm()
    home = REPO / ".airflow"
    shutil.rmtree(home, ignore_errors=True)  # a fresh run each time: the demo shows a whole pipeline
    home.mkdir(parents=True)
    log = home / "demo.log"
    started = time.monotonic()
    print(f"Starting the local training service and fake GCS (log: {log.relative_to(REPO)})")
    # the ports are kept: `make ui DEMO=1` serves this run's job pages where its links point
    with local_service(home / "aip-local", log, keep_ports=True) as service_env:
        env = {**airflow_env(home), **service_env}
        os.environ.update(service_env)
        # This process's hooks (progress, report) get a connection, so none of them says it found
        # none and falls back to Application Default Credentials (what it does either way here).
        os.environ["AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT"] = json.dumps(
            {"conn_type": "google_cloud_platform", "extra": {"project": PROJECT}}
        )
        _create_bucket()
        print("Migrating the Airflow metadata DB (SQLite)")
        migrate(env, log)
        conf = {"bucket": BUCKET, "project_id": PROJECT, "max_trials": 6, "max_parallel_trials": 2}
        print(f"Running {DAG_ID} with {json.dumps(conf)} ...", flush=True)
        with log.open("ab") as out:
            proc = subprocess.Popen(
                ["airflow", "dags", "test", DAG_ID, "-c", json.dumps(conf)],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            returncode = _watch(proc, home / "airflow.db")
        finally:
            stop_group(proc, timeout=30)
        if returncode != 0 or not _report():
            print(f"The pipeline failed; the last lines of {log}:", file=sys.stderr)
            print("".join(log.read_text(errors="replace").splitlines(True)[-40:]), file=sys.stderr)
            return 1
    print(f"Done in {time.monotonic() - started:.0f} s; everything started was stopped.")
    _how_to_open(home / "airflow.db")
    return 0


def _watch(proc: subprocess.Popen[bytes], db: Path) -> int:
    """Show the run's progress until ``airflow dags test`` exits; its exit code."""
    tracker, printer = ProgressTracker(), printer_for()
    try:
        while True:
            ended = proc.poll() is not None  # one last look after the exit
            printer.show(tracker.update(look(db, DAG_ID, _jobs())), tracker)
            if ended:
                return int(proc.returncode)
            time.sleep(1)
    finally:
        printer.close()


def _how_to_open(db: Path) -> None:
    run_id = latest_run_id(db, DAG_ID)
    if run_id is None:
        return
    path = f"dags/{DAG_ID}/runs/{quote(run_id, safe='')}/tasks/tune/plugin/aip-training-job"
    print(
        "\nSee this run in Airflow's UI, with its trials in the tune task's \"Training job\" tab:\n"
        "  make ui DEMO=1      (Airflow on this demo's data; Ctrl-C stops it)\n"
        f"  then open http://127.0.0.1:8080/{path}"
    )


def _jobs() -> list[dict[str, Any]]:
    """Every training job in the demo's project and region, as neutral views (with trials)."""
    from airflow_aip.hooks.vertex import VertexJobHook
    from airflow_aip.jobs.vertex.view import CUSTOM_KIND, TUNING_KIND

    hook = VertexJobHook(project_id=PROJECT, region=REGION)
    listed = [job for kind in (TUNING_KIND, CUSTOM_KIND) for job in hook.list_jobs(kind)]
    return [hook.read(str(job["name"])) for job in listed]


def _create_bucket() -> None:
    from airflow_aip.hooks import StorageHook

    client = StorageHook().client
    if client.lookup_bucket(BUCKET) is None:
        client.create_bucket(BUCKET)


def _report() -> bool:
    """Print the jobs, the best trial and the exported model; False when something is missing."""
    from airflow_aip.hooks import StorageHook
    from airflow_aip.jobs import summarize_job

    jobs = _jobs()
    storage = StorageHook()
    manifests = [o for o in storage.list(f"gs://{BUCKET}/models/iris/") if o.uri.endswith("/manifest.json")]
    if not jobs or not manifests:
        return False
    print("\nTraining jobs:")
    for job in jobs:
        s = summarize_job(job)
        print(f"  {s['job_id']}  {s['state']}  trials={len(s['trials'])}")
        print(f"    Vertex AI resource: {s['name']}")
        for trial in s["trials"]:
            metric = (trial.get("finalMetric") or {}).get("objectiveValue")
            print(f"    trial {trial['trialId']}: {trial.get('hyperparameters')}  accuracy={metric}")
        if s["best_trial"]:
            best = s["best_trial"]
            print(f"  best trial: {best['trialId']} accuracy={best['finalMetric']['objectiveValue']}")
    manifest: dict[str, Any] = json.loads(storage.read_bytes(manifests[-1].uri))
    print(f"\nExported model: {manifest['model_uri']}")
    print(f"Manifest ({manifests[-1].uri}):")
    shown = ("job_id", "backend", "resource_name", "trial_id", "hyperparameters", "metric")
    print(json.dumps({k: manifest.get(k) for k in shown}, indent=2))
    print("Objects:", ", ".join(f"{o['name']} ({o['size']} B)" for o in manifest["objects"]))
    return True


if __name__ == "__main__":
    sys.exit(main())

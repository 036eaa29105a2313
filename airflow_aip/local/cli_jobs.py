"""``aip-local jobs list|describe|logs|cancel``: a running service's jobs, over its HTTP API.

Like ``gcloud ai-platform jobs`` and ``gcloud ai custom-jobs`` with Google: a job ID that is all
digits is a Vertex AI job (custom or hyperparameter tuning, in ``--location``), any other an ml v1
job. The raw job is printed as its API holds it, but every decision about it is the model's, made
on the neutral job view (:func:`~airflow_aip.jobs.mlv1.view.view_from_ml`,
:func:`~airflow_aip.jobs.vertex.view.view_from_vertex`): whether it has ended, and which trial is
best (:func:`~airflow_aip.jobs.summary.summarize_job`). So "best" here is the trial XCom and export
name: a failed trial or a non-finite objective never wins.

Standard library HTTP only: the command must work where the ``[local]`` extra is not installed.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from airflow_aip.config import OPTIONS
from airflow_aip.jobs.mlv1.view import view_from_ml
from airflow_aip.jobs.states import JobState
from airflow_aip.jobs.summary import summarize_job
from airflow_aip.jobs.trials import best_trial_report
from airflow_aip.jobs.vertex.view import view_from_vertex
from airflow_aip.jobs.view import JobView

DEFAULT_PORT = 8765
DEFAULT_PROJECT = "local-project"
DEFAULT_LOCATION = OPTIONS["region"].default
VERTEX_KINDS = {"customJobs": "customJob", "hyperparameterTuningJobs": "hyperparameterTuningJob"}


class CliError(Exception):
    """An API error, said in one line."""


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


def add_jobs_arguments(jobs: argparse.ArgumentParser) -> None:
    """The ``jobs`` command's options and its actions (``args.action``)."""
    jobs.add_argument("--endpoint", default=_default_endpoint(), help="training API root URL")
    jobs.add_argument("--project", default=_default_project())
    jobs.add_argument(
        "--location",
        default=os.environ.get("CLOUDSDK_AI_REGION") or DEFAULT_LOCATION,
        help=f"Vertex AI location of custom and tuning jobs (default {DEFAULT_LOCATION})",
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


def run_jobs_action(args: argparse.Namespace) -> None:
    """Run ``args.action``; CliError for an API error or an unreachable service."""
    actions: dict[str, Callable[[argparse.Namespace], None]] = {
        "list": list_jobs,
        "describe": describe_job,
        "logs": print_logs,
        "cancel": cancel_job,
    }
    actions[args.action](args)


def call_api(endpoint: str, method: str, path: str, body: Any = None) -> Any:
    """One JSON call to the training API; an error answer becomes a one-line CliError."""
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
    rows: list[dict[str, Any]] = []
    token = ""
    while len(rows) < args.limit:
        query = {"pageSize": min(100, args.limit - len(rows)), "filter": args.filter, "pageToken": token}
        page = call_api(args.endpoint, "GET", f"{path}?{urlencode(query)}")
        rows += page.get(key, [])
        token = page.get("nextPageToken", "")
        if not token:
            break
    return rows


def _vertex_parent(args: argparse.Namespace) -> str:
    return f"v1/projects/{args.project}/locations/{args.location}"


def _is_vertex_id(job_id: str) -> bool:
    """Vertex AI numbers its jobs; ml v1 job IDs start with a letter."""
    return job_id.isdigit()


def list_jobs(args: argparse.Namespace) -> None:
    """One line a job, with the state as its API names it (as gcloud lists them)."""
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
    if not _is_vertex_id(args.job_id):
        return f"v1/projects/{args.project}/jobs/{args.job_id}"
    for kind in VERTEX_KINDS:
        path = f"{_vertex_parent(args)}/{kind}/{args.job_id}"
        try:
            call_api(args.endpoint, "GET", path)
        except CliError as exc:
            if "HTTP 404" in str(exc):
                continue
            raise
        return path
    raise CliError(f"HTTP 404: no Vertex AI job {args.job_id} in {_vertex_parent(args)[3:]}")


def _job_view(args: argparse.Namespace, job: dict[str, Any]) -> JobView:
    """The job as the model sees it, whichever API answered."""
    if _is_vertex_id(args.job_id):
        return view_from_vertex(job, project_id=args.project, region=args.location)
    return view_from_ml(job, args.project)


def describe_job(args: argparse.Namespace) -> None:
    """The job as YAML, then the best trial by the model's rule (the line a waiting task logs)."""
    import yaml

    job = call_api(args.endpoint, "GET", _job_path(args))
    print(yaml.safe_dump(job, sort_keys=False).rstrip())
    report = best_trial_report(summarize_job(_job_view(args, job)))
    if report:
        print(f"# {report}")


def _print_entry(entry: dict[str, Any]) -> None:
    trial = entry.get("labels", {}).get("ml.googleapis.com/trial_id")
    where = f"[trial {trial}] " if trial else ""
    task = entry["resource"]["labels"].get("task_name", "")
    print(
        f"{entry['timestamp']} {where}{task} {entry['severity']}: {entry.get('textPayload', '')}", flush=True
    )


def print_logs(args: argparse.Namespace) -> None:
    """The job's log lines, each once; with ``--follow``, until the model says the job has ended."""
    seen: set[str] = set()
    since = ""
    base = f'resource.labels.job_id="{args.job_id}"'
    if args.trial:
        base += f' AND labels."ml.googleapis.com/trial_id"="{args.trial}"'
    path = _job_path(args)
    while True:
        job = call_api(args.endpoint, "GET", path)
        token = ""
        while True:
            query = base + (f' AND timestamp>="{since}"' if since else "")
            request = {"resourceNames": [f"projects/{args.project}"], "filter": query, "pageToken": token}
            page = call_api(args.endpoint, "POST", "v2/entries:list", request)
            for entry in page.get("entries", []):
                if entry["insertId"] not in seen:
                    seen.add(entry["insertId"])
                    since = max(since, entry["timestamp"])
                    _print_entry(entry)
            token = page.get("nextPageToken", "")
            if not token:
                break
        if not args.follow or JobState.parse(_job_view(args, job)["state"]).is_terminal:
            return
        time.sleep(1.0)


def cancel_job(args: argparse.Namespace) -> None:
    call_api(args.endpoint, "POST", f"{_job_path(args)}:cancel", {})
    print(f"Cancellation of {args.job_id} requested.")

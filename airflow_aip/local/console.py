"""A page per job, ``GET /console/{resource name}``: what a job link opens on a local run.

On Google the operators' job link opens the Cloud Console; for the local service's fake
project that is a page about nothing. The service serves its own instead, at the job's
resource name under ``/console/``: ``projects/{p}/jobs/{id}`` (ml v1) or
``projects/{p or number}/locations/{loc}/customJobs/{id}`` (and ``hyperparameterTuningJobs``)
for Vertex AI. It names the job by its display name first, then shows the state in that API's
words, where it ran (strategy, machine, trainer and args: :mod:`.console_facts`), its metric, the
times, the error, the trials (hyperparameters and metric), what the job waits for (quota,
Flex-Start capacity) and the newest log lines; ``/console/`` lists the jobs, then the Model
Registry's models with their versions (ID, aliases, creation time, metric, labels). A model's
page, at its resource name ``projects/{number}/locations/{loc}/models/{id}``, lists its versions
in full. Pages fit a 1280 px window: long URIs are cut with an ellipsis, whole on hover, with a
Copy button. Plain HTML: every value is escaped; the one script copies a value on a click; a
refresh every few seconds while the job is active.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from airflow_aip.exceptions import JobNotFoundError, ValidationError
from airflow_aip.jobs import JobState
from airflow_aip.jobs.numbers import number_text
from airflow_aip.jobs.times import instant
from airflow_aip.local.console_facts import (
    display_name,
    hyperparameters_text,
    job_facts,
    labels_html,
    uri_html,
    version_metric,
)
from airflow_aip.local.executor.plans import VERTEX_KINDS
from airflow_aip.local.service import TrainingService
from airflow_aip.local.vertex.models import registry_of
from airflow_aip.local.vertex.render import JOB_STATES, TUNING_JOBS
from airflow_aip.local.vertex.service import VertexJobs

PREFIX = "/console/"
LOG_LINES = 200
REFRESH_SECONDS = 5
_KIND_TITLES = {"customJobs": "Vertex AI custom job", TUNING_JOBS: "Vertex AI hyperparameter tuning job"}
_STYLE = (
    "body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}"
    "table{border-collapse:collapse;max-width:100%}"
    "td,th{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top;"
    "overflow-wrap:break-word}"
    "th{white-space:nowrap}th[scope=row]{background:#f6f6f6;font-weight:600}"
    "pre{background:#f6f6f6;padding:.5em;overflow-x:auto;white-space:pre-wrap;overflow-wrap:anywhere}.ERROR{color:#b00}"
    ".muted{color:#666;font-size:12px}.uri-box{display:inline-flex;gap:.4em;max-width:100%;align-items:baseline}"
    ".uri{overflow:hidden;text-overflow:ellipsis;white-space:nowrap;min-width:0;max-width:32em}"
    "button.copy{font-size:11px;padding:0 .4em;flex:none;cursor:pointer}"
    ".label{display:inline-block;font-size:12px;background:#edf2f7;border-radius:3px;"
    "padding:0 .3em;margin:1px 0}"
    "td .uri{max-width:10em}.nowrap{white-space:nowrap}"
    ".description{white-space:pre-wrap;font-size:12px;max-width:30em}.labels{min-width:15em}"
)
# Copy buttons (data-copy): the Clipboard API, else a selected textarea (a page outside a secure context).
_COPY_SCRIPT = (
    "<script>document.addEventListener('click',async(e)=>{const b=e.target.closest('button[data-copy]');"
    "if(!b)return;try{await navigator.clipboard.writeText(b.dataset.copy)}catch{const t=document."
    "createElement('textarea');t.value=b.dataset.copy;document.body.append(t);t.select();"
    "document.execCommand('copy');t.remove()}b.textContent='Copied'})</script>"
)


@dataclass(frozen=True)
class ConsoleJob:
    """A stored job, with what its API calls it: resource name, kind, state word."""

    name: str
    kind: str
    state: str
    record: Mapping[str, Any]
    logs: Sequence[Mapping[str, Any]]


def find_job(service: TrainingService, name: str) -> ConsoleJob | None:
    """The job a resource name names, or None (unknown job, project or location, or not a job name)."""
    parts = name.strip("/").split("/")
    ml_v1 = len(parts) == 4 and parts[0] == "projects" and parts[2] == "jobs"
    vertex = len(parts) == 6 and parts[0] == "projects" and parts[2] == "locations"
    try:
        if ml_v1:
            record = service.get_job(parts[1], parts[3])
            logs = _logs(service, parts[1], record)
            state = str(record.get("state"))
            return ConsoleJob(name, "AI Platform Training job (ml v1)", state, record, logs)
        if vertex and parts[4] in VERTEX_KINDS:
            record = VertexJobs(service).find(parts[4], parts[1], parts[3], parts[5])
            state = JOB_STATES[JobState.parse(record.get("state"))]
            logs = _logs(service, str(record["projectNumber"]), record)
            return ConsoleJob(name, _KIND_TITLES[parts[4]], state, record, logs)
    except (JobNotFoundError, ValidationError):
        return None
    return None


def _logs(service: TrainingService, project: str, record: Mapping[str, Any]) -> list[dict[str, Any]]:
    return service.store.read_log(project, str(record["jobId"]))[-LOG_LINES:]


def _page(title: str, body: str, refresh: bool = False) -> str:
    meta = f'<meta http-equiv="refresh" content="{REFRESH_SECONDS}">' if refresh else ""
    return (
        f'<!doctype html><html><head><meta charset="utf-8">{meta}<title>{escape(title)}</title>'
        f"<style>{_STYLE}</style></head><body>{body}"
        f'<p><a href="{PREFIX}">All jobs on this local training service</a></p>{_COPY_SCRIPT}</body></html>'
    )


def when_text(value: Any) -> str:
    """A time as every console page writes it: ``2026-11-29 05:09:13 UTC``, to the second (the
    records keep microseconds, so that they sort; a reader needs none). Not a time: as it is."""
    moment = instant(str(value)) if value else None
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC") if moment else ("" if value is None else str(value))


_LONG_NUMBER = re.compile(r"\d+\.\d{5,}")


def description_html(value: Any) -> str:
    """A version's description, folded: its first line (numbers to 4 significant digits) opens the
    rest, written as stored. The description holds a line per package and data file: unfolded, the
    column was 60 lines tall."""
    text = str(value or "")
    if not text:
        return ""
    first, _, rest = text.partition("\n")
    summary = escape(_LONG_NUMBER.sub(lambda m: number_text(float(m[0])), first))
    if not rest:
        return f'<div class="description">{summary}</div>'
    return f'<details class="description"><summary>{summary}</summary>{escape(text)}</details>'


_TAG = re.compile(r"(<[^>]+>)")
# After "_", "-" or "/" between word characters; and in a run of word characters too long to be a
# word (a hash, a 60-digit ID), every 16, so that a table still fits the page.
_BREAK_AFTER = re.compile(r"(?<=[^\W_])[_/-](?=[^\W_])|[^\W_]{16}(?=[^\W_])")


def breakable(html: str) -> str:
    """Escaped HTML whose text may wrap after ``_``, ``-`` and ``/`` (a ``<wbr>`` there), never inside
    a word: ``JOB_STATE_SUCCEEDED`` wraps as ``JOB_STATE_`` / ``SUCCEEDED``, not ``…SUCCEEDE`` / ``D``.
    Tags and their attributes are left as they are, and so is a URI cut with an ellipsis (``.uri``)."""
    out, in_uri = [], False
    for part in _TAG.split(html):
        if part.startswith("<"):
            in_uri = 'class="uri"' in part or (in_uri and not part.startswith("</span"))
            out.append(part)
        else:
            out.append(part if in_uri else _BREAK_AFTER.sub(lambda m: m[0] + "<wbr>", part))
    return "".join(out)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A table of already-escaped cells."""
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{breakable(cell)}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _facts(facts: Sequence[tuple[str, Any]]) -> str:
    """Label and value pairs, each label a row header: no header row (there are no columns to name)."""
    rows = "".join(
        f'<tr><th scope="row">{escape(k)}</th><td>{breakable(escape(str(v)))}</td></tr>' for k, v in facts
    )
    return f"<table class=facts>{rows}</table>"


def render_job(job: ConsoleJob) -> str:
    record = job.record
    times = [
        ("Created", record.get("createTime")),
        ("Preparing since", record.get("startTime")),
        ("Running since", record.get("runningSince")),
        ("Ended", record.get("endTime")),
    ]
    facts = [("Kind", job.kind), ("State", job.state), *job_facts(record)]
    facts += [(k, when_text(v)) for k, v in times if v]
    # Why it waits or failed, when the region lacked something (local/capacity.py).
    capacity = {"Waiting for": "waitingFor", "Error code": "errorCode", "Spot preemptions": "spotPreemptions"}
    facts += [(k, record[field]) for k, field in capacity.items() if record.get(field)]
    job_id = str(record.get("jobId", ""))
    body = f"<h1>{escape(display_name(record))}</h1><p>Job {escape(job_id)} · {uri_html(job.name)}</p>"
    body += _facts(facts)
    if record.get("errorMessage"):
        body += f"<h2>Error</h2><pre class=ERROR>{escape(str(record['errorMessage']))}</pre>"
    trials = (record.get("trainingOutput") or {}).get("trials") or []
    if trials:
        body += f"<h2>Trials ({len(trials)})</h2>" + _table(
            ["Trial", "State", "Hyperparameters", "Metric", "Step"], [_trial_row(t) for t in trials]
        )
    body += f"<h2>Log (last {LOG_LINES} lines)</h2><p>{SEVERITIES}</p>" + _log_block(job.logs)
    active = not JobState.parse(record.get("state")).is_terminal
    return _page(f"{display_name(record)} · {job.state}", body, refresh=active)


# The task log judges a stderr line by its content (airflow_aip.jobs.logs); this page is Cloud Logging's.
SEVERITIES = (
    "Severities as Google records them: a replica's stderr is ERROR whatever it says (a Python warning "
    "too). The Airflow task log shows each line at the level its content shows."
)


def _trial_row(trial: Mapping[str, Any]) -> list[str]:
    final = trial.get("finalMetric") or {}
    hyper = hyperparameters_text(trial.get("hyperparameters") or {})
    cells = [trial.get("trialId"), trial.get("state"), hyper]
    cells += [number_text(final.get("objectiveValue")) if final else "", final.get("trainingStep")]
    return [escape("" if cell is None else str(cell)) for cell in cells]


def _log_block(logs: Sequence[Mapping[str, Any]]) -> str:
    if not logs:
        return "<p>No log lines yet.</p>"
    lines = []
    for entry in logs:
        trial = f" trial {entry['trial']}" if entry.get("trial") else ""
        where = str(entry.get("task") or "service") + trial
        severity = str(entry.get("severity") or "INFO")
        text = f"{when_text(entry.get('time', ''))} {severity} [{where}] {entry.get('message', '')}"
        lines.append(f'<span class="{escape(severity)}">{escape(text)}</span>')
    return "<pre>" + "\n".join(lines) + "</pre>"


def render_missing(name: str) -> str:
    body = f"<h1>No such job</h1><p>This local training service has no job <code>{escape(name)}</code>.</p>"
    return _page("No such job", body)


def render_index(service: TrainingService) -> str:
    rows = []
    for record in reversed(service.store.records()):
        job = record.job
        if job.get("kind") in VERTEX_KINDS:
            name = str(job["resource"]["name"])
            state = JOB_STATES[JobState.parse(job.get("state"))]
        else:
            name = f"projects/{record.project}/jobs/{record.job_id}"
            state = str(job.get("state", ""))
        link = f'<a href="{escape(PREFIX + name)}" title="{escape(name)}">{escape(display_name(job))}</a>'
        facts = dict(job_facts(job))
        where = f"{facts.get('Strategy', '')} · {facts.get('Machine', '')}"
        created = when_text(job.get("createTime"))
        cells = [escape(record.job_id), escape(state), escape(where), escape(created)]
        rows.append([link, *cells])
    body = "<h1>Jobs on this local training service</h1>"
    header = ["Job", "ID", "State", "Strategy · machine", "Created"]
    body += _table(header, rows) if rows else "<p>No jobs yet.</p>"
    body += "<h2>Models</h2>" + _models_table(registry_of(service).snapshot())
    return _page("Local training jobs", body)


def _version_cells(version: Mapping[str, Any]) -> list[str]:
    """Version, aliases, created, metric and labels of a model version, as escaped cells."""
    created = when_text(version.get("versionCreateTime"))
    plain = [version.get("versionId"), ", ".join(version.get("versionAliases") or []), created]
    cells = [escape("" if cell is None else str(cell)) for cell in plain]
    cells.append(f'<span class="nowrap">{escape(version_metric(version))}</span>')
    return [*cells, f'<div class="labels">{labels_html(version.get("labels"))}</div>']


def _models_table(models: Sequence[Mapping[str, Any]]) -> str:
    """One row per version, the model's display name and ID on its first (oldest) version's row."""
    if not models:
        return "<p>No models yet.</p>"
    rows = []
    for model in models:
        link = f'<a href="{escape(PREFIX + str(model["name"]))}">{escape(str(model["displayName"]))}</a>'
        for index, version in enumerate(model["versions"]):
            head = [link, escape(str(model["modelId"]))] if index == 0 else ["", ""]
            rows.append(head + _version_cells(version))
    header = ["Model", "Model ID", "Version", "Aliases", "Created", "Metric", "Labels"]
    return _table(header, rows)


def render_model(versions: Sequence[Mapping[str, Any]]) -> str:
    """A model's page: each version (oldest first) with its metric and what it was uploaded with."""
    default = next((v for v in versions if "default" in (v.get("versionAliases") or [])), versions[0])
    name = str(default["name"])
    body = f"<h1>{escape(str(default.get('displayName', '')))}</h1><p>{uri_html(name)}</p>"
    rows = []
    for version in versions:
        cells = _version_cells(version)
        cells += [
            uri_html(version.get("artifactUri")),
            uri_html((version.get("containerSpec") or {}).get("imageUri")),
        ]
        rows.append([*cells, description_html(version.get("versionDescription"))])
    header = ["Version", "Aliases", "Created", "Metric", "Labels", "Artifact URI", "Serving container"]
    body += f"<h2>Versions ({len(versions)})</h2>" + _table([*header, "Description"], rows)
    return _page(f"{default.get('displayName', '')} · model", body)


def render_missing_model(name: str) -> str:
    body = (
        f"<h1>No such model</h1><p>This local training service has no model <code>{escape(name)}</code>.</p>"
    )
    return _page("No such model", body)

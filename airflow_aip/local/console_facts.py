"""What the console says about a job and a model version, for a person who debugs with it.

A job is named by its display name first (Vertex AI's IDs are 19-digit numbers nobody
recognises), then by where it ran: its strategy (``scheduling.strategy``; ml v1's scale tier),
its machines, its trainer and args, and its metric. A tuning job's metric is its best trial's
(the model's rule, :func:`~airflow_aip.jobs.trials.best_trial`); a single job reports none to
the service (the export reads it from the trainer's metrics file), and the page says so. A
model version's metric is the one its description records (``registry/upload.py``). Numbers
are written the one way every page writes them (:func:`~airflow_aip.jobs.numbers.number_text`).

Every function returns escaped HTML or plain text the caller escapes, as its docstring says.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from html import escape
from typing import Any

from airflow_aip.jobs.numbers import number_text
from airflow_aip.jobs.trials import best_trial, objective_value

LABEL_CHARS = 24  # a label value longer than this is cut (the whole label is its title)
_DESCRIBED_METRIC = re.compile(r": (?P<tag>\S+) = (?P<value>\S+) \((?P<goal>[A-Z_]+)\)\.")


def display_name(record: Mapping[str, Any]) -> str:
    """Vertex AI's ``displayName``; an ml v1 job has none, so its (readable) job ID."""
    resource = record.get("resource") or {}
    return str(resource.get("displayName") or record.get("jobId") or "")


def _vertex_spec(resource: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = resource.get("jobSpec") or resource.get("trialJobSpec") or {}
    return spec if isinstance(spec, Mapping) else {}


def _machine(machine: Mapping[str, Any], replicas: Any) -> str:
    text = str(machine.get("machineType") or "?")
    if machine.get("acceleratorCount"):
        text += f" + {machine['acceleratorCount']} x {machine.get('acceleratorType', '?')}"
    return f"{replicas} x {text}" if replicas not in (None, 1, "1") else text


def _trainer(pool: Mapping[str, Any]) -> tuple[str, list[str]]:
    """A worker pool's trainer (module or image) and args."""
    package, container = pool.get("pythonPackageSpec") or {}, pool.get("containerSpec") or {}
    if package:
        return (
            f"python -m {package.get('pythonModule', '?')} on {package.get('executorImageUri', '?')}",
            list(package.get("args") or []),
        )
    return str(container.get("imageUri") or "?"), [
        *(container.get("command") or []),
        *(container.get("args") or []),
    ]


def _vertex_facts(resource: Mapping[str, Any]) -> list[tuple[str, str]]:
    spec = _vertex_spec(resource)
    scheduling = spec.get("scheduling") or {}
    pools = [p for p in spec.get("workerPoolSpecs") or [] if p]
    strategy = str(scheduling.get("strategy") or "STANDARD (the default: none set)")
    if scheduling.get("maxWaitDuration"):
        strategy += f", waits up to {scheduling['maxWaitDuration']}"
    machines = "; ".join(_machine(p.get("machineSpec") or {}, p.get("replicaCount")) for p in pools)
    facts = [("Strategy", strategy), ("Machine", machines or "—")]
    if pools:
        trainer, args = _trainer(pools[0])
        facts += [("Trainer", trainer), ("Args", " ".join(args) or "none")]
    return facts


def _ml_v1_facts(training_input: Mapping[str, Any]) -> list[tuple[str, str]]:
    tier = str(training_input.get("scaleTier") or "BASIC")
    machine = str(training_input.get("masterType") or tier)
    accelerator = (training_input.get("masterConfig") or {}).get("acceleratorConfig") or {}
    if accelerator.get("count"):
        machine += f" + {accelerator['count']} x {accelerator.get('type', '?')}"
    if training_input.get("workerCount"):
        machine += f"; {training_input['workerCount']} x {training_input.get('workerType', machine)}"
    trainer = f"python -m {training_input.get('pythonModule', '?')}"
    if training_input.get("runtimeVersion"):
        trainer += f" (runtime {training_input['runtimeVersion']})"
    args = " ".join(str(a) for a in training_input.get("args") or []) or "none"
    return [("Strategy", f"scale tier {tier}"), ("Machine", machine), ("Trainer", trainer), ("Args", args)]


def _goal(record: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The tuning metric's tag and goal, ml v1's or Vertex's spelling; (None, None) without tuning."""
    if "resource" in record:
        metrics = ((record["resource"].get("studySpec") or {}).get("metrics")) or []
        return (metrics[0].get("metricId"), metrics[0].get("goal")) if metrics else (None, None)
    spec = (record.get("trainingInput") or {}).get("hyperparameters") or {}
    return (spec.get("hyperparameterMetricTag"), spec.get("goal")) if spec else (None, None)


def metric_fact(record: Mapping[str, Any]) -> str:
    """The job's metric as plain text: a tuning job's best trial, or why a single job shows none."""
    tag, goal = _goal(record)
    if tag is None and goal is None:
        return (
            "— (a single job reports no metric to this service: the export reads the trainer's metrics file)"
        )
    trials = (record.get("trainingOutput") or {}).get("trials") or []
    best = best_trial(trials, goal)
    name = tag or "metric"
    if best is None:
        return f"{name} ({goal}): — (no trial has a final metric yet)"
    return f"{name} {number_text(objective_value(best))} ({goal}), best of trial {best.get('trialId')}"


def job_facts(record: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Strategy, machine, trainer, args and metric, as plain text pairs (the name is the page's title)."""
    resource = record.get("resource")
    placed = (
        _vertex_facts(resource)
        if isinstance(resource, Mapping)
        else _ml_v1_facts(record.get("trainingInput") or {})
    )
    return [*placed, ("Metric", metric_fact(record))]


def hyperparameters_text(values: Mapping[str, Any]) -> str:
    """``C=34.63, kernel=rbf``: each value in the one number format (text stays text)."""
    return ", ".join(f"{k}={number_text(v)}" for k, v in values.items())


def version_metric(version: Mapping[str, Any]) -> str:
    """The metric a version's description records (``accuracy 0.9556``), or "—"."""
    found = _DESCRIBED_METRIC.search(str(version.get("versionDescription") or ""))
    return f"{found['tag']} {number_text(found['value'])}" if found else "—"


def labels_html(labels: Mapping[str, Any] | None) -> str:
    """Labels as small chips, each value cut at LABEL_CHARS (the whole label on hover). Escaped HTML."""
    chips = []
    for key, value in sorted((labels or {}).items()):
        whole = f"{key}={value}"
        shown = whole if len(str(value)) <= LABEL_CHARS else f"{key}={str(value)[:LABEL_CHARS]}…"
        chips.append(f'<span class="label" title="{escape(whole)}">{escape(shown)}</span>')
    return " ".join(chips)


def uri_html(value: Any) -> str:
    """A long URI cut with an ellipsis, the whole value on hover, and a button that copies it."""
    if not value:
        return ""
    text = escape(str(value))
    return (
        f'<span class="uri-box"><span class="uri" title="{text}">{text}</span>'
        f'<button type="button" class="copy" data-copy="{text}" aria-label="Copy {text}">Copy</button></span>'
    )

"""What the pages draw, from what the tasks stored in XCom: pure functions, no Airflow, no I/O.

The submit operator and the sensor return the job summary (:func:`airflow_aip.jobs.summarize_job`)
and push the job id before they wait; the export operator returns what it exported. The pages
read only those, so they still work after the job is gone; the one exception is the task tab
while its task waits, which draws the same summary from a live read (:mod:`airflow_aip.ui.live`).
Only the fields a page draws leave the server, never the whole XCom.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, urlencode

from airflow_aip.image_plan import TAG_HEX, TAG_PREFIX
from airflow_aip.jobs.hyperparameters import LOG_SCALES
from airflow_aip.jobs.logs import LogCursor, log_filter
from airflow_aip.jobs.times import seconds_between
from airflow_aip.jobs.trials import finite_number, objective_value
from airflow_aip.jobs.vertex.ladder_trials import rung_position
from airflow_aip.ui.costs import cost_text, cost_view
from airflow_aip.ui.results import evaluation_of, evaluations, job_result, reported_metric

LOGS_URL = "https://console.cloud.google.com/logs/query;query={query}?{project}"
GOOGLE_CONSOLE = "https://console.cloud.google.com/"


def state_text(state: Any) -> str | None:
    """A TaskInstanceState (a str Enum) or None, as plain text."""
    return str(getattr(state, "value", state)) if state else None


def map_index_param(raw: str | None) -> int:
    """The UI leaves ``{MAP_INDEX}`` literal on an unmapped task instance's page: that is -1."""
    try:
        return int(raw) if raw is not None else -1
    except ValueError:
        return -1


def is_job_summary(value: Any) -> bool:
    """True for what the submit operator and the sensor return; other tasks return other things."""
    return isinstance(value, Mapping) and {"job_id", "state", "trials", "backend"} <= value.keys()


def ended_job(record: Any) -> dict[str, Any] | None:
    """A wait that did not succeed (the ``aip_job_ended`` XCom) as a job summary the pages draw:
    the job as last read, or its id and state alone, with ``ended_because`` saying why it ended."""
    if not isinstance(record, Mapping) or not record.get("job_id"):
        return None
    summary = record.get("summary")
    if isinstance(summary, Mapping) and is_job_summary(summary):
        job = dict(summary)
    else:
        job = {"job_id": record["job_id"], "name": record.get("name"), "state": record.get("state")}
        job.update(trials=[], backend=None)
    job["ended_because"] = record.get("message")
    return job


def job_values(returned: Iterable[XComRow], endings: Iterable[XComRow]) -> list[XComRow]:
    """Each task's return value and, for a task whose wait did not succeed, how it ended as its job.

    ``endings`` are the ``aip_job_ended`` XComs; a job summary the task returned wins over its
    ending (a retry that succeeded).
    """
    out = list(returned)
    summarized = {(t, m) for t, m, v in out if is_job_summary(v)}
    for task_id, map_index, record in endings:
        job = ended_job(record) if (task_id, map_index) not in summarized else None
        if job is not None:
            out.append((task_id, map_index, job))
    return sorted(out, key=lambda row: (row[0], row[1]))


def built_image(value: Any) -> str | None:
    """What ``BuildTrainerImageOperator`` returns: an image URI tagged by its content
    (``repository:ctx-<hash>``, :mod:`airflow_aip.image_plan`); None for anything else."""
    if isinstance(value, str) and re.fullmatch(rf"\S+:{TAG_PREFIX}[0-9a-f]{{{TAG_HEX}}}", value):
        return value
    return None


def is_export_result(value: Any) -> bool:
    """True for what the export operator returns."""
    return isinstance(value, Mapping) and {"job_id", "exported", "promoted"} <= value.keys()


def link_label(url: Any, page: str = "job page") -> str | None:
    """What a link opens, said on it: a local run's "console" URL is the local service's own page,
    and labelling it "Google Cloud console" sends the user looking for a job Google never had."""
    if not url:
        return None
    if str(url).startswith(GOOGLE_CONSOLE):
        return "Google Cloud console"
    return f"Local training service: {page}"


def tied_best(trials: list[dict[str, Any]], best_key: str | None) -> list[str]:
    """Keys of the trials whose objective equals the best one's, when two or more do: the best
    trial is then one choice among equals, and the page says so rather than hide it."""
    best = next((t["objective"] for t in trials if t["key"] == best_key), None)
    if best is None:
        return []
    tied = [t["key"] for t in trials if t["objective"] == best]
    return tied if len(tied) > 1 else []


def logs_url(project_id: str | None, job_id: str) -> str | None:
    """The job's entries in Cloud Logging's explorer (the filter the log streamer uses)."""
    if not project_id or not job_id:
        return None
    query = quote(log_filter(job_id, LogCursor()), safe="")
    return LOGS_URL.format(query=query, project=urlencode({"project": project_id}))


def _summary_logs_url(summary: Mapping[str, Any]) -> str | None:
    """Cloud Logging's explorer for a job on Google (entries carry the job's own ID: Vertex's is numeric)."""
    console = str(summary.get("console_url") or "")
    if console and not console.startswith("https://console.cloud.google.com/"):
        return None  # the local service: its own job page has the logs
    name = str(summary.get("name") or "")
    log_id = name.rsplit("/", 1)[-1] if name else str(summary.get("job_id") or "")
    return logs_url(summary.get("project_id"), log_id)


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 3)


def trial_key(trial: Mapping[str, Any]) -> str:
    """What tells a trial apart in its summary: its ID, and its job's when the study spans several
    jobs (a capacity ladder's rungs, a resumed study): every job numbers its trials from 1."""
    trial_id = str(trial.get("trialId", ""))
    return f"{trial['job_id']}/{trial_id}" if trial.get("job_id") else trial_id


def trial_row(trial: Mapping[str, Any]) -> dict[str, Any]:
    """One row of the trials table: values as text, and as numbers where the charts need them.

    ``job_id`` and ``rung`` say which job (and ladder rung) ran the trial when the summary holds
    the trials of several jobs; None otherwise.
    """
    params = trial.get("hyperparameters") or {}
    metric = trial.get("finalMetric") if isinstance(trial.get("finalMetric"), Mapping) else {}
    step = finite_number(metric.get("trainingStep")) if metric else None
    return {
        "id": str(trial.get("trialId", "")),
        "key": trial_key(trial),
        "job_id": str(trial["job_id"]) if trial.get("job_id") else None,
        "rung": str(trial["rung"]) if trial.get("rung") is not None else None,
        "state": trial.get("state"),
        "params": {str(k): str(v) for k, v in params.items()},
        "values": {str(k): finite_number(v) for k, v in params.items()},
        "objective": objective_value(trial),
        "step": int(step) if step is not None else None,
        "start_time": trial.get("startTime"),
        "end_time": trial.get("endTime"),
        "duration_s": _rounded(seconds_between(trial.get("startTime"), trial.get("endTime"))),
        "stopped_early": bool(trial.get("isTrialStoppedEarly")),
        "logged": logged_metrics(trial.get("experimentRun")),
    }


def logged_metrics(run: Any) -> dict[str, float | None]:
    """What a trial (or a job) logged to its Vertex AI Experiments run (``experimentRun`` in the
    summary: :mod:`airflow_aip.jobs.experiments`), each metric a number or None."""
    metrics = run.get("metrics") if isinstance(run, Mapping) else None
    if not isinstance(metrics, Mapping):
        return {}
    return {str(name): finite_number(value) for name, value in metrics.items()}


def experiment_run_view(run: Any) -> dict[str, Any] | None:
    """A single job's Experiments run as the tab names it: its run, experiment and metrics."""
    if not isinstance(run, Mapping) or not run.get("run"):
        return None
    return {"run": str(run["run"]), "experiment": run.get("experiment"), "metrics": logged_metrics(run)}


def ladder_row(record: Mapping[str, Any]) -> dict[str, Any]:
    """One rung of a capacity ladder as the summary recorded it (``ladder`` in the submit's XCom):
    each configured rung, with its part in the run (``status``: out of capacity, running, ran, if
    needed, not needed; an older summary, which listed only the rungs tried, has none)."""
    return {
        "rung": record.get("rung"),
        "label": str(record.get("label") or ""),
        "status": record.get("status"),
        "placement": str(record.get("placement") or record.get("label") or ""),
        "region": record.get("region"),
        "job_id": record.get("job_id"),
        "state": record.get("state"),
        "ended_because": record.get("ended_because"),
        "detail": record.get("detail"),
        "waited_s": finite_number(record.get("waited_seconds")),
        "ran_s": finite_number(record.get("ran_seconds")),
        "trials_finished": record.get("trials_finished"),
    }


def _parameters(summary: Mapping[str, Any], trials: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Spec order first (with scales); then any name only the trials carry (an older summary)."""
    out = [
        {"name": p["name"], "type": p.get("type"), "log": p.get("scale") in LOG_SCALES}
        for p in summary.get("parameters") or []
        if isinstance(p, Mapping) and p.get("name")
    ]
    known = {p["name"] for p in out}
    for name in sorted({n for t in trials for n in t["params"]} - known):
        out.append({"name": name, "type": None, "log": False})
    return out


def job_view(
    summary: Mapping[str, Any],
    task_id: str,
    map_index: int,
    export: Mapping[str, Any] | None = None,
    evaluation: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One training job as the pages draw it: state, timeline, links, trials, best trial, export,
    and with a capacity ladder its rungs (the trials then say which job and rung ran them)."""
    trials = [trial_row(t) for t in summary.get("trials") or [] if isinstance(t, Mapping)]
    best = summary.get("best_trial") or {}
    job_id = str(summary.get("job_id") or "")
    ladder = [ladder_row(r) for r in summary.get("ladder") or [] if isinstance(r, Mapping)]
    best_key = trial_key(best) if best.get("trialId") is not None else None
    return {
        "task_id": task_id,
        "map_index": map_index,
        "job_id": job_id,
        "project_id": summary.get("project_id"),
        "state": summary.get("state"),
        "error_message": summary.get("error_message"),
        "ended_because": summary.get("ended_because"),
        "create_time": summary.get("create_time"),
        "start_time": summary.get("start_time"),
        "end_time": summary.get("end_time"),
        "name": summary.get("name"),
        "output_dir": summary.get("output_dir"),
        "image_uri": summary.get("image_uri"),
        "console_url": summary.get("console_url"),
        "console_label": link_label(summary.get("console_url")),
        "logs_url": _summary_logs_url(summary),
        "tuning": bool(summary.get("is_hyperparameter_tuning_job")),
        "goal": summary.get("goal"),
        "metric": summary.get("hyperparameter_metric_tag"),
        "best_trial_id": str(best["trialId"]) if best.get("trialId") is not None else None,
        "best_trial_key": best_key,
        "tied_trial_keys": tied_best(trials, best_key),
        "reported_metric": reported_metric(summary, export, evaluation),
        "result": job_result(summary, export, evaluation),
        "parameters": _parameters(summary, trials),
        "trials": trials,
        "logged_metrics": sorted({name for t in trials for name in t["logged"]}),
        "experiment_run": experiment_run_view(summary.get("experiment_run")),
        "ladder": ladder,
        "rung": rung_position(summary),
        "several_jobs": len({t["job_id"] for t in trials if t["job_id"]}) > 1,
        "export": export_view(export) if export is not None else None,
        "cost": cost_view(summary),
    }


def export_view(result: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "exported": bool(result.get("exported")),
        "promoted": bool(result.get("promoted")),
        "destination": result.get("destination"),
        "trial_id": result.get("trial_id"),
        "metric": result.get("metric"),
        "metric_tag": result.get("metric_tag"),
        "champion_metric": result.get("champion_metric"),
    }


def is_registration(value: Any) -> bool:
    """True for what ``RegisterModelOperator`` returns."""
    keys = {"model", "version_id", "champion_alias", "promoted"}
    return isinstance(value, Mapping) and keys <= value.keys()


def _difference(metric: float | None, champion: float | None) -> float | None:
    return metric - champion if metric is not None and champion is not None else None


def _registry_comparison(result: Mapping[str, Any]) -> dict[str, Any]:
    raw = result.get("champion_before")
    before: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    metric = finite_number(result.get("metric"))
    # the champion's metric the gate compared (re-measured on this run's data), else the recorded one
    champion = finite_number(result.get("champion_metric", before.get("metric")))
    version = before.get("version_id")
    return {
        "source": "registry",
        "model": result.get("model"),
        "version_id": result.get("version_id"),
        "metric": metric,
        "metric_tag": result.get("metric_tag"),
        "goal": result.get("goal"),
        "champion_metric": champion,
        "champion_version": str(version) if version is not None else None,
        "difference": _difference(metric, champion),
        "promoted": bool(result.get("promoted")),
        "reason": result.get("reason"),
        "console_url": result.get("console_url"),
        "console_label": link_label(result.get("console_url"), "model page"),
        **_verdict(result),
        "promoted_what": (
            f"Promoted version {result.get('version_id')} of {result.get('model')}, "
            f"from job {result.get('job_id')}"
            if result.get("promoted")
            else None
        ),
    }


def _export_comparison(result: Mapping[str, Any]) -> dict[str, Any]:
    metric, champion = finite_number(result.get("metric")), finite_number(result.get("champion_metric"))
    exported = bool(result.get("exported"))
    if result.get("decision") == "refuse":  # the gate could not compare them: its words say how to promote
        reason = str(result.get("reason"))
    elif champion is None:
        reason = "there was no champion yet" if exported else "the champion's metric is unknown"
    else:
        reason = "it beats the champion" if exported else "it does not beat the champion"
    return {
        "source": "export",
        "model": None,
        "version_id": None,
        "metric": metric,
        "metric_tag": result.get("metric_tag"),
        "goal": None,
        "champion_metric": champion,
        "champion_version": None,
        "difference": _difference(metric, champion),
        "promoted": exported,
        "reason": reason,
        "console_url": None,
        "console_label": None,
        **_verdict(result),
        "promoted_what": (
            f"Promoted job {result.get('job_id')}, exported to {result.get('destination')}"
            if result.get("promoted")
            else None
        ),
    }


def _verdict(result: Mapping[str, Any]) -> dict[str, Any]:
    """The gate's own sentence, when the gate wrote one that says on which data it compared.

    Older results (before the gate recorded evaluation data) keep the page's composed sentence.
    """
    if "same_eval_data" not in result:
        return {"verdict": None, "same_eval_data": None}
    same = result.get("same_eval_data")
    return {"verdict": result.get("reason"), "same_eval_data": same if isinstance(same, bool) else None}


def champion_comparison(values: Iterable[Any]) -> dict[str, Any] | None:
    """The run's new model against the champion: what the retraining example decides, on the page.

    The registration's verdict wins (it moved, or not, the champion alias, and says why, with the
    version it was measured against); else the export's champion gate (exported only when it beats
    the champion's manifest). None when the run has neither, or the export ran without a gate.
    """
    values = list(values)
    for value in values:
        if is_registration(value) and value.get("champion_alias"):
            return _registry_comparison(value)
    for value in values:
        if is_export_result(value) and "champion_metric" in value:
            return _export_comparison(value)
    return None


XComRow = tuple[str, int, Any]  # (task_id, map_index, deserialized return value)


def run_view(return_values: Iterable[XComRow]) -> list[dict[str, Any]]:
    """Every training job of a Dag run, each with what the run's export made of it."""
    rows = list(return_values)
    exports = {str(v["job_id"]): v for _, _, v in rows if is_export_result(v)}
    scored = evaluations(v for _, _, v in rows if is_export_result(v) or is_registration(v))
    return [
        job_view(value, task_id, map_index, exports.get(str(value["job_id"])), evaluation_of(value, scored))
        for task_id, map_index, value in rows
        if is_job_summary(value)
    ]


def job_list_row(
    submitted: Mapping[str, Any],
    summary: Any,
    task_state: str | None,
    export: Any = None,
    registration: Any = None,
    evaluation: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One row of Browse → Training jobs: the job id pushed before the wait, its summary if it ended.

    A job whose task is still waiting has no summary yet: its state is then the task's. What was
    promoted is said as the champion store has it: the registry's version, or the export's URI.
    """
    done = is_job_summary(summary)
    best = (summary.get("best_trial") or {}) if done else {}
    return {
        **submitted,
        "state": summary["state"] if done else None,
        "task_state": task_state,
        "rung": (rung_position(summary) or {}).get("text") if done else None,
        "image_uri": summary.get("image_uri") if done else None,
        "trials": len(summary["trials"]) if done else None,
        "tuning": bool(summary.get("is_hyperparameter_tuning_job")) if done else None,
        "result": job_result(summary, export if is_export_result(export) else None, evaluation)
        if done
        else None,
        "best_trial_id": str(best["trialId"]) if best.get("trialId") is not None else None,
        "best_objective": objective_value(best) if best else None,
        "cost": cost_text(summary) if done else None,
        "exported": bool(export.get("exported")) if is_export_result(export) else None,
        "promoted": bool(export.get("promoted")) if is_export_result(export) else None,
        **_promotion(export, registration),
    }


def passed_rung_rows(row: Mapping[str, Any], summary: Any) -> list[dict[str, Any]]:
    """Browse's rows for the rungs a capacity ladder passed (a Spot job stocked out, say): each its
    own job, listed under the job the task reached, so that Browse shows every job the task made.
    Only rungs that made a job (a create refused for quota made none)."""
    ladder = [r for r in (summary or {}).get("ladder") or [] if isinstance(r, Mapping)]
    out = []
    for record in ladder:
        if not record.get("ended_because") or not record.get("job_id") or record["job_id"] == row["job_id"]:
            continue
        placement = record.get("strategy") or record.get("placement") or record.get("label")
        reason = f"out of capacity ({record['ended_because']}): the task moved to the next rung"
        out.append(
            {
                **row,
                "job_id": str(record["job_id"]),
                "state": record.get("state"),
                "rung": f"rung {record.get('rung')} of {len(ladder)} · {placement}",
                "trials": record.get("trials_finished"),
                "result": {
                    "kind": "none",
                    "metric": None,
                    "value": None,
                    "trial_id": None,
                    "rung": None,
                    "reason": reason,
                },
                "best_trial_id": None,
                "best_objective": None,
                "exported": None,
                "promoted": None,
                "promoted_as": None,
            }
        )
    return out


def _promotion(export: Any, registration: Any) -> dict[str, Any]:
    """``promoted`` and ``promoted_as`` ("version 4 of …", or the export's URI) for a job's row."""
    if is_registration(registration) and registration.get("champion_alias"):
        promoted = bool(registration.get("promoted"))
        version = f"version {registration.get('version_id')} of {registration.get('model')}"
        return {"promoted": promoted, "promoted_as": version if promoted else None}
    if is_export_result(export) and export.get("promoted"):
        return {"promoted_as": export.get("destination")}
    return {"promoted_as": None}

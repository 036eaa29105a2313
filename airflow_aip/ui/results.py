"""What a job came to, one way on every page: its best trial, or a single job's final metric.

A tuning job's result is its best trial. A single (non-tuning) job has no trials: its result is
its final metric, from the summary when the job reported one, else from what the run's export read
from the job's metrics file. Without either, the result is a dash and the reason. The task tab,
the run tab and Browse all draw this one value (``resultText`` in ``static/common.js``), so a job
reads the same on each of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from airflow_aip.jobs import JobState
from airflow_aip.jobs.trials import finite_number, objective_value


def reported_metric(
    summary: Mapping[str, Any], export: Mapping[str, Any] | None, evaluation: Mapping[str, Any] | None = None
) -> dict[str, Any] | None:
    """The metric a job reported: the summary's final metric when it has one, else what the run's
    export read from the job's metrics file, else (an evaluation-only job, which scored the
    champion) what the gate read from the metrics file it wrote. A single (non-tuning) job has no
    trials to show its metric, so without this the page shows none at all."""
    final = summary.get("final_metric")
    value = finite_number(final.get("objectiveValue") if isinstance(final, Mapping) else final)
    if value is not None:
        return {"value": value, "tag": summary.get("hyperparameter_metric_tag"), "source": "summary"}
    exported = finite_number(export.get("metric")) if export is not None else None
    if export is not None and exported is not None:
        return {"value": exported, "tag": export.get("metric_tag"), "source": "export"}
    evaluated = finite_number(evaluation.get("metric")) if evaluation is not None else None
    if evaluation is not None and evaluated is not None:
        return {"value": evaluated, "tag": evaluation.get("metric_tag"), "source": "evaluation"}
    return None


def evaluations(values: Iterable[Any]) -> list[Mapping[str, Any]]:
    """The evaluation-only jobs' metrics files that a run's export or registration read
    (their ``champion_evaluation``)."""
    return [
        v["champion_evaluation"]
        for v in values
        if isinstance(v, Mapping) and isinstance(v.get("champion_evaluation"), Mapping)
    ]


def evaluation_of(summary: Mapping[str, Any], found: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The evaluation a single job wrote: the metrics file the gate read is in the job's output directory."""
    directory = str(summary.get("output_dir") or "").rstrip("/")
    if not directory or summary.get("is_hyperparameter_tuning_job"):
        return None
    return next((e for e in found if str(e.get("uri") or "").startswith(directory + "/")), None)


def _ended(summary: Mapping[str, Any]) -> bool:
    return JobState.parse(summary.get("state")).is_terminal


def _none(metric: Any, reason: str) -> dict[str, Any]:
    return {"kind": "none", "metric": metric, "value": None, "trial_id": None, "rung": None, "reason": reason}


def job_result(
    summary: Mapping[str, Any], export: Mapping[str, Any] | None, evaluation: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """``kind``: "trial" (a tuning job's best), "metric" (a single job's final metric) or "none"
    (then ``reason`` says why there is no number)."""
    tag = summary.get("hyperparameter_metric_tag")
    if summary.get("is_hyperparameter_tuning_job"):
        best = summary.get("best_trial") or {}
        if best.get("trialId") is not None:
            rung = best.get("rung")
            return {
                "kind": "trial",
                "metric": tag,
                "value": objective_value(best),
                "trial_id": str(best["trialId"]),
                "rung": str(rung) if rung is not None else None,
                "reason": None,
            }
        if summary.get("trials"):
            return _none(tag, "no trial has a final metric")
        return _none(tag, "no trial ran" if _ended(summary) else "no trial has ended yet")
    reported = reported_metric(summary, export, evaluation)
    if reported is not None:
        result = _none(reported["tag"] or tag, "")
        return {
            **result,
            "kind": "metric",
            "value": reported["value"],
            "reason": None,
            "source": reported["source"],
        }
    if _ended(summary):
        return _none(tag, "a single job; it reported no metric")
    return _none(tag, "a single job; its metric comes when it ends")

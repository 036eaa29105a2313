"""Choosing the best hyperparameter trial, once, for the operator, the export and the local service."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_aip.exceptions import ValidationError

DEFAULT_METRIC_TAG = "training/hptuning/metric"
# Google: "GOAL_TYPE_UNSPECIFIED: Goal Type will default to maximize."
_DIRECTIONS = {"MAXIMIZE": 1, "GOAL_TYPE_UNSPECIFIED": 1, "MINIMIZE": -1}
_LOSING_STATES = frozenset({"FAILED", "CANCELLED", "CANCELLING"})


def objective_value(trial: Mapping[str, Any]) -> float | None:
    """A trial's ``finalMetric.objectiveValue`` as a finite float, or None when it has none."""
    metric = trial.get("finalMetric")
    if not isinstance(metric, Mapping):
        return None
    return finite_number(metric.get("objectiveValue"))


def finite_number(value: Any) -> float | None:
    """A finite float from an API number (ml v1 sends some as strings); None for anything else."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def best_trial(trials: Sequence[Mapping[str, Any]], goal: str | None) -> dict[str, Any] | None:
    """The trial with the best final objective for ``goal``; None when no trial has one.

    A trial with no (finite) final metric, or that ended FAILED or CANCELLED, never wins.
    Ties go to the earlier trial in the list, so the answer is stable between polls.
    """
    goal = goal or "GOAL_TYPE_UNSPECIFIED"
    if goal not in _DIRECTIONS:
        raise ValidationError("goal", f"must be MAXIMIZE or MINIMIZE, got {goal!r}")
    direction = _DIRECTIONS[goal]
    best: Mapping[str, Any] | None = None
    best_score = -math.inf
    for trial in trials:
        value = objective_value(trial)
        if value is None or trial.get("state") in _LOSING_STATES:
            continue
        if direction * value > best_score:
            best, best_score = trial, direction * value
    return dict(best) if best is not None else None


def best_trial_report(summary: Mapping[str, Any]) -> str | None:
    """The line a waiting task ends its log with: which trial won, on what, and how ties were broken.

    None for a job that is not tuned or has no trial with a final metric.
    """
    best = summary.get("best_trial")
    if not summary.get("is_hyperparameter_tuning_job") or not isinstance(best, Mapping):
        return None
    value = objective_value(best)
    tag = summary.get("hyperparameter_metric_tag") or DEFAULT_METRIC_TAG
    goal = summary.get("goal") or "MAXIMIZE"
    trials = [t for t in summary.get("trials") or [] if isinstance(t, Mapping)]
    scored = [t for t in trials if objective_value(t) is not None and t.get("state") not in _LOSING_STATES]
    tied = [str(t.get("trialId")) for t in scored if objective_value(t) == value]
    params = ", ".join(f"{k}={v}" for k, v in (best.get("hyperparameters") or {}).items())
    line = (
        f"Best trial: {best.get('trialId')} with {tag} = {value} ({goal}, {len(scored)} of {len(trials)} "
        f"trials scored); hyperparameters: {params or 'none'}"
    )
    if len(tied) > 1:
        line += f". {len(tied)} trials tied at {value} ({', '.join(tied)}): the earliest in the list won"
    return line


def metrics_apart(first: float | None, second: float | None) -> tuple[str, str]:
    """Two metrics as text, with as many significant digits as it takes to tell them apart (at
    least 4): a verdict reads "accuracy 0.8444 does not beat the champion's 0.8889", never
    0.8444444444444444, nor two equal-looking numbers for two different ones."""
    if first is None or second is None:
        return str(first), str(second)
    for digits in range(4, 18):
        shown = f"{first:.{digits}g}", f"{second:.{digits}g}"
        if shown[0] != shown[1] or first == second:
            return shown
    return repr(first), repr(second)

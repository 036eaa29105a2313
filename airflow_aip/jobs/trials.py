"""Choosing the best hyperparameter trial, once, for the operator, the export and the local service.

:class:`Goal` is which way a metric is better, read once: the trial choice here, the local
service's search, the Vertex AI translation and the champion gate (:mod:`airflow_aip.registry.gate`)
all ask it, so "unspecified" cannot mean maximize in one place and an error in another.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any

from airflow_aip.exceptions import ValidationError

DEFAULT_METRIC_TAG = "training/hptuning/metric"
UNSPECIFIED_GOALS = frozenset({"", "GOAL_TYPE_UNSPECIFIED", "GOAL_UNSPECIFIED"})
_LOSING_STATES = frozenset({"FAILED", "CANCELLED", "CANCELLING"})


class Goal(str, Enum):
    """Which way a metric is better: a study's goal on both APIs, and a manifest's ``metric.goal``."""

    MAXIMIZE = "MAXIMIZE"
    MINIMIZE = "MINIMIZE"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, value: object, field: str = "goal") -> Goal:
        """The goal ``value`` names; None, "" and an unspecified goal are MAXIMIZE.

        The one place that default is written. It is the APIs' own: ml v1's HyperparameterSpec
        and Vertex AI's StudySpec.MetricSpec both document ``GOAL_TYPE_UNSPECIFIED`` as "Goal Type
        will default to maximize" (ml.v1.json, aiplatform.v1.json), so a job that names no goal
        was tuned to maximize, and is compared that way. Anything else is a ValidationError on
        ``field``: guessing a direction would promote the worse model.
        """
        if isinstance(value, Goal):
            return value
        if value is None or (isinstance(value, str) and value in UNSPECIFIED_GOALS):
            return cls.MAXIMIZE
        try:
            return cls(value)
        except ValueError:
            rule = f"must be MAXIMIZE or MINIMIZE (unspecified: MAXIMIZE), got {value!r}"
            raise ValidationError(field, rule) from None

    @property
    def sign(self) -> int:
        """1 to maximize, -1 to minimize: ``sign * value`` is larger for the better value."""
        return 1 if self is Goal.MAXIMIZE else -1

    def better(self, a: float, b: float) -> bool:
        """True when ``a`` is strictly better than ``b`` (a tie is not better)."""
        return self.sign * a > self.sign * b


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
    direction = Goal.parse(goal)
    best: Mapping[str, Any] | None = None
    best_value = 0.0
    for trial in trials:
        value = objective_value(trial)
        if value is None or trial.get("state") in _LOSING_STATES:
            continue
        if best is None or direction.better(value, best_value):
            best, best_value = trial, value
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
    goal = Goal.parse(summary.get("goal"))
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

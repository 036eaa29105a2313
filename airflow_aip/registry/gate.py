"""The champion gate: one rule for both champion stores.

A champion is kept either in Cloud Storage (the manifest at ``champion_manifest_uri``, which
:class:`~airflow_aip.operators.export.ExportArtifactsOperator` replaces) or in the Model Registry
(the version holding an alias, which :class:`~airflow_aip.operators.registry.RegisterModelOperator`
moves). Both ask :func:`judge`, so a model is promoted in one store exactly when it would be in
the other:

- nothing holds the champion's place: promote;
- the candidate is the champion already (a re-run): promote, nothing moves;
- the candidate or the champion records no metric, or they were chosen on different metric tags
  or goals: refuse. Nothing says which is better, so a person decides; the reason says how to
  promote by hand in that store;
- otherwise the candidate is promoted only when it is strictly better for the goal
  (:meth:`~airflow_aip.jobs.trials.Goal.better`); a tie keeps the champion.

Refusing is a decision, not a failure: the task succeeds, promotes nothing and says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from airflow_aip.jobs.trials import Goal, metrics_apart


class Decision(str, Enum):
    """What the gate decided; only PROMOTE moves the champion."""

    PROMOTE = "promote"
    KEEP = "keep"
    """The champion stays: the candidate does not beat it."""
    REFUSE = "refuse"
    """Not compared: the reason says why, and how to promote by hand."""


@dataclass(frozen=True)
class Standing:
    """What the gate reads of a model: what it is, its metric, the metric's tag, the goal."""

    name: str
    """How a verdict names the model ("version 3", its export's URI); one name, one model."""
    metric: float | None
    metric_tag: str | None
    """None: not recorded, which no other tag contradicts."""
    goal: Goal
    """As :meth:`Goal.parse` reads what was recorded (unspecified: MAXIMIZE)."""


@dataclass(frozen=True)
class Verdict:
    """What the gate decided, and the one line that says why."""

    decision: Decision
    reason: str

    @property
    def promote(self) -> bool:
        return self.decision is Decision.PROMOTE


def judge(candidate: Standing, champion: Standing | None, *, by_hand: str) -> Verdict:
    """Whether ``candidate`` takes the place of ``champion`` (None: nothing holds it).

    ``by_hand`` ends every refusal: a sentence that says how to promote the candidate in this
    store without the gate.
    """
    if champion is None:
        return Verdict(Decision.PROMOTE, "there is no champion yet")
    if candidate.name == champion.name:
        return Verdict(Decision.PROMOTE, f"{candidate.name} is the champion already")
    if candidate.metric is None:
        return Verdict(Decision.REFUSE, f"{candidate.name} records no metric to compare. {by_hand}")
    if champion.metric is None:
        reason = f"the champion, {champion.name}, has no manifest with a metric to compare. {by_hand}"
        return Verdict(Decision.REFUSE, reason)
    tags = {candidate.metric_tag, champion.metric_tag} - {None}
    if len(tags) > 1 or candidate.goal is not champion.goal:
        reason = (
            f"the champion was chosen on {champion.metric_tag} ({champion.goal}) and {candidate.name} on "
            f"{candidate.metric_tag} ({candidate.goal}): they cannot be compared. {by_hand}"
        )
        return Verdict(Decision.REFUSE, reason)
    tag = candidate.metric_tag or champion.metric_tag or "metric"
    new, held = metrics_apart(candidate.metric, champion.metric)
    if candidate.goal.better(candidate.metric, champion.metric):
        return Verdict(Decision.PROMOTE, f"{tag} {new} beats the champion's {held} (goal {candidate.goal})")
    return Verdict(Decision.KEEP, f"{tag} {new} does not beat the champion's {held} (goal {candidate.goal})")

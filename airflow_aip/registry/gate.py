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
- the two metrics were measured on different evaluation data (or the champion's data is not
  recorded) and ``require_same_eval_data``: refuse, for the same reason. Without it they are
  compared, and the verdict says that the data differed;
- otherwise the candidate is promoted only when it is strictly better for the goal
  (:meth:`~airflow_aip.jobs.trials.Goal.better`); a tie keeps the champion.

Why the evaluation data matter: each retraining run scores its model on its own split, so a
champion's recorded metric is, in general, a score on other rows. A champion measured again on the
candidate's data (:class:`Measurement`, an evaluation-only job's result; :meth:`Standing.measured`)
is what makes the two numbers comparable. The data are named by a content fingerprint (the eval
CSV's md5), so the same rows under another URI count as the same data.

Refusing is a decision, not a failure: the task succeeds, promotes nothing and says why.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
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
class Measurement:
    """A model scored (again) on some evaluation data: what an evaluation-only job reports."""

    model_uri: str
    """The model directory scored (a champion's ``artifactUri`` or export destination)."""
    metric: float
    metric_tag: str | None
    eval_data: str | None
    """The evaluation data's fingerprint (see :attr:`Standing.eval_data`)."""


@dataclass(frozen=True)
class Standing:
    """What the gate reads of a model: what it is, its metric, the metric's tag, the goal, the data."""

    name: str
    """Who the model is ("version 3", its export's URI); one name, one model."""
    metric: float | None
    metric_tag: str | None
    """None: not recorded, which no other tag contradicts."""
    goal: Goal
    """As :meth:`Goal.parse` reads what was recorded (unspecified: MAXIMIZE)."""
    eval_data: str | None = None
    """The fingerprint of the data ``metric`` was measured on (``md5:<hex>``); None: not recorded."""
    label: str | None = None
    """How a verdict calls the model, briefly ("v3", a job ID); default: ``name``."""
    model_uri: str | None = None
    """Where the model's files are: a :class:`Measurement` of that directory is this model's."""

    def measured(self, measurement: Measurement | None) -> Standing:
        """This model as ``measurement`` scored it, when it scored this model on this metric tag.

        Another model's measurement (the champion changed since it was taken) or another tag's
        leaves the standing as recorded: the gate then says the data differ.
        """
        if measurement is None or not self.model_uri:
            return self
        same_model = measurement.model_uri.rstrip("/") == self.model_uri.rstrip("/")
        tags = {measurement.metric_tag, self.metric_tag} - {None}
        if not same_model or len(tags) > 1:
            return self
        return replace(self, metric=measurement.metric, eval_data=measurement.eval_data)

    @property
    def called(self) -> str:
        return self.label or self.name


@dataclass(frozen=True)
class Verdict:
    """What the gate decided, and the one sentence that says why."""

    decision: Decision
    reason: str
    same_data: bool | None = None
    """Whether both metrics were measured on the same evaluation data (None: not compared)."""

    @property
    def promote(self) -> bool:
        return self.decision is Decision.PROMOTE


def judge(
    candidate: Standing,
    champion: Standing | None,
    *,
    by_hand: str,
    require_same_eval_data: bool = False,
) -> Verdict:
    """Whether ``candidate`` takes the place of ``champion`` (None: nothing holds it).

    ``by_hand`` ends every refusal: a sentence that says how to promote the candidate in this
    store without the gate. ``require_same_eval_data`` refuses metrics measured on different (or
    unrecorded) evaluation data instead of comparing them.
    """
    if champion is None:
        if candidate.metric is None:
            return Verdict(Decision.PROMOTE, "there is no champion yet: promoted")
        tag = candidate.metric_tag or "metric"
        return Verdict(
            Decision.PROMOTE,
            f"{tag} {candidate.metric:.4g} on this run's data; there is no champion yet: promoted",
        )
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
    same = candidate.eval_data is not None and candidate.eval_data == champion.eval_data
    sentence = comparison(candidate, champion, same_data=same)
    if not same and require_same_eval_data:
        reason = f"{sentence}: not compared (require_same_eval_data). {by_hand}"
        return Verdict(Decision.REFUSE, reason, same_data=False)
    lower = " (lower is better)" if candidate.goal is Goal.MINIMIZE else ""
    if candidate.goal.better(candidate.metric, champion.metric):
        return Verdict(Decision.PROMOTE, f"{sentence}: promoted{lower}", same_data=same)
    return Verdict(Decision.KEEP, f"{sentence}: kept the champion{lower}", same_data=same)


def comparison(candidate: Standing, champion: Standing, *, same_data: bool) -> str:
    """ "accuracy 0.9556 on this run's data against the champion's 0.9333 (v3) on the same data"."""
    new, held = metrics_apart(candidate.metric, champion.metric)
    tag = candidate.metric_tag or champion.metric_tag or "metric"
    if same_data:
        where = "on the same data"
    elif champion.eval_data is None:
        where = "on data it does not record"
    else:
        where = "on other data"
    return f"{tag} {new} on this run's data against the champion's {held} ({champion.called}) {where}"

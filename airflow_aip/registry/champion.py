"""The champion gate on the Model Registry, and the ledger that makes a promotion all-or-nothing.

Who is champion is the registry's answer: the version holding the alias. How good it is comes
from its own export manifest (``{artifactUri}/manifest.json``), never from a label that
formatting could round. Whether a version takes the alias is :func:`airflow_aip.registry.gate.judge`'s
answer, the rule the Cloud Storage store applies too.

Why a ledger as well as the alias. ``mergeVersionAliases`` moves an alias in one call, but it
is not conditional: two runs that both beat the old champion would both move it, and the last
one wins even when it is the worse. So a promotion first commits itself to a small JSON object
in Cloud Storage (the ledger) with a generation precondition: exactly one of two racers commits
against the champion it judged, and the other re-reads and judges again, against the winner.
The alias then follows the ledger. Every promoter, after its merge, reads the ledger again
and re-applies its head if another committed in between; so the last merge of all is always
followed by a read of the final ledger, and the alias ends on its head.

The ledger keeps the previous champions, newest first: a rollback pops one and moves the alias
back, through the same compare-and-swap.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.trials import Goal
from airflow_aip.registry.gate import Measurement, Standing, Verdict, judge

LEDGER_VERSION = 1
MAX_HISTORY = 50


@dataclass(frozen=True)
class Contender:
    """A version and the metric its manifest records."""

    version_id: str
    metric: float | None
    metric_tag: str | None
    goal: str | None
    manifest_uri: str | None = None
    job_id: str | None = None
    eval_data: str | None = None
    """The fingerprint of the evaluation data ``metric`` was measured on (None: not recorded)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Contender:
        metric = data.get("metric")
        return cls(
            version_id=str(data["version_id"]),
            metric=float(metric)
            if isinstance(metric, int | float) and not isinstance(metric, bool)
            else None,
            metric_tag=data.get("metric_tag"),
            goal=Goal.parse(data.get("goal"), "ledger_uri").value,
            manifest_uri=data.get("manifest_uri"),
            job_id=data.get("job_id"),
            eval_data=data.get("eval_data"),
        )

    def describe(self) -> str:
        return f"version {self.version_id} ({self.metric_tag or 'metric'} {self.metric})"

    @property
    def model_uri(self) -> str | None:
        """The version's model directory: its manifest's folder."""
        folder, _, name = (self.manifest_uri or "").rpartition("/")
        return folder if name == "manifest.json" and folder else None

    def standing(self) -> Standing:
        """What the gate reads of this version."""
        return Standing(
            f"version {self.version_id}",
            self.metric,
            self.metric_tag,
            Goal.parse(self.goal),
            eval_data=self.eval_data,
            label=f"v{self.version_id}",
            model_uri=self.model_uri,
        )


def judge_version(
    candidate: Contender,
    champion: Contender | None,
    *,
    alias: str,
    ledger_uri: str,
    measurement: Measurement | None = None,
    require_same_eval_data: bool = False,
) -> Verdict:
    """The gate on the Model Registry: does ``candidate`` take ``alias`` from ``champion`` (None: nobody's)?

    ``measurement`` is the champion scored again on the candidate's evaluation data (it counts
    only if it scored that very version). A refusal says how to move the alias by hand; the
    candidate stays registered either way.
    """
    by_hand = (
        f"To promote version {candidate.version_id} anyway, move {alias} to it with the registry's "
        f"mergeVersionAliases (a move by hand bypasses the ledger {ledger_uri})."
    )
    held = champion.standing().measured(measurement) if champion else None
    return judge(candidate.standing(), held, by_hand=by_hand, require_same_eval_data=require_same_eval_data)


def check_ledger(ledger: Mapping[str, Any] | None, model: str) -> None:
    """A ledger records one model's champions: another model's is refused, naming both."""
    recorded = (ledger or {}).get("model")
    if recorded and recorded != model:
        raise ValidationError("ledger_uri", f"records the champions of {recorded}, not of {model}")


def ledger_head(ledger: Mapping[str, Any] | None) -> Contender | None:
    """The champion the ledger last committed (None: no ledger, or nothing committed)."""
    head = (ledger or {}).get("champion")
    return Contender.from_json(head) if head else None


def after_promotion(
    ledger: Mapping[str, Any] | None,
    *,
    model: str,
    alias: str,
    candidate: Contender,
    displaced: Contender | None,
    at: str,
    run: Mapping[str, Any],
) -> dict[str, Any]:
    """The ledger once ``candidate`` displaced ``displaced`` (the alias holder it was judged against)."""
    check_ledger(ledger, model)
    history = [Contender.from_json(h) for h in (ledger or {}).get("history") or []]
    if displaced is not None and displaced.version_id != candidate.version_id:
        history = [displaced, *[h for h in history if h.version_id != displaced.version_id]]
    return _ledger(
        ledger,
        model,
        alias,
        candidate,
        history,
        {"action": "promoted", "version_id": candidate.version_id, "at": at, "airflow": dict(run)},
    )


def after_rollback(
    ledger: Mapping[str, Any] | None, *, model: str, alias: str, at: str, run: Mapping[str, Any]
) -> tuple[dict[str, Any], Contender, Contender]:
    """The ledger with its head popped: ``(ledger, restored, removed)``; ValidationError if none."""
    check_ledger(ledger, model)
    head = ledger_head(ledger)
    history = [Contender.from_json(h) for h in (ledger or {}).get("history") or []]
    if head is None:
        raise ValidationError("ledger_uri", f"records no champion of {model}: nothing to roll back")
    if not history:
        raise ValidationError(
            "ledger_uri",
            f"version {head.version_id} is the first champion of {model}: nothing to roll back to",
        )
    restored, rest = history[0], history[1:]
    event = {
        "action": "rolled_back",
        "version_id": restored.version_id,
        "from_version_id": head.version_id,
        "at": at,
        "airflow": dict(run),
    }
    return _ledger(ledger, model, alias, restored, rest, event), restored, head


def _ledger(
    ledger: Mapping[str, Any] | None,
    model: str,
    alias: str,
    head: Contender,
    history: list[Contender],
    event: dict[str, Any],
) -> dict[str, Any]:
    events = [*((ledger or {}).get("events") or []), event][-MAX_HISTORY:]
    return {
        "ledger_version": LEDGER_VERSION,
        "model": model,
        "alias": alias,
        "champion": head.to_json(),
        "history": [h.to_json() for h in history[:MAX_HISTORY]],
        "events": events,
    }

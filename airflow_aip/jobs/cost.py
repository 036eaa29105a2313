"""What a training job cost, estimated from its own times and one price table: the one estimate, pure.

- A job: each pool's replicas x its rates (machine, accelerators, boot disk) x the time it ran,
  ``startTime`` to ``endTime`` (or to now while it runs), rounded up to the billing increment.
  Queued time is not billed (Spot and Flex-Start say so; standard VMs bill once provisioned).
- A tuning job: the sum over its trials, each from its own ``startTime`` to ``endTime`` at one
  trial's rate.
- A ladder: the sum over its rungs' jobs (:func:`total`).
- A Spot or Flex-Start job also gets what the same work costs on standard VMs (``standard``): the
  saving is the difference.

Every figure is an estimate and says so, with the table it came from. A job whose times or
machines cannot be read gets no figure and a reason (``missing``); a price the table lacks
gives no figure and names the row (``unknown``). Never a zero for what is not known.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_aip.jobs.pricing import PriceTable, Rate
from airflow_aip.jobs.states import JobState
from airflow_aip.jobs.times import seconds_between


@dataclass(frozen=True)
class Estimate:
    """An estimated cost in ``currency`` from the table of ``table_date``; None where it cannot be made."""

    amount: float | None
    currency: str
    table_date: str
    standard: float | None = None  # the same work on standard VMs (Spot and Flex-Start only)
    unknown: tuple[str, ...] = ()  # the rows the table lacks
    missing: str = ""  # why there is no figure, when the job's times or machines cannot be read
    seconds: float = 0.0  # billed seconds (all trials, for a tuning job)
    strategy: str = "STANDARD"
    unverified: tuple[str, ...] = ()  # the rows used that no source confirms: where it can be wrong

    @property
    def known(self) -> bool:
        return self.amount is not None

    @property
    def why_none(self) -> str:
        """Why there is no figure: the missing times, or the rows the table lacks."""
        if self.missing:
            return self.missing
        return "no price for " + ", ".join(self.unknown) if self.unknown else ""

    def text(self) -> str:
        """``USD 1.234 (estimate, price table of 2026-11-29)``, or why there is none."""
        source = f"price table of {self.table_date}"
        if self.amount is None:
            return f"no estimate ({self.why_none}; {source})"
        out = f"{self.currency} {money(self.amount)} (estimate, {source}"
        if self.standard is not None:
            out += f"; {money(self.standard)} on standard VMs, {money(self.standard - self.amount)} saved"
        return out + unverified_text(self.unverified) + ")"

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Estimate:
        """The estimate a summary carries (``summary["cost"]``), to write or sum again."""
        return cls(
            data.get("amount"),
            str(data.get("currency") or ""),
            str(data.get("table_date") or ""),
            data.get("standard"),
            tuple(data.get("unknown") or ()),
            str(data.get("missing") or ""),
            float(data.get("seconds") or 0.0),
            str(data.get("strategy") or "STANDARD"),
            tuple(data.get("unverified") or ()),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "amount": None if self.amount is None else round(self.amount, 6),
            "currency": self.currency,
            "estimate": True,
            "table_date": self.table_date,
            "standard": None if self.standard is None else round(self.standard, 6),
            "unknown": list(self.unknown),
            "missing": self.missing or None,
            "seconds": round(self.seconds, 3),
            "strategy": self.strategy,
            "unverified": list(self.unverified),
        }


def unverified_text(rows: Iterable[str]) -> str:
    """``; unverified rates: machine e2-standard-4 in us-central1``, or nothing when every row is sourced."""
    listed = list(dict.fromkeys(rows))
    return f"; unverified rates: {', '.join(listed)}" if listed else ""


def money(amount: float) -> str:
    """An amount as people read a bill: cents from 1 up, else four significant digits."""
    return f"{amount:.2f}" if abs(amount) >= 1 else f"{amount:.4g}"


def _none(table: PriceTable, *, missing: str, strategy: str = "STANDARD") -> Estimate:
    """No figure, and why."""
    return Estimate(None, table.currency, table.date, missing=missing, strategy=strategy)


def _priced(
    table: PriceTable, rate: Rate, seconds: float, strategy: str, standard: float | None = None
) -> Estimate:
    """``seconds`` at ``rate``: no figure where the rate misses a row, and the rows it trusted unsourced."""
    amount = rate.per_hour * seconds / 3600 if rate.known else None
    return Estimate(
        amount,
        table.currency,
        table.date,
        standard,
        rate.unknown,
        seconds=seconds,
        strategy=strategy,
        unverified=rate.unverified,
    )


def _billed(table: PriceTable, spans: Iterable[float]) -> float:
    return sum(table.billed_seconds(seconds) for seconds in spans)


def _spans(view: Mapping[str, Any], now: float | None) -> tuple[list[float], str]:
    """Each billed span of the job (each trial's, for a tuning job), or why they cannot be read."""
    state = JobState.parse(view.get("state"))
    if not view.get("is_hyperparameter_tuning_job"):
        if not view.get("start_time"):
            ended_unstarted = state.is_terminal or state is JobState.QUEUED or state is JobState.PREPARING
            return ([], "") if ended_unstarted else ([], "the job's startTime is missing")
        ran = seconds_between(
            view.get("start_time"), view.get("end_time"), None if state.is_terminal else now
        )
        if ran is None:
            return [], "the job's endTime is missing" if state.is_terminal else "the job has not ended"
        return [ran], ""
    trials = view.get("trials") or []  # none yet, as a get answers (a list leaves them out: get it)
    spans: list[float] = []
    for trial in trials:
        if not trial.get("startTime"):
            continue  # requested, never started: not billed
        ended = trial.get("endTime")
        ran = seconds_between(trial.get("startTime"), ended, None if (ended or state.is_terminal) else now)
        if ran is None:
            return [], f"trial {trial.get('trialId')}'s endTime is missing"
        spans.append(ran)
    return spans, ""


def estimate(view: Mapping[str, Any], table: PriceTable, now: float | None = None) -> Estimate:
    """The job's cost so far (``now`` while it runs; its end once ended), as the module says."""
    usage = view.get("usage")
    if not usage:
        return _none(table, missing=f"the machines of job {view.get('job_id')} are not known")
    strategy = "STANDARD" if usage.get("reserved") else str(usage.get("strategy") or "STANDARD")
    spans, missing = _spans(view, now)
    if missing:
        return _none(table, missing=missing, strategy=strategy)
    if not spans:  # never ran: nothing billed, whatever its machines cost
        return Estimate(0.0, table.currency, table.date, strategy=strategy)
    region = str(view.get("region") or "")
    seconds = _billed(table, spans)
    rate = table.job_rate(usage, region)
    standard: float | None = None
    if strategy != "STANDARD":
        plain = table.job_rate(usage, region, "STANDARD")
        standard = plain.per_hour * seconds / 3600 if plain.known else None
    return _priced(table, rate, seconds, strategy, standard)


@dataclass(frozen=True)
class Total:
    """The sum of several jobs' estimates (a ladder's rungs, a task's tries); unknown if any part is."""

    amount: float | None
    currency: str
    table_date: str
    parts: tuple[Estimate, ...] = field(default=())

    @property
    def unverified(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(row for part in self.parts for row in part.unverified))

    def to_json(self) -> dict[str, Any]:
        amount = None if self.amount is None else round(self.amount, 6)
        return {
            "amount": amount,
            "currency": self.currency,
            "estimate": True,
            "table_date": self.table_date,
            "unverified": list(self.unverified),
        }

    def text(self) -> str:
        if self.amount is None:
            why = next(part.why_none for part in self.parts if not part.known)
            return f"no estimate ({why}; price table of {self.table_date})"
        source = f"estimate, price table of {self.table_date}{unverified_text(self.unverified)}"
        return f"{self.currency} {money(self.amount)} ({source})"


def total(estimates: Iterable[Estimate], table: PriceTable) -> Total:
    """Σ of the parts; None (no figure) when any part has none: a sum with a hole is not a total."""
    parts = tuple(estimates)
    known = all(part.known for part in parts)
    amount = sum(part.amount or 0.0 for part in parts) if known else None
    return Total(amount, table.currency, table.date, parts)


def worst_case(usage: Mapping[str, Any] | None, region: str, table: PriceTable) -> Estimate:
    """What the job costs at most: every trial running to ``scheduling.timeout`` at its rates."""
    if not usage:
        return _none(table, missing="the job's machines are not known")
    timeout = float(usage.get("timeout_seconds") or 0.0)
    seconds = table.billed_seconds(timeout) * int(usage.get("max_trials") or 1)
    rate = table.job_rate(usage, region)
    strategy = str(usage.get("strategy") or "STANDARD")
    return _priced(table, rate, seconds, strategy)


def burn_per_hour(view: Mapping[str, Any], table: PriceTable) -> float | None:
    """The most the job can spend per hour from now: one trial's rate x trials run at once."""
    usage = view.get("usage")
    if not usage:
        return None
    rate = table.job_rate(usage, str(view.get("region") or ""))
    return rate.per_hour * int(usage.get("parallel_trials") or 1) if rate.known else None

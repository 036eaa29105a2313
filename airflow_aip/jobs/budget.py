"""A budget that stops a training job: the argument's rules and the guard's decisions, pure.

A task's budget is in the price table's currency, per job (for a capacity ladder, for the whole
climb). What counts against it: this job's running estimate (:func:`airflow_aip.jobs.cost.estimate`)
plus what earlier tries of the same run spent (``spent_before``, read back from their jobs by the
adapter, never from Airflow's state). The rules, each decided here once:

- **Before submit**: a worst case (every trial at its rates until ``scheduling.timeout``) over
  what is left is logged, or refuses the submit when the task asks (``refuse``).
- **A ladder** never climbs to a rung whose worst case passes what is left.
- **While waiting**: each read of a job is judged; past the budget the task cancels the job once
  and fails with a line giving the estimate, the budget and the table's date.
- **No guess**: a job whose times or prices cannot be read gets no estimate; the guard says so
  once and never cancels on it. Reads that fail (an outage) are not judged at all: the outage
  rules of :mod:`airflow_aip.jobs.waiting` stand.
- **Between reads** the guard says when the budget could next be passed at the most the job can
  spend per hour (one trial's rate x trials at once): a waiter in the triggerer reads the job
  then, rather than at every poll. A triggerer restart loses nothing: the estimate is the job's
  own times, not a count kept in memory.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.cost import Estimate, burn_per_hour, estimate, money
from airflow_aip.jobs.pricing import PriceTable
from airflow_aip.jobs.states import JobState


@dataclass(frozen=True)
class Budget:
    """At most ``amount`` of ``currency`` for a task's job (or its ladder's jobs)."""

    amount: float
    currency: str

    def text(self) -> str:
        return f"{self.currency} {money(self.amount)}"

    def to_json(self) -> dict[str, Any]:
        return {"amount": self.amount, "currency": self.currency}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Budget | None:
        return None if not data else cls(float(data["amount"]), str(data["currency"]))


def check_budget(amount: object, currency: object, table: PriceTable) -> Budget | None:
    """The task's budget, or None for none; a ValidationError naming the argument otherwise.

    ``amount`` may be a rendered template (a string that reads as a number). ``currency`` None
    means the table's.
    """
    if amount is None or amount == "":
        return None
    if isinstance(amount, bool):
        raise ValidationError("budget", f"must be a number of {table.currency}, got {amount!r}")
    try:
        value = float(amount)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValidationError("budget", f"must be a number of {table.currency}, got {amount!r}") from None
    if not math.isfinite(value):
        raise ValidationError("budget", f"must be a finite number, got {amount!r}")
    if value < 0:
        raise ValidationError("budget", f"must be 0 or more, got {amount!r}")
    chosen = table.currency if currency in (None, "") else currency
    if not isinstance(chosen, str) or not table.has_currency(chosen):
        raise ValidationError(
            "budget_currency",
            f"the price table ({table.describe()}) is in {table.currency}; got {currency!r}",
        )
    return Budget(value, chosen)


@dataclass(frozen=True)
class Verdict:
    """The guard's word on one read: ``over`` (cancel and fail with ``line``), and lines to log."""

    over: bool
    estimate: Estimate
    spent: float | None  # this job's estimate + spent_before; None when there is none
    line: str = ""
    logs: tuple[str, ...] = ()
    check_at: float | None = None  # when the budget could next be passed (None: no need to look)
    blind: bool = False  # no estimate could be made: said once


def over_line(job_id: str, spent: float, budget: Budget, spent_before: float, table: PriceTable) -> str:
    """The line a task over budget fails with: the estimate, the budget, the table's date."""
    earlier = f" (earlier tries {money(spent_before)})" if spent_before else ""
    return (
        f"Training job {job_id} is over its budget: estimated {budget.currency} {money(spent)} spent"
        f"{earlier}, budget {budget.text()}; {table.describe()}; the job is cancelled"
    )


def judge(
    view: Mapping[str, Any],
    budget: Budget,
    table: PriceTable,
    *,
    now: float,
    spent_before: float = 0.0,
    blind_said: bool = False,
) -> Verdict:
    """The guard's decision on one successful read of a job (see the module docstring)."""
    job_id = str(view.get("job_id") or view.get("name") or "")
    figure = estimate(view, table, now)
    if not figure.known:
        if JobState.parse(view.get("state")).is_terminal or blind_said:
            return Verdict(False, figure, None, blind=True)
        line = (
            f"Budget of training job {job_id}: {figure.text()}; "
            "the budget is not enforced while the estimate cannot be made (never cancelled on a guess)"
        )
        return Verdict(False, figure, None, logs=(line,), blind=True)
    spent = (figure.amount or 0.0) + spent_before
    state = JobState.parse(view.get("state"))
    if spent > budget.amount and not state.is_terminal:
        return Verdict(True, figure, spent, over_line(job_id, spent, budget, spent_before, table))
    burn = burn_per_hour(view, table)
    check_at = None
    if not state.is_terminal and burn and view.get("start_time"):
        check_at = now + (budget.amount - spent) / burn * 3600
    return Verdict(False, figure, spent, check_at=check_at)


@dataclass(frozen=True)
class Preflight:
    """Before a submit: ``refused`` (raise with ``line``), or go on, logging ``line`` when not empty."""

    refused: bool
    line: str
    worst: Estimate


def preflight(
    worst: Estimate, budget: Budget, *, spent_before: float = 0.0, refuse: bool = False, what: str = "job"
) -> Preflight:
    """The worst case of the ``what`` about to be created against what is left of the budget."""
    left = budget.amount - spent_before
    if left <= 0:
        line = f"The budget {budget.text()} is spent: earlier tries cost {money(spent_before)} (estimate)"
        return Preflight(True, line, worst)
    if not worst.known:
        line = f"Budget {budget.text()}: the {what}'s worst case is unknown ({worst.why_none}); submitting"
        return Preflight(False, line, worst)
    amount = worst.amount or 0.0
    if amount <= left:
        return Preflight(False, "", worst)
    verb = "refused" if refuse else "submitted all the same; the guard cancels it past the budget"
    line = (
        f"The {what}'s worst case, {worst.currency} {money(amount)} (every trial until scheduling.timeout, "
        f"price table of {worst.table_date}), is over the {money(left)} left of the budget "
        f"{budget.text()}: {verb}"
    )
    return Preflight(refuse, line, worst)


_NOTHING = Estimate(0.0, "", "")  # what a guard without a budget says of a read it need not price


@dataclass
class Guard:
    """One wait's guard: the budget (None: costs are only reported), and what it has said so far.

    The runners of the wait step (worker and triggerer) hold one and show it every successful
    read (:meth:`observe`); it keeps only what it has said (the job's last state, whether it said
    it cannot estimate) and when to look next (``check_at``). What was spent is always read
    again from the job's own times.
    """

    table: PriceTable
    budget: Budget | None = None
    spent_before: float = 0.0
    blind_said: bool = False
    check_at: float | None = None
    last_state: str | None = None

    def observe(self, view: Mapping[str, Any], now: float) -> Verdict:
        """The verdict on a read, with a cost line when the job's state changed."""
        state = str(view.get("state"))
        changed, self.last_state = state != self.last_state, state
        if self.budget is None:
            self.check_at = None
            if not changed or not view.get("start_time"):  # nothing new, or nothing spent yet: no line
                return Verdict(False, _NOTHING, 0.0)
            figure = estimate(view, self.table, now)
            return Verdict(False, figure, figure.amount, logs=(self.cost_line(view, figure),))
        verdict = judge(
            view, self.budget, self.table, now=now, spent_before=self.spent_before, blind_said=self.blind_said
        )
        self.blind_said = self.blind_said or verdict.blind
        self.check_at = verdict.check_at
        if changed and not verdict.over and not verdict.logs:
            verdict = replace(verdict, logs=(self.cost_line(view, verdict.estimate),))
        return verdict

    def cost_line(self, view: Mapping[str, Any], figure: Estimate) -> str:
        """``Training job j1 (RUNNING): cost so far USD 0.12 (estimate, ...); budget USD 5``."""
        budget = f"; budget {self.budget.text()}" if self.budget is not None else ""
        earlier = f", earlier tries {money(self.spent_before)}" if self.spent_before else ""
        return (
            f"Training job {view.get('job_id')} ({view.get('state')}): "
            f"cost so far {figure.text()}{earlier}{budget}"
        )

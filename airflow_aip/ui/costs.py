"""What a job cost, as the UI's pages draw it: the estimate's text, each rung's and trial's part,
and the cumulative cost over time for the Training job tab's small chart.

Everything comes from the summary in XCom (``cost``, the rungs' ``cost``, the trials' times and
``usage``) and the one estimate (:mod:`airflow_aip.jobs.cost`): no API call while a page renders.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from airflow_aip.jobs.cost import Estimate, money, total, unverified_text
from airflow_aip.jobs.pricing import PriceTable
from airflow_aip.jobs.times import epoch_seconds, seconds_between


def cost_text(summary: Mapping[str, Any]) -> str | None:
    """``USD 0.12 (estimate, price table of …)``, or why there is none; None for an older summary."""
    cost = summary.get("ladder_cost") or summary.get("cost")
    if not isinstance(cost, Mapping):
        return None
    if "missing" not in cost and "unknown" not in cost:  # a ladder's total
        amount = cost.get("amount")
        if amount is None:
            return f"no estimate (a rung has none; price table of {cost.get('table_date')})"
        figure = f"{cost.get('currency')} {money(float(amount))}"
        unverified = unverified_text(cost.get("unverified") or ())
        return f"{figure} (estimate, price table of {cost.get('table_date')}{unverified})"
    return Estimate.from_json(cost).text()


def _parts(summary: Mapping[str, Any], table: PriceTable) -> list[dict[str, Any]]:
    """Each part that billed: a ladder's rungs, else a tuning job's trials, else the job itself."""
    rungs = [r for r in summary.get("ladder") or [] if isinstance(r, Mapping) and r.get("cost")]
    if rungs:
        return [
            {
                "label": f"rung {r.get('rung')} {r.get('label')}",
                "cost": r["cost"].get("amount"),
                "times": None,
            }
            for r in rungs
        ]
    usage, region = summary.get("usage"), str(summary.get("region") or "")
    rate = table.job_rate(usage, region) if usage else None
    if summary.get("is_hyperparameter_tuning_job"):
        out = []
        for trial in summary.get("trials") or []:
            ran = seconds_between(trial.get("startTime"), trial.get("endTime"))
            cost = rate.per_hour * table.billed_seconds(ran) / 3600 if rate and rate.known and ran else None
            times = (trial.get("startTime"), trial.get("endTime"))
            out.append({"label": f"trial {trial.get('trialId')}", "cost": cost, "times": times})
        return out
    cost = (summary.get("cost") or {}).get("amount")
    return [{"label": "the job", "cost": cost, "times": (summary.get("start_time"), summary.get("end_time"))}]


def cost_series(parts: Iterable[Mapping[str, Any]]) -> list[list[float]]:
    """The cumulative cost over time, ``[[seconds from the first start, cost so far], ...]``: each
    part spends evenly from its start to its end (its rate is constant)."""
    spans = []
    for part in parts:
        times, cost = part.get("times"), part.get("cost")
        start, end = (epoch_seconds(times[0]), epoch_seconds(times[1])) if times else (None, None)
        if start is not None and end is not None and cost is not None:
            spans.append((start, end, float(cost)))
    if not spans:
        return []
    t0 = min(start for start, _, _ in spans)
    moments = sorted({t for start, end, _ in spans for t in (start, end)})

    def spent(at: float) -> float:
        return sum(
            c * min(1.0, max(0.0, (at - s) / (e - s))) if e > s else c * (at >= e) for s, e, c in spans
        )

    return [[round(at - t0, 3), round(spent(at), 6)] for at in moments]


def cost_view(summary: Mapping[str, Any]) -> dict[str, Any] | None:
    """The Training job tab's cost block: the text, each part (rung or trial) and the chart's series."""
    text = cost_text(summary)
    if text is None:
        return None
    table = PriceTable.load()
    parts = _parts(summary, table)
    return {
        "text": text,
        "parts": [{"label": p["label"], "text": _amount(p["cost"], table)} for p in parts if len(parts) > 1],
        "series": cost_series(parts),
        "currency": table.currency,
    }


def _amount(amount: Any, table: PriceTable) -> str:
    return f"{table.currency} {money(float(amount))}" if amount is not None else "no estimate"


def run_total(summaries: Iterable[Mapping[str, Any]]) -> str | None:
    """The run tab's total: every job's estimate summed (None when no job says what it cost)."""
    costs = [s.get("ladder_cost") or s.get("cost") for s in summaries]
    parts = [Estimate.from_json(c) for c in costs if isinstance(c, Mapping)]
    if not parts:
        return None
    return total(parts, PriceTable.load()).text()

"""How long a job waited and ran, from the RFC 3339 times in its neutral view, pure.

Both APIs give ``createTime``, ``startTime`` and ``endTime`` with up to nine fractional digits
(which ``datetime.fromisoformat`` refuses before Python 3.11), so they are read here, once, for
the wait step, the capacity ladder, the UI and the local service.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from airflow_aip.jobs.logs import normalize_timestamp


def epoch_seconds(value: object) -> float | None:
    """An RFC 3339 time as UNIX seconds (nanoseconds kept as far as a float does), or None."""
    normalized = normalize_timestamp(value)
    if normalized is None:
        return None
    return _whole_seconds(normalized).timestamp() + float(f"0.{normalized[20:29]}")


def instant(value: object) -> datetime | None:
    """An RFC 3339 time as a UTC datetime, to the microsecond (finer digits cut), or None.

    What a datetime can hold of a stamp with up to nine fractional digits, on any Python.
    """
    normalized = normalize_timestamp(value)
    if normalized is None:
        return None
    return _whole_seconds(normalized).replace(microsecond=int(normalized[20:26]))


def _whole_seconds(normalized: str) -> datetime:
    return datetime.strptime(normalized[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)


def seconds_between(began: object, ended: object, now: float | None = None) -> float | None:
    """Seconds from ``began`` to ``ended`` (RFC 3339), or to ``now`` while it has not ended."""
    start, end = epoch_seconds(began), epoch_seconds(ended)
    if start is None:
        return None
    if end is None:
        return None if now is None else max(0.0, now - start)
    return max(0.0, end - start)


def queued_seconds(view: Mapping[str, Any], now: float | None) -> float | None:
    """How long the job waited for its machines: createTime to startTime (or to its end, or now)."""
    if view.get("start_time"):
        return seconds_between(view.get("create_time"), view.get("start_time"))
    return seconds_between(view.get("create_time"), view.get("end_time"), now)


def ran_seconds(view: Mapping[str, Any], now: float | None) -> float | None:
    """How long the job ran: startTime to endTime (or now); None before it started."""
    return seconds_between(view.get("start_time"), view.get("end_time"), now)

"""Timestamps the way the ml v1 API writes them (RFC 3339, UTC, ``Z``), and back.

Every time the service stores or returns goes through here, so records, trials and log
entries compare as strings and as instants alike.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from airflow_aip.jobs.times import instant

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)


def now() -> datetime:
    """The current instant, timezone-aware UTC."""
    return datetime.now(timezone.utc)


def rfc3339(when: datetime | None = None) -> str:
    """``2024-05-01T12:00:00.123456Z``: microseconds always present, so strings sort by time."""
    moment = (when or now()).astimezone(timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_rfc3339(text: str) -> datetime:
    """The instant an RFC 3339 string names (nanoseconds cut to microseconds); ValueError on anything else.

    Read by :func:`airflow_aip.jobs.times.instant`, which takes nine fractional digits on any Python.
    """
    parsed = instant(text)
    if parsed is None:
        raise ValueError(f"not an RFC 3339 time with a timezone: {text!r}")
    return parsed


def instant_micros(text: str) -> int | None:
    """Microseconds since the epoch of an RFC 3339 string (None if it is not one): instants as integers.

    Ordered exactly as :func:`parse_rfc3339`'s datetimes, in 8 bytes: what a log index bisects.
    """
    try:
        return (parse_rfc3339(text) - _EPOCH) // _MICROSECOND
    except (ValueError, TypeError, AttributeError, OverflowError):
        return None

"""One RFC 3339 reader (:func:`airflow_aip.jobs.times.instant`), which the local service's clock uses too."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from airflow_aip.jobs.times import instant
from airflow_aip.local.clock import instant_micros, parse_rfc3339, rfc3339

NOON = datetime(2024, 5, 1, 12, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("text", "micros"),
    [
        ("2024-05-01T12:00:00Z", 0),
        ("2024-05-01T12:00:00.5Z", 500000),
        ("2024-05-01T12:00:00.123456789Z", 123456),  # Vertex's nanoseconds: cut, not refused
        ("2024-05-01T14:00:00.123456789+02:00", 123456),
        ("2024-05-01t12:00:00.000001z", 1),
    ],
)
def test_any_fraction_reads_to_the_microsecond(text: str, micros: int) -> None:
    assert instant(text) == parse_rfc3339(text) == NOON.replace(microsecond=micros)


@pytest.mark.parametrize("text", ["2024-05-01T12:00:00", "2024-05-01", "noon", ""])
def test_a_time_without_a_timezone_or_not_rfc3339_is_refused(text: str) -> None:
    assert instant(text) is None
    with pytest.raises(ValueError, match="not an RFC 3339 time"):
        parse_rfc3339(text)
    assert instant_micros(text) is None


def test_what_the_service_writes_reads_back() -> None:
    assert parse_rfc3339(rfc3339(NOON)) == NOON
    assert instant_micros("1970-01-01T00:00:01.000002999Z") == 1_000_002

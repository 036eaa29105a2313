"""The pure log-stream model: timestamps, cursor and dedup, format, rate limit, drain rule."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.logs import (
    DrainRule,
    LogCursor,
    LogStream,
    RateLimit,
    check_lines_per_minute,
    entry_id,
    entry_level,
    format_entry,
    log_filter,
    normalize_timestamp,
)

T0 = "2024-05-01T12:00:00.000000000Z"


def entry(insert_id: str, second: float, text: str = "", **extra: Any) -> dict[str, Any]:
    whole, fraction = divmod(second, 1)
    stamp = f"2024-05-01T12:00:{int(whole):02d}.{round(fraction * 1e6):06d}Z"
    return {
        "insertId": insert_id,
        "timestamp": stamp,
        "severity": "INFO",
        "textPayload": text or insert_id,
        "resource": {"type": "ml_job", "labels": {"job_id": "j1", "task_name": "master-replica-0"}},
        **extra,
    }


def texts(lines: Sequence[tuple[str, str]]) -> list[str]:
    return [text.rsplit(" ", 1)[-1] for _level, text in lines]


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("2024-05-01T12:00:00Z", "2024-05-01T12:00:00.000000000Z"),
        ("2024-05-01T12:00:00.5Z", "2024-05-01T12:00:00.500000000Z"),
        ("2024-05-01T12:00:00.123456789Z", "2024-05-01T12:00:00.123456789Z"),
        ("2024-05-01T12:00:00.1234567891Z", "2024-05-01T12:00:00.123456789Z"),
        ("2024-05-01T14:00:00.25+02:00", "2024-05-01T12:00:00.250000000Z"),
        ("2024-05-01t12:00:00z", "2024-05-01T12:00:00.000000000Z"),
    ],
)
def test_timestamps_normalize_to_sortable_utc_nanoseconds(raw: str, normal: str) -> None:
    assert normalize_timestamp(raw) == normal


@pytest.mark.parametrize("raw", [None, 17, "", "yesterday", "2024-13-01T00:00:00Z", "2024-05-01T12:00:00"])
def test_non_rfc3339_is_none(raw: Any) -> None:
    assert normalize_timestamp(raw) is None


def test_each_entry_once_across_overlapping_polls_in_order() -> None:
    stream = LogStream("j1")
    first = stream.accept([entry("a", 1), entry("b", 2), entry("c", 2)], now=0)
    assert texts(first.lines) == ["a", "b", "c"]
    assert stream.cursor == LogCursor("2024-05-01T12:00:02.000000000Z", {"b", "c"})
    # The next poll asks timestamp>= the cursor: b and c come back, with a late d at the same instant.
    second = stream.accept([entry("b", 2), entry("c", 2), entry("d", 2), entry("e", 3)], now=1)
    assert texts(second.lines) == ["d", "e"]
    assert second.new == 2
    assert stream.cursor.insert_ids == {"e"}
    assert stream.accept([entry("e", 3)], now=2).lines == []
    assert stream.accept([entry("a", 1)], now=3).lines == []  # older than the cursor: seen


def test_precision_differences_do_not_reorder_or_repeat() -> None:
    stream = LogStream("j1")
    stream.accept([{**entry("x", 0), "timestamp": "2024-05-01T12:00:05.5Z"}], now=0)
    again = {**entry("x", 0), "timestamp": "2024-05-01T12:00:05.500000000Z"}
    earlier = {**entry("y", 0), "timestamp": "2024-05-01T12:00:05Z"}
    assert stream.accept([again, earlier], now=1).lines == []


def test_entries_without_insert_id_are_deduplicated_by_content() -> None:
    bare = {k: v for k, v in entry("ignored", 1, "same").items() if k != "insertId"}
    assert entry_id(bare) == entry_id(dict(bare))
    stream = LogStream("j1")
    assert len(stream.accept([bare], now=0).lines) == 1
    assert stream.accept([bare], now=1).lines == []


def test_filter_names_the_job_and_the_cursor() -> None:
    assert log_filter("j1", LogCursor()) == 'resource.type="ml_job" AND resource.labels.job_id="j1"'
    assert log_filter("j1", LogCursor(T0, {"a"})).endswith(f' AND timestamp>="{T0}"')


def test_for_job_starts_at_create_time_unless_a_cursor_is_given() -> None:
    assert LogStream.for_job("j1", "2024-05-01T12:00:00Z").cursor.timestamp == T0
    assert LogStream.for_job("j1", None).cursor.timestamp == ""
    resumed = LogStream.for_job("j1", "2024-05-01T11:00:00Z", LogCursor(T0, {"a"}))
    assert resumed.cursor == LogCursor(T0, {"a"})


def test_cursor_json_round_trip_and_validation() -> None:
    cursor = LogCursor(T0, {"b", "a"})
    data = cursor.to_json()
    assert data == {"timestamp": T0, "insert_ids": ["a", "b"]}
    assert LogCursor.from_json(data) == cursor
    assert LogCursor.from_json(None) == LogCursor()
    assert LogCursor.from_json({"timestamp": "2024-05-01T12:00:00Z"}).timestamp == T0
    for bad in ({"timestamp": "soon"}, {"timestamp": T0, "insert_ids": "a"}, {"insert_ids": [1]}, ["x"]):
        with pytest.raises(ValidationError) as err:
            LogCursor.from_json(bad)  # type: ignore[arg-type]
        assert err.value.field == "log_cursor"


def test_format_carries_task_and_trial_and_the_level_carries_severity() -> None:
    """One timestamp and one level per relayed line: the relaying logger's, at the entry's severity."""
    trial = entry("a", 1, "step 1", labels={"ml.googleapis.com/trial_id": "3"}, severity="ERROR")
    assert format_entry(trial) == "[master-replica-0 trial 3] step 1"
    assert entry_level(trial) == "error"
    service = {"timestamp": "t", "textPayload": "Job state: RUNNING\n", "resource": {"type": "ml_job"}}
    assert format_entry(service) == "[service] Job state: RUNNING"
    assert entry_level(service) == "info"  # DEFAULT
    levels = {s: entry_level({"severity": s}) for s in ("DEBUG", "NOTICE", "WARNING", "CRITICAL", "ALERT")}
    assert levels == {
        "DEBUG": "info",
        "NOTICE": "info",
        "WARNING": "warning",
        "CRITICAL": "error",
        "ALERT": "error",
    }
    stream = LogStream("j1")
    shown = stream.accept([trial], now=0)
    assert shown.lines == [("info", "[master-replica-0 trial 3] step 1")]  # stderr, but no error in it
    assert "2024" not in shown.lines[0][1]
    structured = {"timestamp": "t", "severity": "INFO", "jsonPayload": {"message": "hello", "x": 1}}
    assert format_entry(structured).endswith("[service] hello")
    other = {"timestamp": "t", "severity": "INFO", "jsonPayload": {"b": 2, "a": 1}}
    assert format_entry(other).endswith('[service] {"a":1,"b":2}')


def test_rate_limit_bursts_then_refills_per_minute() -> None:
    rate = RateLimit(60)
    assert rate.take(100, now=0) == 60
    assert rate.take(10, now=0) == 0
    assert rate.take(10, now=5) == 5  # 60 a minute = 1 a second
    assert rate.take(1000, now=10_000) == 60  # never more than one burst, however long the pause
    assert rate.take(1, now=9_000) == 0  # a clock going back refills nothing


def test_over_the_limit_the_first_and_last_lines_are_shown_around_the_dropped_count() -> None:
    stream = LogStream("j1", lines_per_minute=5)
    shown = stream.accept([entry(f"e{i:02d}", i) for i in range(12)], now=0)
    assert shown.new == 12
    assert shown.dropped == 7
    assert texts(shown.lines[:3]) == ["e00", "e01", "e02"]
    assert shown.lines[3] == (
        "warning",
        "... 7 lines dropped (rate limit: 5 lines/minute, see max_log_lines_per_minute)",
    )
    assert texts(shown.lines[4:]) == ["e10", "e11"]
    starved = stream.accept([entry("z1", 20)], now=0)  # no token left: only the count
    assert starved.lines == [
        ("warning", "... 1 lines dropped (rate limit: 5 lines/minute, see max_log_lines_per_minute)")
    ]
    # The dropped lines are behind the cursor: they are never shown later either.
    assert stream.accept([entry(f"e{i:02d}", i) for i in range(12)], now=600).lines == []
    refilled = stream.accept([entry("z1", 20), entry("z2", 21), entry("z3", 22)], now=600)
    assert texts(refilled.lines) == ["z2", "z3"]


@pytest.mark.parametrize("bad", [0, -5, 1.5, "100", True, None])
def test_lines_per_minute_must_be_a_positive_whole_number(bad: Any) -> None:
    with pytest.raises(ValidationError) as err:
        check_lines_per_minute(bad)
    assert err.value.field == "max_log_lines_per_minute"
    with pytest.raises(ValidationError):
        LogStream("j1", lines_per_minute=bad)
    assert check_lines_per_minute(1) == 1


def test_drain_stops_at_the_first_empty_poll_settled_after_the_end() -> None:
    rule = DrainRule(ended_at=100.0, settle=5.0, max_seconds=60.0)
    assert not rule.finished(100.0, new=0, more=False)  # right at the end: ingestion may lag
    assert not rule.finished(105.0, new=3, more=False)  # brought lines: poll again
    assert not rule.finished(106.0, new=0, more=True)  # a page cap left more to read
    assert not rule.finished(107.0, new=0, more=False, failed=True)
    assert rule.finished(110.0, new=0, more=False)
    assert not rule.exhausted


def test_drain_gives_up_after_max_seconds() -> None:
    busy = DrainRule(ended_at=0.0, settle=1.0, max_seconds=60.0)
    assert busy.finished(60.0, new=5, more=False)
    assert busy.exhausted
    quiet = DrainRule(ended_at=0.0, settle=1.0, max_seconds=60.0)
    assert quiet.finished(61.0, new=0, more=False)
    assert not quiet.exhausted


def test_a_429_pauses_the_streams_reads_doubling_up_to_five_minutes_until_a_read_succeeds() -> None:
    stream = LogStream("j1")
    assert stream.may_read(0)
    assert [stream.throttled(0) for _ in range(7)] == [10, 20, 40, 80, 160, 300, 300]
    assert not stream.may_read(299.9)
    assert stream.may_read(300)
    stream.accept([], now=400)  # a read that went through
    assert stream.may_read(400)
    assert stream.throttled(400) == 10  # the pause starts over


def test_read_notices_the_first_failure_every_tenth_and_the_recovery() -> None:
    stream = LogStream("j1")
    notices = [stream.read_failed("ApiError: HTTP 503") for _ in range(20)]
    assert [n + 1 for n, notice in enumerate(notices) if notice] == [1, 10, 20]
    assert notices[0] == (
        "warning",
        "Could not read the logs of training job j1 (ApiError: HTTP 503); retrying at the next poll, "
        "nothing is lost",
    )
    assert stream.read([entry("a", 1)], now=0).lines == [
        ("info", "Reading the logs of training job j1 again"),
        ("info", "[master-replica-0] a"),
    ]
    assert stream.read([entry("b", 2)], now=0).lines == [("info", "[master-replica-0] b")]


def test_a_drain_no_read_could_decide_is_overdue_at_its_limit() -> None:
    rule = DrainRule(ended_at=0.0, settle=5.0, max_seconds=60.0)
    assert not rule.overdue(59.9)
    assert rule.notice("j1") is None
    assert rule.overdue(60.0)
    assert rule.exhausted
    assert rule.notice("j1") == (
        "warning",
        "Stopped reading the logs of training job j1 60s after it ended; the rest is in Cloud Logging",
    )

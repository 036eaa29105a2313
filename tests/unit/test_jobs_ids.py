"""Job IDs and states: the API's ID rule, the timestamp, attempts, terminal states."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs import (
    JOB_ID_MAX_LENGTH,
    TERMINAL_STATES,
    JobState,
    attempt_of,
    make_job_id,
    sanitize_prefix,
    validate_job_id,
    with_attempt,
)

WHEN = datetime(2024, 3, 9, 7, 5, 1, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("train", "train"),
        ("my-dag.train model", "my_dag_train_model"),
        ("a--..--b", "a_b"),
        ("keep__double", "keep__double"),
        ("9lives", "job_9lives"),
        ("_x", "x"),
        ("---", "job"),
        ("é", "job"),
    ],
)
def test_sanitize_prefix(prefix: str, expected: str) -> None:
    assert sanitize_prefix(prefix) == expected


def test_make_job_id_is_prefix_and_utc_timestamp() -> None:
    paris = timezone(timedelta(hours=1))
    assert make_job_id("dag.task", WHEN.astimezone(paris)) == "dag_task_20240309_070501"
    assert make_job_id("dag", WHEN.replace(tzinfo=None)) == "dag_20240309_070501"


def test_make_job_id_suffix() -> None:
    assert make_job_id("dag", WHEN, "r2") == "dag_20240309_070501_r2"
    assert make_job_id("dag", WHEN, "_r3") == "dag_20240309_070501_r3"


def test_long_prefix_is_shortened_never_the_timestamp_or_suffix() -> None:
    job_id = make_job_id("x" * 300, WHEN, "r12")
    assert len(job_id) == JOB_ID_MAX_LENGTH
    assert job_id.endswith("_20240309_070501_r12")
    assert validate_job_id(job_id) == job_id


def test_make_job_id_output_always_validates() -> None:
    for prefix in ["", "1", "a" * 200, "ü-ñ", "__a__", "A.B.C"]:
        validate_job_id(make_job_id(prefix, WHEN, "r2"))


@pytest.mark.parametrize(
    ("job_id", "rule"),
    [
        ("", "must not be empty"),
        ("a" * 129, "at most 128 characters"),
        ("bad-id", "only letters, digits and underscores; found '-'"),
        ("1abc", "must start with a letter"),
        ("_abc", "must start with a letter"),
    ],
)
def test_validate_job_id_names_the_rule(job_id: str, rule: str) -> None:
    with pytest.raises(ValidationError, match=rule) as err:
        validate_job_id(job_id, "job_id")
    assert err.value.field == "job_id"


def test_validate_job_id_accepts_the_limit() -> None:
    assert validate_job_id("a" * 128) == "a" * 128


def test_attempts() -> None:
    assert with_attempt("job_1", 1) == "job_1"
    assert with_attempt("job_1", 2) == "job_1_r2"
    assert with_attempt("job_1_r2", 3) == "job_1_r3"
    assert with_attempt("job_1_r5", 1) == "job_1"
    assert len(with_attempt("a" * 128, 7)) == 128
    assert attempt_of("job_1_r3") == 3
    assert attempt_of("job_1") == 1
    with pytest.raises(ValidationError):
        with_attempt("job", 0)


def test_states() -> None:
    assert {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED} == TERMINAL_STATES
    assert not JobState.CANCELLING.is_terminal
    assert not JobState.QUEUED.is_terminal
    assert JobState.SUCCEEDED.is_success
    assert not JobState.FAILED.is_success
    assert JobState.CANCELLED.is_failure
    assert not JobState.CANCELLING.is_failure
    assert JobState.parse("RUNNING") is JobState.RUNNING
    assert JobState.parse(None) is JobState.STATE_UNSPECIFIED
    assert JobState.parse("SOMETHING_NEW") is JobState.STATE_UNSPECIFIED
    assert JobState.RUNNING == "RUNNING"
    assert str(JobState.FAILED) == "FAILED"

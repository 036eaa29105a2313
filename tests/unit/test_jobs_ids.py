"""Job IDs and states: the API's ID rule, the timestamp, the hash, attempts, terminal states."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs import (
    JOB_ID_MAX_LENGTH,
    MAX_ATTEMPTS,
    TERMINAL_STATES,
    JobState,
    attempt_of,
    job_id_for_task,
    make_job_id,
    sanitize_prefix,
    validate_job_id,
    validate_pinned_job_id,
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


def test_long_prefix_is_cut_never_the_timestamp_and_keeps_a_hash_of_what_it_dropped() -> None:
    a, b = make_job_id("x" * 300 + "a", WHEN), make_job_id("x" * 300 + "b", WHEN)
    assert a != b
    for job_id in (a, b):
        assert len(job_id) == JOB_ID_MAX_LENGTH - len(f"_r{MAX_ATTEMPTS}")  # room for any attempt
        assert re.fullmatch(r"x+_20240309_070501_[0-9a-f]{12}", job_id)
        assert validate_job_id(with_attempt(job_id, MAX_ATTEMPTS)) == job_id + f"_r{MAX_ATTEMPTS}"
    assert make_job_id("x" * 300 + "a", WHEN) == a  # stable


def test_distinct_by_adds_a_hash_and_map_index_stays_visible() -> None:
    one, two = (make_job_id("dag", WHEN, distinct_by=(run,)) for run in ("run1", "run2"))
    assert one != two
    assert re.fullmatch(r"dag_20240309_070501_[0-9a-f]{12}", one)
    mapped = make_job_id("y" * 300, WHEN, map_index=7, distinct_by=("r",))
    assert re.fullmatch(r"y+_7_20240309_070501_[0-9a-f]{12}", mapped)
    with pytest.raises(ValidationError) as err:
        make_job_id("dag", WHEN, map_index=-2)
    assert err.value.field == "map_index"


def test_make_job_id_output_always_validates() -> None:
    for prefix in ["", "1", "a" * 200, "ü-ñ", "__a__", "A.B.C", "_" * 300, "9" * 300]:
        for distinct_by in ((), ("run",)):
            job_id = make_job_id(prefix, WHEN, map_index=12345, distinct_by=distinct_by)
            validate_job_id(with_attempt(job_id, MAX_ATTEMPTS))


def task_id_of(run_id: str, map_index: int = -1, prefix: str | None = None) -> str:
    return job_id_for_task(prefix, WHEN, dag_id="dag", task_id="train", run_id=run_id, map_index=map_index)


def test_1000_map_indexes_under_a_200_character_prefix_give_1000_distinct_valid_ids() -> None:
    ids = [task_id_of("manual__2024-03-09T07:05:01+00:00", i, prefix="p" * 200) for i in range(1000)]
    assert len(set(ids)) == 1000
    for job_id in ids:
        assert validate_job_id(with_attempt(job_id, 2)) == job_id + "_r2"
        assert "_20240309_070501_" in job_id  # still timestamped


def test_two_runs_in_one_second_differ_and_a_retry_keeps_its_id() -> None:
    first, second = "manual__2024-03-09T07:05:01.120000+00:00", "manual__2024-03-09T07:05:01.870000+00:00"
    assert task_id_of(first) != task_id_of(second)
    assert task_id_of(first) == task_id_of(first)  # a retry: same run, same map index
    assert task_id_of(first).startswith("dag_train_20240309_070501_")
    # dag and task ids are hashed apart: "a_b"/"c" is not "a"/"b_c"
    ab_c = job_id_for_task(None, WHEN, dag_id="a_b", task_id="c", run_id="r")
    a_bc = job_id_for_task(None, WHEN, dag_id="a", task_id="b_c", run_id="r")
    assert ab_c != a_bc


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


def test_a_pinned_job_id_must_not_end_in_an_attempt_suffix() -> None:
    assert validate_pinned_job_id("model_r3x") == "model_r3x"
    for pinned in ("model_r3", "model_r1"):
        with pytest.raises(ValidationError, match="must not end in _r<number>") as err:
            validate_pinned_job_id(pinned)
        assert err.value.field == "job_id"


def test_attempts() -> None:
    assert with_attempt("job_1", 1) == "job_1"
    assert with_attempt("job_1", 2) == "job_1_r2"
    assert with_attempt("job_1_r2", 3) == "job_1_r3"
    assert with_attempt("job_1_r5", 1) == "job_1"
    assert len(with_attempt("a" * 128, 7)) == 128
    assert with_attempt("a" * 127 + "b", 7) != with_attempt("a" * 127 + "c", 7)  # the cut keeps a hash
    assert attempt_of(with_attempt("a" * 128, 7)) == 7
    assert attempt_of("job_1_r3") == 3
    assert attempt_of("job_1") == 1
    with pytest.raises(ValidationError):
        with_attempt("job", 0)


def test_states() -> None:
    ended = {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.PAUSED, JobState.EXPIRED}
    assert ended == TERMINAL_STATES
    assert JobState.PAUSED.is_failure
    assert JobState.EXPIRED.is_failure
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

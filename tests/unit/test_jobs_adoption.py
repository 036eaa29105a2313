"""The adoption rule: who made an existing job with our ID, and what the submit path does with it.

Pure: a requested body and an existing job in, a decision out. Each row of the table in
``airflow_aip.jobs.adoption`` is a case here, under each ``if_exists``.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs import (
    CLOCK_SKEW,
    RUN_ID_LABEL,
    TRY_LABEL,
    Action,
    Owner,
    Tries,
    airflow_labels,
    decide_adoption,
    spec_differences,
)
from airflow_aip.jobs.mlv1.view import view_from_ml

RUN = "manual__2026-03-09T07:05:01.120000+00:00"
SENT = 1_773_039_901.0  # 2026-03-09T07:05:01Z, when the create was first sent
AT_SENT = "2026-03-09T07:05:01.500000Z"
TRAINING_INPUT = {
    "region": "us-central1",
    "packageUris": ["gs://b/trainer-0.1.tar.gz"],
    "pythonModule": "trainer.task",
    "args": ["--epochs", "2"],
}


def requested(run_id: str = RUN, map_index: int = -1, **labels: str) -> dict[str, Any]:
    return {
        "trainingInput": dict(TRAINING_INPUT),
        "labels": airflow_labels("dag", "train", run_id, labels, map_index),
    }


def existing(state: str = "RUNNING", create_time: str = AT_SENT, **changes: Any) -> dict[str, Any]:
    """The job as the API returns it: our body plus server-filled fields, with ``changes``."""
    job = {**requested(), "jobId": "j", "state": state, "createTime": create_time}
    job["trainingInput"] = {**job["trainingInput"], "scaleTier": "BASIC", "runtimeVersion": "2.11"}
    return {**job, **changes}


def neutral(body: dict[str, Any]) -> dict[str, Any]:
    """What the submit path compares (``JobRequest.compared``) for an ml v1 body."""
    return {
        "backend": "ai_platform",
        "spec": {"trainingInput": body["trainingInput"]},
        "labels": body["labels"],
    }


def decide(job: dict[str, Any], if_exists: str = "adopt", first_sent: float | None = None, **kw: Any) -> Any:
    body = neutral(kw.get("body") or requested())
    view = view_from_ml(job)
    return decide_adoption(body, view, if_exists=if_exists, first_sent=first_sent, tries=kw.get("tries"))


def differences(body: dict[str, Any], job: dict[str, Any]) -> list[str]:
    return spec_differences(neutral(body), view_from_ml(job))


# -- this very call's create (its answer was lost; the 409 answered a re-send) ---------------


@pytest.mark.parametrize("if_exists", ["adopt", "new", "fail"])
@pytest.mark.parametrize("state", ["QUEUED", "RUNNING", "FAILED"])
def test_this_calls_own_create_is_adopted_whatever_if_exists_says(if_exists: str, state: str) -> None:
    decision = decide(existing(state), if_exists, first_sent=SENT)
    assert (decision.action, decision.owner) == (Action.ADOPT, Owner.THIS_CALL)


@pytest.mark.parametrize(
    "create_time",
    [
        "2026-03-09T07:04:02.000000001Z",  # within CLOCK_SKEW before the first send, nanoseconds
        "2026-03-09T08:05:01+01:00",  # another offset, the same instant
        "not a time",  # unreadable: the spec and labels are all there is to go by
    ],
)
def test_this_call_is_recognised_across_clock_skew_and_formats(create_time: str) -> None:
    assert decide(existing(create_time=create_time), "new", first_sent=SENT).owner is Owner.THIS_CALL


def test_a_job_older_than_the_first_send_is_an_earlier_try_not_this_call() -> None:
    older = "2026-03-09T07:03:00.123456789Z"  # 121 s before SENT: beyond CLOCK_SKEW
    assert CLOCK_SKEW < 121
    decision = decide(existing("FAILED", create_time=older), "adopt", first_sent=SENT)
    assert (decision.action, decision.owner) == (Action.NEXT_ATTEMPT, Owner.EARLIER_TRY)
    assert decide(existing(create_time=older), "fail", first_sent=SENT).action is Action.FAIL_EXISTS


def test_a_first_send_409_is_never_this_call() -> None:
    assert decide(existing(), "new", first_sent=None).action is Action.NEXT_ATTEMPT


def test_a_resend_409_on_a_job_with_other_labels_is_not_this_call() -> None:
    other = existing(labels={**requested()["labels"], "team": "a"})
    decision = decide(other, "adopt", first_sent=SENT)
    assert (decision.action, decision.owner) == (Action.FAIL_MISMATCH, Owner.EARLIER_TRY)
    assert decision.differing == ("labels.team",)


# -- someone else's job: another run, task or map index, or no Airflow labels ----------------


@pytest.mark.parametrize(
    "labels",
    [
        requested(run_id="manual__2026-03-09T07:05:01.870000+00:00")["labels"],  # another run
        requested(map_index=4)["labels"],  # another map index of the same task
        {"team": "a"},  # not made by an Airflow task
    ],
)
@pytest.mark.parametrize("state", ["RUNNING", "SUCCEEDED"])
def test_someone_elses_job_is_never_adopted(labels: dict[str, str], state: str) -> None:
    job = existing(state, labels=labels)
    for first_sent in (None, SENT):
        decision = decide(job, "adopt", first_sent)
        assert (decision.action, decision.owner) == (Action.NEXT_ATTEMPT, Owner.SOMEONE_ELSE)
        assert decide(job, "new", first_sent).action is Action.NEXT_ATTEMPT
        assert decide(job, "fail", first_sent).action is Action.FAIL_EXISTS


# -- an earlier try of this task instance ----------------------------------------------------


@pytest.mark.parametrize("state", ["QUEUED", "PREPARING", "RUNNING", "SUCCEEDED", "STATE_UNSPECIFIED"])
def test_an_earlier_trys_live_or_succeeded_job_with_our_spec_is_adopted(state: str) -> None:
    decision = decide(existing(state))
    assert (decision.action, decision.owner) == (Action.ADOPT, Owner.EARLIER_TRY)
    assert decide(existing(state), "new").action is Action.NEXT_ATTEMPT
    assert decide(existing(state), "fail").action is Action.FAIL_EXISTS


@pytest.mark.parametrize("state", ["FAILED", "CANCELLED", "CANCELLING"])
def test_an_earlier_trys_job_that_will_not_succeed_gives_the_next_attempt(state: str) -> None:
    assert decide(existing(state)).action is Action.NEXT_ATTEMPT
    # even when the spec changed since: fixing a failed task and clearing it must work
    changed = existing(state, trainingInput={**TRAINING_INPUT, "args": ["--epochs", "3"]})
    assert decide(changed).action is Action.NEXT_ATTEMPT


def test_an_earlier_trys_job_with_another_spec_is_a_mismatch_naming_fields_and_labels() -> None:
    job = existing(
        trainingInput={**TRAINING_INPUT, "args": ["--epochs", "3"], "region": "eu"},
        labels={**requested()["labels"], "team": "b"},
    )
    decision = decide(job, body=requested(team="a"))
    assert (decision.action, decision.owner) == (Action.FAIL_MISMATCH, Owner.EARLIER_TRY)
    assert decision.differing == ("args", "region", "labels.team")
    assert "differing fields: args, region, labels.team" in decision.describe("j", "RUNNING")
    assert decide(job, "new", body=requested(team="a")).action is Action.NEXT_ATTEMPT


def test_spec_differences_ignores_server_defaults() -> None:
    assert differences(requested(), existing()) == []
    assert differences(requested(), existing(labels={})) == [
        f"labels.{key}" for key in sorted(requested()["labels"])
    ]
    assert RUN_ID_LABEL in requested()["labels"]


def test_if_exists_must_be_known() -> None:
    with pytest.raises(ValidationError) as err:
        decide(existing(), "replace")
    assert err.value.field == "if_exists"


# -- a retry resumes, a user's clear asks for a new run ----------------------------------------


@pytest.mark.parametrize(
    ("try_number", "max_tries", "retries", "first", "cleared"),
    [
        (1, 2, 2, 1, False),  # the task instance's first try
        (2, 2, 2, 1, False),  # a retry
        (3, 2, 2, 1, False),  # the last retry
        (4, 5, 2, 4, True),  # cleared after try 3: max_tries = 3 + 2, the next try is 4
        (5, 5, 2, 4, False),  # a retry after that clear
        (2, 1, 0, 2, True),  # retries=0, cleared after try 1
        (2, 0, 0, 1, False),  # a running task cleared: restarted, max_tries untouched: a retry
    ],
)
def test_tries_read_a_clear_from_airflows_try_numbers(
    try_number: int, max_tries: int, retries: int, first: int, cleared: bool
) -> None:
    tries = Tries.of(try_number, max_tries, retries)
    assert (tries.first, tries.cleared) == (first, cleared)


def made_by_try(state: str, try_number: int | None) -> dict[str, Any]:
    labels = {**requested()["labels"]}
    if try_number is not None:
        labels[TRY_LABEL] = str(try_number)
    return existing(state, labels=labels)


@pytest.mark.parametrize("state", ["SUCCEEDED", "FAILED", "CANCELLED"])
def test_after_a_clear_a_job_that_ended_before_it_is_trained_anew(state: str) -> None:
    cleared = Tries.of(4, 5, 2)  # first try since the clear: 4
    decision = decide(made_by_try(state, 3), tries=cleared)
    assert (decision.action, decision.owner) == (Action.NEXT_ATTEMPT, Owner.BEFORE_CLEAR)
    assert "made by a try before this task instance was cleared: next attempt" in decision.describe(
        "j", state
    )
    # "always_adopt" restores adopting it (a SUCCEEDED job is waited on again, nothing retrains)
    expected = Action.ADOPT if state == "SUCCEEDED" else Action.NEXT_ATTEMPT
    assert decide(made_by_try(state, 3), "always_adopt", tries=cleared).action is expected
    assert decide(made_by_try(state, 3), "fail", tries=cleared).action is Action.FAIL_EXISTS


@pytest.mark.parametrize("state", ["QUEUED", "PENDING", "RUNNING"])
def test_after_a_clear_a_job_still_running_is_adopted(state: str) -> None:
    decision = decide(made_by_try(state, 3), tries=Tries.of(4, 5, 2))
    assert (decision.action, decision.owner) == (Action.ADOPT, Owner.EARLIER_TRY)


def test_a_retry_after_a_clear_adopts_the_job_made_since_the_clear() -> None:
    retry = Tries.of(5, 5, 2)  # the clear's first try was 4; this is its retry
    assert decide(made_by_try("SUCCEEDED", 4), tries=retry).action is Action.ADOPT
    assert decide(made_by_try("SUCCEEDED", 3), tries=retry).action is Action.NEXT_ATTEMPT


@pytest.mark.parametrize("try_number", [None, 1])
def test_a_retry_adopts_a_succeeded_job_as_before(try_number: int | None) -> None:
    """No clear, or a job without a try label (an older provider made it): the retry rule."""
    assert decide(made_by_try("SUCCEEDED", try_number), tries=Tries.of(2, 2, 2)).action is Action.ADOPT
    assert decide(made_by_try("SUCCEEDED", None), tries=Tries.of(4, 5, 2)).action is Action.ADOPT


def test_the_try_label_is_never_a_spec_difference() -> None:
    assert differences(requested(), made_by_try("RUNNING", 7)) == []

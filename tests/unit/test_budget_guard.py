"""The budget argument's rules and each guard decision (airflow_aip.jobs.budget)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.budget import Budget, check_budget, judge, preflight
from airflow_aip.jobs.cost import estimate, worst_case
from airflow_aip.jobs.pricing import PriceTable
from airflow_aip.jobs.vertex.view import view_from_vertex

TABLE = PriceTable.load()
START = 1767225600.0  # 2026-01-01T00:00:00Z
RATE = 0.21849885 + 100 * 0.1955 / 730  # n1-standard-4 with its default boot disk, per hour


def running(machine: str = "n1-standard-4", state: str = "JOB_STATE_RUNNING", **extra: Any) -> dict[str, Any]:
    resource = {
        "name": "projects/p/locations/us-central1/customJobs/1",
        "displayName": "j1",
        "state": state,
        "startTime": "2026-01-01T00:00:00Z",
        "jobSpec": {"workerPoolSpecs": [{"machineSpec": {"machineType": machine}, "replicaCount": 1}]},
        **extra,
    }
    return view_from_vertex(resource, project_id="p", region="us-central1")


@pytest.mark.parametrize(
    ("amount", "currency", "field"),
    [
        (-1, None, "budget"),
        ("lots", None, "budget"),
        (float("nan"), None, "budget"),
        (True, None, "budget"),
        ([5], None, "budget"),
        (5, "EUR", "budget_currency"),
        (5, 3, "budget_currency"),
    ],
)
def test_a_bad_budget_names_its_argument(amount: object, currency: object, field: str) -> None:
    with pytest.raises(ValidationError) as raised:
        check_budget(amount, currency, TABLE)
    assert raised.value.field == field


def test_a_budget_reads_rendered_templates_and_none_is_none() -> None:
    assert check_budget("2.5", None, TABLE) == Budget(2.5, "USD")
    assert check_budget(0, "USD", TABLE) == Budget(0.0, "USD")
    assert check_budget(None, None, TABLE) is None
    assert Budget.from_json(Budget(1.0, "USD").to_json()) == Budget(1.0, "USD")


def test_under_budget_the_guard_says_when_to_look_again() -> None:
    verdict = judge(running(), Budget(1.0, "USD"), TABLE, now=START + 1800)
    assert not verdict.over
    assert verdict.logs == ()
    assert verdict.spent == pytest.approx(RATE / 2)
    # at this job's rate, USD 1 is reached 1/RATE hours after its start
    assert verdict.check_at == pytest.approx(START + 3600 / RATE, abs=31)


def test_past_budget_the_guard_cancels_with_the_line() -> None:
    verdict = judge(running(), Budget(0.1, "USD"), TABLE, now=START + 3600, spent_before=0.05)
    assert verdict.over
    assert "over its budget" in verdict.line
    assert "budget USD 0.1" in verdict.line
    assert "earlier tries 0.05" in verdict.line
    assert TABLE.date in verdict.line


def test_earlier_tries_count() -> None:
    assert not judge(running(), Budget(0.2, "USD"), TABLE, now=START + 600).over
    assert judge(running(), Budget(0.2, "USD"), TABLE, now=START + 600, spent_before=0.19).over


def test_a_job_that_ended_is_never_cancelled() -> None:
    ended = running(state="JOB_STATE_SUCCEEDED", endTime="2026-01-01T10:00:00Z")
    verdict = judge(ended, Budget(0.01, "USD"), TABLE, now=START + 36000)
    assert not verdict.over
    assert verdict.check_at is None


def test_no_estimate_no_cancel_said_once() -> None:
    unknown = running("n9-imaginary-4")
    first = judge(unknown, Budget(0.0, "USD"), TABLE, now=START + 3600)
    assert not first.over
    assert first.blind
    assert "n9-imaginary-4" in first.logs[0]
    assert "never cancelled on a guess" in first.logs[0]
    again = judge(unknown, Budget(0.0, "USD"), TABLE, now=START + 7200, blind_said=True)
    assert not again.over
    assert again.logs == ()


def test_before_submit_a_worst_case_over_budget_is_logged_or_refused() -> None:
    worst = worst_case(running()["usage"], "us-central1", TABLE)  # 7 days by default
    logged = preflight(worst, Budget(1.0, "USD"))
    assert not logged.refused
    assert "worst case" in logged.line
    assert "submitted all the same" in logged.line
    refused = preflight(worst, Budget(1.0, "USD"), refuse=True)
    assert refused.refused
    assert "refused" in refused.line
    assert preflight(worst, Budget(1000.0, "USD")).line == ""


def test_before_submit_a_spent_budget_refuses_and_an_unknown_worst_case_goes_on() -> None:
    worst = worst_case(running()["usage"], "us-central1", TABLE)
    assert preflight(worst, Budget(1.0, "USD"), spent_before=1.0).refused
    unknown = worst_case(running("n9-imaginary-4")["usage"], "us-central1", TABLE)
    went = preflight(unknown, Budget(1.0, "USD"), refuse=True)
    assert not went.refused
    assert "unknown" in went.line


def test_the_estimate_of_a_restarted_guard_is_the_jobs_own() -> None:
    """A triggerer restart keeps nothing in memory: the same read gives the same estimate."""
    view = running()
    assert estimate(view, TABLE, START + 900).amount == estimate(dict(view), TABLE, START + 900).amount


def test_an_outage_never_cancels_for_cost_and_a_read_past_budget_does() -> None:
    """The runners' guard (hooks.waiting): a failed read is not judged; a read past budget ends the wait."""
    import logging

    from airflow_aip.hooks.waiting import SyncWait
    from airflow_aip.jobs.budget import Guard
    from airflow_aip.jobs.waiting import Seen

    wait = SyncWait(
        None,
        None,
        "j1",
        "p",
        job_name="projects/p/locations/us-central1/customJobs/1",
        poll_interval=30.0,
        deadline=None,
        log=logging.getLogger("test"),
        guard=Guard(TABLE, Budget(0.01, "USD")),
    )
    outage = wait.decide(Seen.failure(ConnectionError("reset"), transient=True))
    assert outage.action == "wait"
    over = wait.decide(Seen(running()))  # started 2026-01-01: long past USD 0.01 by now
    assert over.action == "over_budget"
    assert "over its budget" in over.error
    assert wait.event(over)["status"] == "over_budget"


def test_without_a_budget_the_cost_is_logged_once_a_job_runs_and_at_each_change_after() -> None:
    from airflow_aip.jobs.budget import Guard

    guard = Guard(TABLE)
    queued = running(state="JOB_STATE_QUEUED")
    del queued["start_time"]
    assert guard.observe(queued, START).logs == ()  # nothing spent yet: no line
    first = guard.observe(running(), START + 1800)
    assert first.logs == (f"Training job j1 (RUNNING): cost so far {first.estimate.text()}",)
    assert guard.observe(running(), START + 1900).logs == ()  # no change: no line
    assert not first.over
    assert guard.check_at is None

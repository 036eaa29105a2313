"""The trigger's hold: no event before ``[aip] deferral_hold`` has passed since the deferral.

Airflow's executor-event race (apache/airflow#67287) fails a task whose trigger fires before the
scheduler has read the deferring worker's SUCCESS; the proof that the hold closes it is the e2e
race test (tests/e2e/test_deferral_race.py). Here: when a task holds, and that a held event is
never yielded early, whatever the job did.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from airflow.sdk.execution_time import task_runner
from airflow.sdk.execution_time.supervisor import InProcessSupervisorComms

from airflow_aip.triggers.hold import release_at, runs_in_process
from tests.fixtures.logging_api import RecordingLog
from tests.fixtures.trigger import events_of, make_trigger
from tests.unit.ml_fake import FakeMlApi

NOW = 1_800_000_000.0


def test_a_task_holds_its_triggers_event_for_the_configured_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__AIP__DEFERRAL_HOLD", "12")
    assert release_at(lambda: NOW) == NOW + 12
    monkeypatch.setenv("AIRFLOW__AIP__DEFERRAL_HOLD", "0")  # turned off
    assert release_at(lambda: NOW) is None
    monkeypatch.delenv("AIRFLOW__AIP__DEFERRAL_HOLD")
    assert release_at(lambda: NOW) == NOW + 12  # the default


def test_a_task_run_in_process_by_dag_test_never_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    """dag.test() runs the task and its trigger in one process: no executor, no late SUCCESS."""
    assert not runs_in_process()
    comms: Any = object.__new__(InProcessSupervisorComms)
    monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", comms, raising=False)
    assert runs_in_process()
    assert release_at(lambda: NOW) is None


@pytest.mark.parametrize(("state", "status"), [("SUCCEEDED", "success"), ("FAILED", "failed")])
async def test_an_early_ending_is_held_until_release_and_said_once(
    api: FakeMlApi,
    state: str,
    status: str,
) -> None:
    api.add_job("proj", "j1", state, errorMessage="boom")
    release = time.time() + 0.3
    trigger = make_trigger(api, release_at=release)
    trigger.__dict__["_log"] = log = RecordingLog()  # LoggingMixin.log reads _log
    (event,) = await events_of(trigger)
    assert time.time() >= release  # never before: the scheduler must have read the deferral
    assert event["status"] == status
    held = [text for _, text in log.records if "[aip] deferral_hold" in text]
    assert len(held) == 1, log.records
    assert held[0].startswith("Training job j1: its event waits ")
    assert "apache/airflow#67287" in held[0]


async def test_an_ending_after_the_release_is_not_held(api: FakeMlApi) -> None:
    api.add_job("proj", "j1", "SUCCEEDED")
    trigger = make_trigger(api, release_at=time.time() - 1)
    trigger.__dict__["_log"] = log = RecordingLog()  # LoggingMixin.log reads _log
    (event,) = await events_of(trigger)
    assert event["status"] == "success"
    assert not [text for _, text in log.records if "deferral_hold" in text]

"""Capacity met by a tuning job's trials (each its own CustomJob on Vertex): a stockout at a trial's
start, Spot reclaims of a trial; and reservations as stockout keys. Trials are fakes driven by polls."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs import JobState
from airflow_aip.local.capacity import STOCKOUT_MESSAGE, CapacitySettings, RegionCapacity
from airflow_aip.local.capacity_admin import parse_stockout
from airflow_aip.local.capacity_needs import needs_of, reservation_name
from airflow_aip.local.executor.provisioning import Provisioning
from airflow_aip.local.executor.runner import AttemptOutcome
from airflow_aip.local.executor.trials import TuningRun
from airflow_aip.local.log_entries import JobLog
from airflow_aip.local.store import JobStore
from tests.fixtures.capacity import job_record, machine_pool

TAG = "training/hptuning/metric"
SPEC = {
    "goal": "MAXIMIZE",
    "algorithm": "GRID_SEARCH",
    "maxTrials": 4,
    "params": [{"parameterName": "x", "type": "INTEGER", "minValue": 1, "maxValue": 4}],
}


class FakeTrial:
    """A trial's attempt: reports ``x``, succeeds at its ``polls``-th poll; ``each_poll`` runs first."""

    primary = "workerpool0-0"

    def __init__(self, work: Path, x: str, polls: int, each_poll: Any = None) -> None:
        self.processes = {self.primary: None}
        self.master_metric_file = work / "output.metrics"
        work.mkdir(parents=True, exist_ok=True)
        self.x, self.polls, self.each_poll = float(x), polls, each_poll

    def refs(self) -> list[dict[str, int]]:
        return []

    def stop(self) -> None:
        self.polls = -1

    def poll(self) -> AttemptOutcome | None:
        if self.each_poll is not None:
            self.each_poll()
        self.polls -= 1
        if self.polls:
            return None
        report = {TAG: self.x, "global_step": 100, "timestamp": time.time()}
        self.master_metric_file.write_text(json.dumps(report) + "\n")
        return AttemptOutcome(0, self.primary, "")


def _run(
    tmp_path: Path, record: dict[str, Any], capacity: RegionCapacity, start: Any, **spec: Any
) -> TuningRun:
    store = JobStore(tmp_path)
    store.create("p", record)
    log = JobLog(store, "p", record["jobId"])
    gate = Provisioning(capacity, record, store, log, poll_interval=0.0)
    return TuningRun(SPEC | spec, TAG, "p/1", start, lambda _: None, lambda _: None, log, gate=gate)


def test_a_stockout_stops_the_next_trial_and_fails_the_job_keeping_the_ended_trials(tmp_path: Path) -> None:
    capacity = RegionCapacity()
    record = job_record(machine_pool(), kind="hyperparameterTuningJobs")

    def start(trial: str, hp: dict[str, str]) -> FakeTrial:
        # Trial 1 ends at its first poll, and the region runs out of its machine then; trial 2 runs on.
        out = {("us-central1", "n1-standard-4")}
        return FakeTrial(
            tmp_path / trial, hp["x"], 1 if trial == "1" else 3, lambda: capacity.set_stockouts(out)
        )

    run = _run(tmp_path, record, capacity, start, maxParallelTrials=2)
    state, message = run.run(lambda: False, 0.0)
    assert (state, message) == (JobState.FAILED, STOCKOUT_MESSAGE.format(region="us-central1"))
    assert run.error_fields == {"errorCode": 8}
    assert [(t["trialId"], t["state"]) for t in run.trials] == [("1", "SUCCEEDED"), ("2", "SUCCEEDED")]
    assert all("finalMetric" in t for t in run.trials)  # the running trial ended on its own
    said = [e["message"] for e in JobStore(tmp_path).read_log("p", "1")]
    assert (
        "Stockout: us-central1 has no n1-standard-4 to provision for trial 3 (aip-local --stockout)" in said
    )


def test_a_spot_trial_restarts_and_past_the_limit_fails_the_job_with_code_8(tmp_path: Path) -> None:
    capacity = RegionCapacity(CapacitySettings(preempt_spot_after=0.0))  # each trial's first attempt
    record = job_record(machine_pool(), kind="hyperparameterTuningJobs", strategy="SPOT")

    def start(trial: str, hp: dict[str, str]) -> FakeTrial:
        return FakeTrial(tmp_path / trial, hp["x"], 2)

    run = _run(tmp_path / "once", record, capacity, start, maxTrials=2)
    assert run.run(lambda: False, 0.0) == (JobState.SUCCEEDED, "")
    assert JobStore(tmp_path / "once").get("p", "1")["spotPreemptions"] == 2  # one per trial
    capacity = RegionCapacity()
    capacity.acquire(("p", "1"), needs_of(record))

    def reclaimed_always(trial: str, hp: dict[str, str]) -> FakeTrial:
        return FakeTrial(tmp_path / trial, hp["x"], 5, lambda: capacity.preempt("1"))

    run = _run(tmp_path / "always", record, capacity, reclaimed_always, maxTrials=2)
    state, message = run.run(lambda: False, 0.0)
    assert state is JobState.FAILED
    assert message.startswith("Trial 1's Spot VMs were preempted 7 times")
    assert run.error_fields == {"errorCode": 8}
    assert [t["state"] for t in run.trials] == ["FAILED"]


def test_a_specific_reservation_is_a_stockout_key_and_any_reservation_is_not(tmp_path: Path) -> None:
    def on(kind: str, *values: str) -> dict[str, Any]:
        pool = machine_pool()
        pool["machineSpec"]["reservationAffinity"] = {
            "reservationAffinityType": kind,
            "key": "compute.googleapis.com/reservation-name",
            "values": list(values),
        }
        return job_record(pool)

    specific = needs_of(on("SPECIFIC_RESERVATION", "projects/p/zones/us-central1-a/reservations/res-a"))
    assert specific.reservations == {"res-a"}
    assert not needs_of(on("ANY_RESERVATION")).reservations
    assert reservation_name("projects/p/zones/z/reservations/r/reservationBlocks/b") == "r"
    assert reservation_name("res-b") == "res-b"
    capacity = RegionCapacity(CapacitySettings(stockouts=(parse_stockout("us-central1:res-a"),)))
    assert capacity.stocked_out(specific) == "res-a"
    assert capacity.stocked_out(needs_of(on("SPECIFIC_RESERVATION", "res-b"))) is None
    store = JobStore(tmp_path)
    record = on("SPECIFIC_RESERVATION", "res-a")
    store.create("p", record)
    gate = Provisioning(capacity, record, store, JobLog(store, "p", "1"), 0.0)
    assert gate.before_start(lambda: False) == (
        STOCKOUT_MESSAGE.format(region="us-central1"),
        {"errorCode": 8},
    )
    assert "Stockout: us-central1 has no reservation res-a" in store.read_log("p", "1")[0]["message"]
    with pytest.raises(ValidationError, match="nor a reservation name"):
        parse_stockout("us-central1:n1-standard-5")  # a machine type's typo, not a reservation

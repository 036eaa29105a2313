"""Capacity lost mid-study, and reservations out of stock, on a real ``aip-local serve`` over REST.

A tuning job's trials are each provisioned as a CustomJob, so a stockout set at ``/_capacity``
after a trial succeeded fails the job with code 8 and keeps the trials that ended: what a
client-side capacity ladder needs to go on elsewhere with the remaining trial budget. A job on a
SPECIFIC_RESERVATION listed as a stockout fails in PENDING as a machine stockout does. Nothing is
timed: states are polled with a generous deadline.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from airflow_aip.local.capacity import STOCKOUT_MESSAGE
from tests.fixtures.local_service import LocalService, StagedTrainer, own_service
from tests.fixtures.vertex import LOCATION, VERTEX_TERMINAL, grid_tuning_job, worker_pool
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.integration

RESERVED_OUT = "reserved-out"
FLAGS = ["--fault-admin", f"--stockout={LOCATION}:{RESERVED_OUT}"]
MACHINE_OUT = f"{LOCATION}:n1-standard-4"


service = own_service("service", FLAGS)


@pytest.fixture
def api(service: LocalService) -> Iterator[httpx.Client]:
    project = f"proj-{uuid.uuid4().hex[:10]}"
    with httpx.Client(
        base_url=f"{service.url}v1/projects/{project}/locations/{LOCATION}/", timeout=30
    ) as client:
        yield client


def stockouts(service: LocalService, *names: str) -> None:
    service.admin("_capacity", {"stockouts": list(names)}, "POST")


def create(api: httpx.Client, kind: str, body: dict[str, Any]) -> str:
    """The job's path under ``api``'s base (``customJobs/<id>``)."""
    answer = api.post(kind, json=body)
    assert answer.status_code == 200, answer.text
    return f"{kind}/{answer.json()['name'].rsplit('/', 1)[-1]}"


def first_trial_ended(job: dict[str, Any]) -> bool:
    return job["state"] in VERTEX_TERMINAL or (job.get("trials") or [{}])[0].get("state") == "SUCCEEDED"


def job_once(
    api: httpx.Client, name: str, done: Callable[[dict[str, Any]], bool], timeout: float = 180.0
) -> dict[str, Any]:
    """The job at ``name`` (under ``api``'s base) once ``done(job)``."""
    seen: list[dict[str, Any]] = []

    def arrived() -> dict[str, Any] | None:
        seen.append(api.get(name).json())
        return seen[-1] if done(seen[-1]) else None

    what = f"{name} with {done.__name__.replace('_', ' ')}"  # "... with first trial ended"
    return wait_until(arrived, timeout, what, state=lambda: f"still {seen[-1].get('state')}")


def ended(job: dict[str, Any]) -> bool:
    return job["state"] in VERTEX_TERMINAL


def test_a_stockout_after_the_first_trial_fails_the_tuning_job_keeping_its_trials(
    api: httpx.Client, service: LocalService, staged_trainer: StagedTrainer
) -> None:
    pool = worker_pool(staged_trainer, "tune", ["--hold=2", "--steps=1"])
    body = grid_tuning_job(pool, 4, display_name="ladder-rung")
    name = create(api, "hyperparameterTuningJobs", body)
    job_once(api, name, first_trial_ended)
    stockouts(service, MACHINE_OUT, f"{LOCATION}:{RESERVED_OUT}")
    try:
        job = job_once(api, name, ended)
    finally:
        stockouts(service, f"{LOCATION}:{RESERVED_OUT}")
    assert job["state"] == "JOB_STATE_FAILED"
    assert job["error"] == {"code": 8, "message": STOCKOUT_MESSAGE.format(region=LOCATION)}
    succeeded = [t for t in job["trials"] if t["state"] == "SUCCEEDED"]
    assert 1 <= len(succeeded) < 4
    assert job["trials"][0]["state"] == "SUCCEEDED"
    assert all("finalMeasurement" in t for t in succeeded)
    assert all(t["state"] != "ACTIVE" for t in job["trials"])


def test_a_job_on_a_reservation_out_of_stock_fails_pending_and_one_on_another_runs(
    api: httpx.Client, staged_trainer: StagedTrainer
) -> None:
    def on(reservation: str) -> dict[str, Any]:
        pool = worker_pool(staged_trainer, "sleep", ["--seconds=0.5"])
        pool["machineSpec"]["reservationAffinity"] = {
            "reservationAffinityType": "SPECIFIC_RESERVATION",
            "key": "compute.googleapis.com/reservation-name",
            "values": [reservation],
        }
        return {"displayName": "reserved", "jobSpec": {"workerPoolSpecs": [pool]}}

    out = create(api, "customJobs", on(f"projects/p/zones/{LOCATION}-a/reservations/{RESERVED_OUT}"))
    free = create(api, "customJobs", on("reserved-free"))
    job = job_once(api, out, ended)
    assert job["state"] == "JOB_STATE_FAILED"
    assert job["error"] == {"code": 8, "message": STOCKOUT_MESSAGE.format(region=LOCATION)}
    assert "startTime" not in job  # it never ran
    assert job_once(api, free, ended)["state"] == "JOB_STATE_SUCCEEDED"

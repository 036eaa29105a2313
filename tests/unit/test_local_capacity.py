"""The local region's capacity model (airflow_aip.local.capacity): quotas, stockouts, Flex-Start,
Spot and 429s at create, decided without running a job; and ``/_capacity`` over the real app."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from airflow_aip.exceptions import ValidationError
from airflow_aip.local.api import create_app
from airflow_aip.local.capacity import (
    CapacitySettings,
    RegionCapacity,
    ResourceExhaustedError,
)
from airflow_aip.local.capacity_admin import apply_update, parse_create_429, parse_quota, parse_stockout
from airflow_aip.local.capacity_needs import needs_of
from airflow_aip.local.service import ServiceConfig, TrainingService
from airflow_aip.local.vertex.render import render
from tests.fixtures.capacity import T4, job_record, machine_pool
from tests.unit.clock import Clock

CPUS = "custom_model_training_cpus"


def test_needs_count_vcpus_and_accelerators_per_replica() -> None:
    needs = needs_of(
        job_record(
            machine_pool(gpu="NVIDIA_TESLA_T4"), machine_pool("n1-standard-8", "NVIDIA_TESLA_T4", 2, 3)
        )
    )
    assert dict(needs.amounts) == {CPUS: 4 + 3 * 8, T4: 1 + 3 * 2}
    assert needs.region == "us-central1"
    assert needs.hardware == {"n1-standard-4", "n1-standard-8", "NVIDIA_TESLA_T4"}
    assert needs.max_wait == 24 * 3600  # "The default is 24 hours."


def test_spot_and_flex_start_draw_on_preemptible_quota_and_tuning_multiplies() -> None:
    spot = needs_of(
        job_record(machine_pool(gpu="NVIDIA_TESLA_T4"), strategy="SPOT", restartJobOnWorkerRestart=True)
    )
    assert set(spot.amounts) == {
        "custom_model_training_preemptible_cpus",
        "custom_model_training_preemptible_nvidia_t4_gpus",
    }
    assert spot.spot
    assert spot.restart_job
    flex = needs_of(
        job_record(machine_pool("g2-standard-4", "NVIDIA_L4"), strategy="FLEX_START", maxWaitDuration="0s")
    )
    assert flex.flex_start
    assert flex.max_wait == 0
    tuning = needs_of(job_record(machine_pool(gpu="NVIDIA_TESLA_T4"), kind="hyperparameterTuningJobs"))
    assert tuning.amounts[T4] == 3
    assert not tuning.custom_job


def test_ml_v1_needs_name_hardware_only() -> None:
    job = {"jobId": "j", "trainingInput": {"region": "europe-west4", "masterType": "n1-standard-8",
           "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_TESLA_V100", "count": "1"}}}}  # fmt: skip
    needs = needs_of(job)
    assert needs.hardware == {"n1-standard-8", "NVIDIA_TESLA_V100"}
    assert not needs.amounts
    assert not needs.vertex


def test_quota_is_per_project_and_region_and_says_what_is_short() -> None:
    capacity = RegionCapacity(CapacitySettings(quotas=(("us-central1", T4, 1),)))
    one = needs_of(job_record(machine_pool(gpu="NVIDIA_TESLA_T4")))
    assert capacity.acquire(("p", "1"), one) is None
    assert capacity.acquire(("p", "2"), one) == f"quota {T4} in us-central1: needs 1, 0 of 1 free"
    assert capacity.acquire(("other", "3"), one) is None  # each project has its own quota
    capacity.release(("p", "1"))
    assert capacity.acquire(("p", "2"), one) is None
    assert capacity.snapshot()["inUse"] == {
        "other us-central1": {CPUS: 4, T4: 1},
        "p us-central1": {CPUS: 4, T4: 1},
    }


def test_a_job_past_the_limit_queues_or_is_refused_at_create() -> None:
    capacity = RegionCapacity(CapacitySettings(quotas=(("us-central1", T4, 0),)))
    needs = needs_of(job_record(machine_pool(gpu="NVIDIA_TESLA_T4")))
    capacity.check_create("p", needs)  # queue mode: accepted, it waits
    assert capacity.acquire(("p", "1"), needs) == f"quota {T4} in us-central1: needs 1, 0 of 0 free"
    capacity.quota_mode = "reject"
    with pytest.raises(ResourceExhaustedError, match=f"exceed quota limits: aiplatform.googleapis.com/{T4}$"):
        capacity.check_create("p", needs)
    capacity.check_create("p", needs_of(job_record(machine_pool())))  # CPUs only: within every limit


def test_create_429_rules_are_consumed_in_order() -> None:
    capacity = RegionCapacity(CapacitySettings(create_429=(("quota", 1), ("rate", 2))))
    ml_v1 = needs_of({"jobId": "j", "trainingInput": {"region": "us-central1"}})
    vertex = needs_of(job_record(machine_pool(gpu="NVIDIA_TESLA_T4")))
    with pytest.raises(
        ResourceExhaustedError, match=r"'Resource management \(CRUD\) requests'.*'ml.googleapis.com'"
    ):
        capacity.check_create("p", ml_v1)  # an ml v1 create skips the quota rule
    with pytest.raises(ResourceExhaustedError, match=f"aiplatform.googleapis.com/{T4}"):
        capacity.check_create("p", vertex)
    with pytest.raises(ResourceExhaustedError, match="project_number:123"):
        capacity.check_create("123", vertex)
    assert capacity.snapshot()["create429"] == []
    capacity.check_create("p", vertex)


def test_stockout_flex_start_and_spot_timing() -> None:
    clock = Clock(100.0)
    settings = CapacitySettings(stockouts=(("us-central1", "NVIDIA_TESLA_T4"),), flex_start_after=5.0)
    capacity = RegionCapacity(settings, clock=clock)
    assert (
        capacity.stocked_out(needs_of(job_record(machine_pool(gpu="NVIDIA_TESLA_T4")))) == "NVIDIA_TESLA_T4"
    )
    assert capacity.stocked_out(needs_of(job_record(machine_pool()))) is None
    assert not capacity.flex_start_ready(100.0)
    clock.now = 105.0
    assert capacity.flex_start_ready(100.0)
    assert not capacity.flex_start_ready(101.0)
    capacity.flex_start_after = None  # never, until granted
    assert not capacity.flex_start_ready(100.0)
    capacity.grant_flex_start()
    assert capacity.flex_start_ready(100.0)
    clock.now = 106.0
    assert not capacity.flex_start_ready(105.5)  # a job that waits from after the grant waits again
    capacity.preempt_spot_after = 2.0
    assert capacity.preemption_due("1", 104.0, first_attempt=True)
    assert not capacity.preemption_due("1", 104.0, first_attempt=False)  # the schedule preempts once


def test_preempt_now_only_a_running_spot_custom_job() -> None:
    capacity = RegionCapacity()
    with pytest.raises(ValidationError, match="not a running SPOT CustomJob"):
        capacity.preempt("1")
    capacity.acquire(("p", "1"), needs_of(job_record(machine_pool(), strategy="SPOT")))
    capacity.preempt("1")
    assert capacity.preemption_due("1", capacity.clock(), first_attempt=False)
    assert not capacity.preemption_due("1", capacity.clock(), first_attempt=False)


def test_flags_and_bodies_are_checked_whole() -> None:
    assert parse_quota(f"us-central1:{T4}=2") == ("us-central1", T4, 2)
    assert parse_stockout("us-central1:a2-highgpu-1g") == ("us-central1", "a2-highgpu-1g")
    assert parse_create_429("rate") == ("rate", 1)
    for bad in (f"us-central1:{T4}", "us-central1:nvidia_t4=1", f"central:{T4}=1", f"us-central1:{T4}=-1"):
        with pytest.raises(ValidationError):
            parse_quota(bad)
    with pytest.raises(ValidationError, match="no machine or accelerator type"):
        parse_stockout("us-central1:NVIDIA_TESLA_A1OO")
    capacity = RegionCapacity()
    with pytest.raises(ValidationError):
        apply_update(capacity, {"quotas": {f"us-central1:{T4}": 1}, "stockouts": ["bad"]})
    assert capacity.snapshot()["quotas"] == {}  # nothing applied
    with pytest.raises(ValidationError, match="unknown field"):
        apply_update(capacity, {"quota": {}})
    body = {
        "quotas": {f"us-central1:{T4}": 1},
        "quotaMode": "reject",
        "create429": ["rate:2"],
        "stockouts": ["us-central1:NVIDIA_TESLA_A100"],
        "flexStartCapacityAfter": None,
    }
    apply_update(capacity, body)
    shown = capacity.snapshot()
    assert shown["quotas"] == {f"us-central1:{T4}": 1}
    assert shown["quotaMode"] == "reject"
    assert shown["stockouts"] == ["us-central1:NVIDIA_TESLA_A100"]
    assert shown["create429"] == ["rate:2"]
    assert shown["flexStartCapacityAfter"] is None
    apply_update(capacity, {"quotas": {f"us-central1:{T4}": None}, "stockouts": []})
    assert capacity.snapshot()["quotas"] == {}
    assert capacity.snapshot()["stockouts"] == []


def test_a_failed_job_renders_its_error_code() -> None:
    record = job_record(machine_pool()) | {
        "state": "FAILED",
        "createTime": "2026-01-01T00:00:00Z",
        "errorMessage": "x",
    }
    assert render(record)["error"] == {"code": 3, "message": "x"}
    assert render(record | {"errorCode": 8})["error"] == {"code": 8, "message": "x"}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = CapacitySettings(create_429=(("rate", 1),))
    config = ServiceConfig(tmp_path / "data", storage_url=None, capacity=settings, capacity_admin=True)
    service = TrainingService(config)
    yield TestClient(create_app(service))
    service.stop()


def test_capacity_endpoint_and_429_over_http(client: TestClient, tmp_path: Path) -> None:
    body = {"displayName": "j", "jobSpec": {"workerPoolSpecs": [machine_pool(gpu="NVIDIA_TESLA_T4")]}}
    url = "/v1/projects/proj/locations/us-central1/customJobs"
    refused = client.post(url, json=body)
    assert refused.status_code == 429
    assert refused.json()["error"]["status"] == "RESOURCE_EXHAUSTED"
    assert "Resource management (CRUD) requests per minute per region" in refused.json()["error"]["message"]
    assert (
        client.post(
            "/_capacity", json={"quotaMode": "reject", "quotas": {f"us-central1:{T4}": 0}}
        ).status_code
        == 200
    )
    assert client.post(url, json=body).json()["error"]["message"].endswith(f"aiplatform.googleapis.com/{T4}")
    assert (
        client.post("/_capacity", json={"quotaMode": "maybe"}).json()["error"]["status"] == "INVALID_ARGUMENT"
    )
    assert client.delete("/_capacity").json()["quotas"] == {}
    assert client.post(url, json=body).status_code == 200
    assert client.get("/_capacity").json()["quotaMode"] == "queue"


def test_capacity_writes_need_the_admin_flag(tmp_path: Path) -> None:
    service = TrainingService(ServiceConfig(tmp_path / "data", storage_url=None))
    try:
        client = TestClient(create_app(service))
        assert client.get("/_capacity").status_code == 200
        assert client.post("/_capacity", json={}).status_code == 403
        assert client.delete("/_capacity").status_code == 403
    finally:
        service.stop()

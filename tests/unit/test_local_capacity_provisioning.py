"""What the region's capacity does to one job: the scheduler's quota gate (a job over quota waits,
saying why once) and the executor's hooks (stockout, Flex-Start wait, Spot restarts and their limit)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from airflow_aip.local.capacity import STOCKOUT_MESSAGE, CapacitySettings, RegionCapacity
from airflow_aip.local.capacity_needs import needs_of
from airflow_aip.local.capacity_queue import QuotaGate
from airflow_aip.local.executor.provisioning import Provisioning
from airflow_aip.local.log_entries import JobLog
from airflow_aip.local.store import JobStore
from tests.fixtures.capacity import T4, job_record, machine_pool


def test_the_queue_skips_a_job_over_quota_and_logs_why_once(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    capacity = RegionCapacity(CapacitySettings(quotas=(("us-central1", T4, 0),)))
    gate = QuotaGate(capacity, store)
    queue = []
    for seq, record in enumerate(
        (job_record(machine_pool(gpu="NVIDIA_TESLA_T4"), job_id="1"), job_record(machine_pool(), job_id="2"))
    ):
        store.create("p", record)
        gate.queued(("p", record["jobId"]), needs_of(record))
        queue.append((0, seq, "p", record["jobId"]))
    assert gate.pick(queue) == queue[1]
    assert gate.pick(queue[:1]) is None
    assert gate.pick(queue[:1]) is None
    lines = [entry["message"] for entry in store.read_log("p", "1")]
    assert lines == [f"QUEUED for quota {T4} in us-central1: needs 1, 0 of 0 free"]
    assert store.get("p", "1")["waitingFor"].startswith("quota ")
    capacity.set_quota("us-central1", T4, 1)
    assert gate.pick(queue[:1]) == queue[0]
    assert gate.forget(("p", "1"))
    gate.leaving(("p", "1"))
    assert "waitingFor" not in store.get("p", "1")


def _provisioning(tmp_path: Path, record: dict[str, Any], capacity: RegionCapacity) -> Provisioning:
    store = JobStore(tmp_path)
    store.create("p", record)
    return Provisioning(capacity, record, store, JobLog(store, "p", record["jobId"]), poll_interval=0.01)


def test_spot_restarts_six_times_then_fails_with_code_8(tmp_path: Path) -> None:
    gate = _provisioning(tmp_path, job_record(machine_pool(), strategy="SPOT"), RegionCapacity())
    watch = gate.spot_watch("1")
    assert watch is not None
    assert [watch.preempted("workerpool0-0", 2) for _ in range(6)] == [None] * 6
    failure = watch.preempted("workerpool0-0", 2)
    assert failure is not None
    assert failure[1] == {"errorCode": 8}
    assert "preempted 7 times" in failure[0]
    said = [entry["message"] for entry in gate.store.read_log("p", "1")]
    assert said[0] == (
        "Replica workerpool0-0 was preempted (Spot VM reclaimed); restarting (restart 1 of at most 6); "
        "locally all 2 replicas restart with it"
    )
    assert gate.store.get("p", "1")["spotPreemptions"] == 7
    on_demand = _provisioning(tmp_path / "b", job_record(machine_pool()), RegionCapacity())
    assert on_demand.spot_watch("1") is None


def test_stockouts_fail_before_start_and_ml_v1_gets_no_error_code(tmp_path: Path) -> None:
    capacity = RegionCapacity(CapacitySettings(stockouts=(("us-central1", "NVIDIA_TESLA_V100"),)))
    job = {"jobId": "j", "trainingInput": {"region": "us-central1", "masterType": "n1-standard-8",
           "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_TESLA_V100", "count": "1"}}}}  # fmt: skip
    failure = _provisioning(tmp_path, job, capacity).before_start(lambda: False)
    assert failure == (STOCKOUT_MESSAGE.format(region="us-central1"), {})
    vertex = job_record(machine_pool("n1-standard-8", "NVIDIA_TESLA_V100"))
    assert _provisioning(tmp_path / "v", vertex, capacity).before_start(lambda: False) is not None
    assert (
        _provisioning(tmp_path / "c", job_record(machine_pool()), capacity).before_start(lambda: False)
        is None
    )


def test_a_flex_start_job_waits_until_its_max_wait_or_until_stopped(tmp_path: Path) -> None:
    capacity = RegionCapacity(CapacitySettings(flex_start_after=None))
    record = job_record(
        machine_pool("g2-standard-4", "NVIDIA_L4"), strategy="FLEX_START", maxWaitDuration="0.05s"
    )
    gate = _provisioning(tmp_path, record, capacity)
    failure = gate.before_start(lambda: False)
    assert failure is not None
    assert "scheduling.maxWaitDuration (0.05s)" in failure[0]
    assert "waitingFor" not in gate.store.get("p", "1")
    forever = job_record(
        machine_pool("g2-standard-4", "NVIDIA_L4"), strategy="FLEX_START", maxWaitDuration="0s"
    )
    assert _provisioning(tmp_path / "f", forever, capacity).before_start(lambda: True) is None  # cancelled
    capacity.flex_start_after = 0.0
    assert _provisioning(tmp_path / "g", forever, capacity).before_start(lambda: False) is None

"""A region that lacks things, on purpose: quotas, stockouts, Flex-Start, Spot reclaims and 429s at create.

One ``aip-local serve`` for the module, started with capacity flags and ``--fault-admin``; Google's
Vertex AI SDK (REST transport) drives it, and each test changes the region at ``/_capacity``. Each
test has its own project, and quotas are per project, so the tests do not see each other's jobs.
Nothing is timed: states are polled with a generous deadline.
"""

from __future__ import annotations

import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_aip.local.store import project_number
from tests.fixtures.local_service import LocalService, StagedTrainer, log_entries, own_service
from tests.fixtures.tools import need_module
from tests.fixtures.vertex import IMAGE, LOCATION, VERTEX_TERMINAL, vertex_sdk, wait_for_sdk_state
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.integration
aiplatform = need_module("google.cloud.aiplatform")

T4 = "custom_model_training_nvidia_t4_gpus"
L4 = "custom_model_training_nvidia_l4_gpus"
FLAGS = [
    "--fault-admin",
    f"--quota={LOCATION}:{T4}=0",
    f"--stockout={LOCATION}:NVIDIA_TESLA_A100",
    "--flex-start-capacity-after=never",
    "--preempt-spot-after=1",
]


service = own_service("service", FLAGS, jobs=4)


@pytest.fixture
def project() -> str:
    return f"proj-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def sdk(
    service: LocalService, staged_trainer: StagedTrainer, project: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Any]:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", staged_trainer.gcs_url)
    with vertex_sdk(service.url, project, staged_trainer.bucket, monkeypatch) as client:
        yield client


def capacity(service: LocalService, body: Any = None, method: str = "POST") -> Any:
    return service.admin("_capacity", body, method)


def job(
    sdk: Any, trainer: StagedTrainer, machine: dict[str, Any], seconds: float = 0.5, name: str = "cap"
) -> Any:
    """A CustomJob whose replica sleeps ``seconds`` on ``machine`` (run on the CPU here)."""
    pool = {
        "machine_spec": machine,
        "replica_count": 1,
        "python_package_spec": {
            "executor_image_uri": IMAGE,
            "package_uris": [trainer.package_uri],
            "python_module": "aip_test_trainer.sleep",
            "args": [f"--seconds={seconds}"],
        },
    }
    return sdk.CustomJob(display_name=name, worker_pool_specs=[pool])


def wait_for_line(
    service: LocalService, project: str, custom_job: Any, text: str, timeout: float = 120.0, count: int = 1
) -> None:
    wait_until(
        lambda: len([line for line in lines(service, project, custom_job) if text in line]) >= count,
        timeout,
        f"{count} log lines with {text!r}",
    )


def lines(service: LocalService, project: str, custom_job: Any) -> list[str]:
    job_id = custom_job.resource_name.rsplit("/", 1)[-1]
    return [str(e["textPayload"]) for e in log_entries(service.url, project_number(project), job_id)]


def console(service: LocalService, custom_job: Any) -> str:
    with urllib.request.urlopen(f"{service.url}console/{custom_job.resource_name}", timeout=30) as page:
        return str(page.read().decode())


T4_MACHINE = {"machine_type": "n1-standard-4", "accelerator_type": "NVIDIA_TESLA_T4", "accelerator_count": 1}
L4_MACHINE = {"machine_type": "g2-standard-4", "accelerator_type": "NVIDIA_L4", "accelerator_count": 1}
CPU_MACHINE = {"machine_type": "n1-standard-4"}


def test_a_job_over_quota_stays_queued_until_the_quota_is_raised(
    sdk: Any, service: LocalService, staged_trainer: StagedTrainer, project: str
) -> None:
    gpu = job(sdk, staged_trainer, T4_MACHINE, name="needs-a-t4")
    gpu.submit()
    cpu = job(sdk, staged_trainer, CPU_MACHINE, name="cpu-only")
    cpu.submit()
    assert (
        wait_for_sdk_state(cpu, VERTEX_TERMINAL) == "JOB_STATE_SUCCEEDED"
    )  # the job behind it that fits is not blocked
    waiting = f"QUEUED for quota {T4} in {LOCATION}: needs 1, 0 of 0 free"
    wait_for_line(service, project, gpu, waiting)
    assert gpu.state.name == "JOB_STATE_QUEUED"
    assert "Waiting for" in console(service, gpu)
    capacity(service, {"quotas": {f"{LOCATION}:{T4}": 1}})
    try:
        assert wait_for_sdk_state(gpu, VERTEX_TERMINAL) == "JOB_STATE_SUCCEEDED"
    finally:
        capacity(service, {"quotas": {f"{LOCATION}:{T4}": 0}})
    said = lines(service, project, gpu)
    assert said.count(waiting) == 1  # once, not on every look at the queue


def test_a_stockout_fails_the_job_with_code_8(
    sdk: Any, staged_trainer: StagedTrainer, service: LocalService
) -> None:
    machine = {
        "machine_type": "a2-highgpu-1g",
        "accelerator_type": "NVIDIA_TESLA_A100",
        "accelerator_count": 1,
    }
    custom_job = job(sdk, staged_trainer, machine, name="needs-an-a100")
    with pytest.raises(RuntimeError, match="Resources are insufficient in region: us-central1"):
        custom_job.run(sync=True)
    assert custom_job.state.name == "JOB_STATE_FAILED"
    assert custom_job.error.code == 8
    assert custom_job.error.message == (
        "Resources are insufficient in region: us-central1. Please try a different region. "
        "If you use K80, please consider using P100 or V100 instead."
    )
    assert custom_job.start_time is None  # it never ran
    assert "Error code</th><td>8" in console(service, custom_job)


def test_flex_start_waits_pending_then_fails_at_max_wait_or_runs_when_capacity_comes(
    sdk: Any, service: LocalService, staged_trainer: StagedTrainer, project: str
) -> None:
    flex = sdk.gapic.Scheduling.Strategy.FLEX_START
    short = job(sdk, staged_trainer, L4_MACHINE, name="flex-short")
    short.submit(scheduling_strategy=flex, max_wait_duration=2)
    patient = job(sdk, staged_trainer, L4_MACHINE, name="flex-patient")
    patient.submit(scheduling_strategy=flex, max_wait_duration=600)
    assert wait_for_sdk_state(short, VERTEX_TERMINAL | {"JOB_STATE_PENDING"}) == "JOB_STATE_PENDING"
    assert wait_for_sdk_state(short, VERTEX_TERMINAL) == "JOB_STATE_FAILED"
    assert short.error.code == 8
    assert "within scheduling.maxWaitDuration (2s)" in short.error.message
    assert wait_for_sdk_state(patient, VERTEX_TERMINAL | {"JOB_STATE_PENDING"}) == "JOB_STATE_PENDING"
    wait_for_line(service, project, patient, "PENDING: waiting for Flex-Start")
    assert "Flex-Start (Dynamic Workload Scheduler) capacity" in console(service, patient)
    capacity(service, {"flexStartCapacityNow": True})
    assert wait_for_sdk_state(patient, VERTEX_TERMINAL) == "JOB_STATE_SUCCEEDED"
    assert any("Flex-Start capacity arrived" in line for line in lines(service, project, patient))


def test_a_preempted_spot_job_restarts_and_then_succeeds(
    sdk: Any, service: LocalService, staged_trainer: StagedTrainer, project: str
) -> None:
    spot = sdk.gapic.Scheduling.Strategy.SPOT
    custom_job = job(sdk, staged_trainer, CPU_MACHINE, seconds=5, name="spot")
    custom_job.submit(scheduling_strategy=spot, restart_job_on_worker_restart=True)
    first = "Replica workerpool0-0 was preempted (Spot VM reclaimed); restarting the whole job"
    wait_for_line(
        service, project, custom_job, f"{first} (scheduling.restartJobOnWorkerRestart) (restart 1 of"
    )
    assert custom_job.state.name == "JOB_STATE_RUNNING"
    job_id = custom_job.resource_name.rsplit("/", 1)[-1]
    wait_for_line(service, project, custom_job, "sleeping", count=2)  # the restarted attempt runs
    capacity(service, {"preempt": [job_id]})  # and once more, now
    assert wait_for_sdk_state(custom_job, VERTEX_TERMINAL) == "JOB_STATE_SUCCEEDED"
    said = lines(service, project, custom_job)
    assert [line for line in said if "was preempted" in line][-1].endswith("(restart 2 of at most 6)")
    assert said.count("sleeping") == 3  # three attempts, the last one to the end
    assert "Spot preemptions</th><td>2" in console(service, custom_job)
    with pytest.raises(urllib.error.HTTPError) as refused:  # an ended job has no Spot VMs to reclaim
        capacity(service, {"preempt": [job_id]})
    assert refused.value.code == 400


def test_create_gets_429_for_quota_and_for_rate(
    sdk: Any, service: LocalService, staged_trainer: StagedTrainer
) -> None:
    from google.api_core.exceptions import TooManyRequests

    capacity(service, {"create429": ["rate:1", "quota:1"]})
    with pytest.raises(
        TooManyRequests, match="Resource management \\(CRUD\\) requests per minute per region"
    ):
        job(sdk, staged_trainer, T4_MACHINE).submit()
    with pytest.raises(TooManyRequests, match=f"exceed quota limits: aiplatform.googleapis.com/{T4}"):
        job(sdk, staged_trainer, T4_MACHINE).submit()
    capacity(service, {"quotaMode": "reject", "quotas": {f"{LOCATION}:{L4}": 0}})
    try:
        with pytest.raises(TooManyRequests) as refused:
            job(sdk, staged_trainer, L4_MACHINE).submit()
        assert refused.value.message.endswith(  # Google's words [O stable-diffusion-on-gcp#12]
            f"The following quota metrics exceed quota limits: aiplatform.googleapis.com/{L4}"
        )
    finally:
        capacity(service, {"quotaMode": "queue", "quotas": {f"{LOCATION}:{L4}": None}})
    accepted = job(sdk, staged_trainer, CPU_MACHINE)
    accepted.submit()
    assert wait_for_sdk_state(accepted, VERTEX_TERMINAL) == "JOB_STATE_SUCCEEDED"
    assert capacity(service, method="GET")["create429"] == []

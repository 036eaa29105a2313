"""Google's Vertex AI SDK meets the local service's machine table and its create-body rules.

Google refuses a machine/accelerator pairing at create with a 400; so does the local service, from
the table the operators check too (airflow_aip/jobs/vertex/hardware.py). A valid GPU job is taken
and runs on the CPU here, its log says so. Output-only fields a client sends back are ignored
(field_behavior.proto), so a job read with the SDK can be submitted again.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any

import pytest

from tests.fixtures.local_service import LocalService, StagedTrainer, log_entries
from tests.fixtures.vertex import sdk_pools

pytestmark = pytest.mark.integration


def _job_dir(trainer: StagedTrainer) -> str:
    return f"--job-dir=gs://{trainer.bucket}/machines/{uuid.uuid4().hex[:8]}"


def _gpu_pools(trainer: StagedTrainer, machine: dict[str, Any]) -> list[dict[str, Any]]:
    pooled = sdk_pools(trainer, "succeed", [_job_dir(trainer)])
    pooled[0]["machine_spec"] = machine
    return pooled


@pytest.mark.parametrize(
    ("machine", "field"),
    [
        (
            {
                "machine_type": "n1-standard-4",
                "accelerator_type": "NVIDIA_TESLA_A100",
                "accelerator_count": 1,
            },
            "accelerator",
        ),
        (
            {"machine_type": "e2-standard-4", "accelerator_type": "NVIDIA_TESLA_T4", "accelerator_count": 1},
            "accelerator",
        ),
        (
            {"machine_type": "a2-highgpu-1g", "accelerator_type": "NVIDIA_TESLA_T4", "accelerator_count": 1},
            "accelerator",
        ),
        ({"machine_type": "n1-standard-4", "accelerator_type": "NVIDIA_TESLA_T4"}, "accelerator"),
        ({"machine_type": "n1-standard-2"}, "machineType"),
        ({"machine_type": "n1-standrad-4"}, "machineType"),
    ],
)
def test_a_pairing_google_refuses_is_a_400_at_create(
    sdk: Any, staged_trainer: StagedTrainer, machine: dict[str, Any], field: str
) -> None:
    from google.api_core import exceptions

    job = sdk.CustomJob(display_name="bad-machine", worker_pool_specs=_gpu_pools(staged_trainer, machine))
    with pytest.raises(exceptions.BadRequest) as caught:
        job.submit()
    assert (
        "List of found errors:\t1.Field: job_spec.worker_pool_specs[0].machine_spec" in caught.value.message
    )
    assert field.replace("machineType", "machine_type") in caught.value.message


def test_a_t4_job_is_taken_and_runs_on_the_cpu_saying_so(
    sdk: Any, staged_trainer: StagedTrainer, local_service: LocalService
) -> None:
    t4 = {"machine_type": "n1-standard-4", "accelerator_type": "NVIDIA_TESLA_T4", "accelerator_count": 1}
    job = sdk.CustomJob(display_name="t4", worker_pool_specs=_gpu_pools(staged_trainer, t4))
    job.run(sync=True)
    assert job.state.name == "JOB_STATE_SUCCEEDED"
    project = job.resource_name.split("/")[1]
    lines = [e["textPayload"] for e in log_entries(local_service.url, project, job.name)]
    assert any("1 x NVIDIA_TESLA_T4" in line and "run on the CPU" in line for line in lines), lines


def test_output_only_fields_sent_back_are_ignored(sdk: Any, staged_trainer: StagedTrainer) -> None:
    first = sdk.CustomJob(
        display_name="clone-me",
        worker_pool_specs=sdk_pools(staged_trainer, "succeed", [_job_dir(staged_trainer)]),
    )
    first.run(sync=True)
    clone = sdk.CustomJob(
        display_name="clone",
        worker_pool_specs=sdk_pools(staged_trainer, "succeed", [_job_dir(staged_trainer)]),
    )
    # What a GET answered, copied into the body: name, state and times are output only.
    clone._gca_resource.name = first.resource_name
    clone._gca_resource.state = 4  # JOB_STATE_SUCCEEDED
    clone._gca_resource.create_time = datetime(1970, 1, 1, 0, 0, 1, tzinfo=timezone.utc)
    clone.run(sync=True)
    assert clone.resource_name != first.resource_name
    assert clone.state.name == "JOB_STATE_SUCCEEDED"
    assert clone.create_time.year > 1970

"""A worker pool's ``diskSpec``: the boot disk types aiplatform.v1.json lists, 100 to 64,000 GB.

The range is the SDK's ("boot disk size must be within the range of [100, 64000]",
google-cloud-aiplatform's jobs.py and training_jobs.py docstrings); 0 is proto3's unset value.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.vertex.body import validate_custom_job
from tests.fixtures.translate import body

POOL = "jobSpec.workerPoolSpecs[0]"


def _with_disk(**disk: Any) -> dict[str, Any]:
    job = body()
    job["jobSpec"]["workerPoolSpecs"][0]["diskSpec"] = disk
    return job


@pytest.mark.parametrize(
    "disk",
    [
        {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100},
        {"bootDiskType": "pd-standard", "bootDiskSizeGb": 64000},
        {"bootDiskType": "hyperdisk-balanced", "bootDiskSizeGb": "500"},
        {"bootDiskSizeGb": 0},  # unset: the default 100 GB
        {},
    ],
)
def test_documented_disks_are_accepted(disk: dict[str, Any]) -> None:
    validate_custom_job(_with_disk(**disk))


@pytest.mark.parametrize(
    ("disk", "field", "says"),
    [
        ({"bootDiskType": "nvme"}, "bootDiskType", 'Boot disk type "nvme" is not supported'),
        ({"bootDiskType": "pd-balanced"}, "bootDiskType", "pd-ssd, pd-standard, hyperdisk-balanced"),
        ({"bootDiskSizeGb": 99}, "bootDiskSizeGb", "within the range of [100, 64000] GB; got 99"),
        ({"bootDiskSizeGb": 64001}, "bootDiskSizeGb", "got 64001"),
        ({"bootDiskSizeGb": 5, "bootDiskType": "pd-ssd"}, "bootDiskSizeGb", "got 5"),
    ],
)
def test_other_disks_are_refused_naming_the_field(disk: dict[str, Any], field: str, says: str) -> None:
    with pytest.raises(ValidationError) as caught:
        validate_custom_job(_with_disk(**disk))
    assert caught.value.field == f"{POOL}.diskSpec.{field}"
    assert says in caught.value.rule


def test_the_local_service_answers_google_s_400(client: TestClient) -> None:
    response = client.post(
        "/v1/projects/proj/locations/us-central1/customJobs",
        json=_with_disk(bootDiskType="nvme", bootDiskSizeGb=5),
    )
    error = response.json()["error"]
    assert (response.status_code, error["status"]) == (400, "INVALID_ARGUMENT")
    assert "job_spec.worker_pool_specs[0].disk_spec.boot_disk_type" in error["message"]


def test_an_ml_v1_disk_config_is_refused_naming_its_own_field() -> None:
    from tests.fixtures.translate import error_of, make_ti

    disk = {"diskConfig": {"bootDiskSizeGb": 50}}
    error = error_of(make_ti(scaleTier="CUSTOM", masterType="n1-standard-4", masterConfig=disk))
    assert error.field == "trainingInput.masterConfig.diskConfig.bootDiskSizeGb"
    assert "[100, 64000]" in error.rule

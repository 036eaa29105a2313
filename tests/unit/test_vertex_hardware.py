"""Vertex AI's machine/accelerator/scheduling table: what Google refuses at create, refused here first.

One row per rule: the pairing, the field the error names and a fragment of the rule. The same table
backs the local emulator (a 400 INVALID_ARGUMENT) and the ml v1 translation (errors in ml v1 terms).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.locations import vertex_locations
from airflow_aip.jobs.vertex.body import validate_custom_job
from airflow_aip.jobs.vertex.hardware import (
    MACHINES,
    REGION_ACCELERATORS,
    check_machine_spec,
    check_scheduling,
    gpu_quota_resource,
    vcpus,
)
from airflow_aip.jobs.vertex.machines import LEGACY_MACHINES
from tests.fixtures.translate import body, error_of, make_ti, spec

POOL = "jobSpec.workerPoolSpecs[0]"
IMAGE = "us-docker.pkg.dev/vertex-ai/training/tf-gpu.2-15.py310:latest"


def refused(machine_spec: dict[str, Any], region: str | None = None) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        check_machine_spec(machine_spec, POOL, region)
    return caught.value


@pytest.mark.parametrize(
    "machine_spec",
    [
        spec("n1-standard-4", "NVIDIA_TESLA_T4", 1),
        spec("a2-highgpu-1g", "NVIDIA_TESLA_A100", 1),
        spec("g2-standard-8", "NVIDIA_L4", 1),
        spec("a3-highgpu-8g", "NVIDIA_H100_80GB", 8),
        spec("a3-megagpu-8g", "NVIDIA_H100_MEGA_80GB", 8),
        spec("a2-ultragpu-2g", "NVIDIA_A100_80GB", 2),
        spec("g2-standard-48", "NVIDIA_L4", 4),
        spec("n1-standard-32", "NVIDIA_TESLA_V100", 8),
        spec("n1-highmem-2", "NVIDIA_TESLA_P100", 1),
        spec("n1-standard-4"),
        spec("e2-standard-4", "ACCELERATOR_TYPE_UNSPECIFIED"),
        spec("c2-standard-60"),
        spec("cloud-tpu", "TPU_V2", 8),
        spec("ct5lp-hightpu-4t", tpuTopology="2x2"),
    ],
)
def test_documented_pairings_are_accepted(machine_spec: dict[str, Any]) -> None:
    check_machine_spec(machine_spec, POOL, "us-central1")


@pytest.mark.parametrize(
    ("machine_spec", "leaf", "fragment"),
    [
        (spec("n1-standard-2"), "machineType", "not supported for custom training"),
        (spec("n1-highcpu-8"), "machineType", "families"),
        (spec("n2d-standard-8"), "machineType", "n1-standard-4"),
        (spec("n1-standard-4", "NVIDIA_TESLA_A100", 1), "acceleratorType", "attaches to a2-highgpu-1g"),
        (spec("e2-standard-4", "NVIDIA_TESLA_T4", 1), "acceleratorType", "n1-standard-*"),
        (spec("a2-highgpu-1g", "NVIDIA_TESLA_T4", 1), "acceleratorType", "not supported"),
        (spec("a2-ultragpu-1g", "NVIDIA_TESLA_A100", 1), "acceleratorType", "not supported"),
        (spec("a3-highgpu-8g", "NVIDIA_H100_MEGA_80GB", 8), "acceleratorType", "a3-megagpu-8g"),
        (spec("a2-highgpu-1g", "NVIDIA_TESLA_A100", 2), "acceleratorCount", "are: [1]"),
        (spec("g2-standard-8", "NVIDIA_L4", 8), "acceleratorCount", '"g2-standard-8" are: [1]'),
        (spec("g2-standard-24", "NVIDIA_L4", 1), "acceleratorCount", "are: [2]"),
        (spec("g2-standard-8"), "acceleratorType", "must be used with NVIDIA_L4"),
        (spec("n1-standard-4", "NVIDIA_TESLA_K80", 1), "acceleratorType", "end of support"),
        (spec("n1-standard-4", "NVIDIA_TESLA_T4", 3), "acceleratorCount", "are: [1, 2, 4]"),
        (spec("n1-standard-32", "NVIDIA_TESLA_T4", 1), "acceleratorCount", "are: [2, 4]"),
        (spec("n1-standard-16", "NVIDIA_TESLA_V100", 1), "acceleratorCount", "are: [2, 4, 8]"),
        (spec("n1-standard-64", "NVIDIA_TESLA_P100", 4), "acceleratorType", "not supported"),
        (spec("n1-standard-4", "NVIDIA_TESLA_T4", 0), "acceleratorCount", "specified or none"),
        (spec("n1-standard-4", "NVIDIA_TESLA_T4"), "acceleratorCount", "specified or none"),
        (spec("n1-standard-4", None, 2), "acceleratorType", "specified or none"),
        (spec("n1-standard-4", "ACCELERATOR_TYPE_UNSPECIFIED", 1), "acceleratorType", "specified or none"),
        (spec("cloud-tpu"), "acceleratorType", "TPU_V2 or TPU_V3"),
        (spec("cloud-tpu", "TPU_V2", 16), "acceleratorCount", "8 or 32*n"),
        (spec("cloud-tpu", "TPU_V4_POD", 32), "acceleratorType", "no TPU v4"),
        (spec("ct5lp-hightpu-4t", tpuTopology="3x3"), "tpuTopology", "2x2"),
    ],
)
def test_refused_pairings_name_the_field(machine_spec: dict[str, Any], leaf: str, fragment: str) -> None:
    error = refused(machine_spec)
    assert error.field == f"{POOL}.machineSpec.{leaf}"
    assert fragment in error.rule


@pytest.mark.parametrize(
    ("machine_spec", "region"),
    [
        (spec("a2-highgpu-1g", "NVIDIA_TESLA_A100", 1), "europe-west2"),
        (spec("g2-standard-8", "NVIDIA_L4", 1), "europe-west6"),  # L4 there serves predictions only
        (spec("cloud-tpu", "TPU_V3", 32), "us-central1"),  # TPU v3 pods: europe-west4 only
        (spec("n1-standard-4", "NVIDIA_TESLA_T4", 1), "europe-west9"),  # no accelerators listed
    ],
)
def test_an_accelerator_the_region_lacks_is_refused(machine_spec: dict[str, Any], region: str) -> None:
    error = refused(machine_spec, region)
    assert error.field == f"{POOL}.machineSpec.acceleratorType"
    assert f"not available for training in {region}" in error.rule


def test_cpu_jobs_run_in_every_region_and_regions_are_vertex_locations() -> None:
    for region in vertex_locations():
        check_machine_spec(spec("n1-standard-4"), POOL, region)
    assert set(REGION_ACCELERATORS) <= vertex_locations()
    check_machine_spec(spec("cloud-tpu", "TPU_V3", 32), POOL, "europe-west4")


def test_every_legacy_machine_translates_to_a_valid_spec() -> None:
    for machine in LEGACY_MACHINES.values():
        check_machine_spec(machine.spec(), POOL, "us-central1")


def test_vcpus_and_quota_metrics() -> None:
    expected = {"n1-standard-4": 4, "a2-highgpu-1g": 12, "a3-highgpu-8g": 208, "g2-standard-48": 48}
    assert {machine_type: vcpus(machine_type) for machine_type in expected} == expected
    with pytest.raises(ValidationError):
        vcpus("n1-standard-2")
    assert gpu_quota_resource("NVIDIA_TESLA_T4") == "custom_model_training_nvidia_t4_gpus"
    assert gpu_quota_resource("NVIDIA_TESLA_A100") == "custom_model_training_nvidia_a100_gpus"
    assert gpu_quota_resource("NVIDIA_L4") == "custom_model_training_nvidia_l4_gpus"
    assert gpu_quota_resource(None) == gpu_quota_resource("") == "custom_model_training_cpus"
    assert gpu_quota_resource("NVIDIA_H100_80GB", preemptible=True) == (
        "custom_model_training_preemptible_nvidia_h100_gpus"
    )
    assert all(gpu_quota_resource(m.accelerator) for m in MACHINES.values() if m.accelerator != "TPU_V6E")


def test_every_machine_type_has_its_memory() -> None:
    """The size a local replica is held to: Compute Engine's GB (GiB) per type, sourced in the table."""
    sized = {name: (row.vcpus, row.memory_gb) for name, row in MACHINES.items()}
    assert sized["n1-standard-4"] == (4, 15)
    assert sized["n1-highmem-2"] == (2, 13)
    assert sized["n1-highcpu-16"] == (16, 14.4)
    assert sized["e2-standard-4"] == (4, 16)
    assert sized["e2-highcpu-16"] == (16, 16)
    assert sized["a2-highgpu-1g"] == (12, 85)
    assert sized["a2-ultragpu-8g"] == (96, 1360)
    assert sized["a3-highgpu-8g"] == (208, 1872)
    assert sized["n4-highcpu-2"] == (2, 4)  # the smallest training machine: the memory tests' choice
    assert min(sized.values(), key=lambda row: row[1]) == (2, 4)
    assert all(memory > 0 for _, memory in sized.values())


# --- scheduling -------------------------------------------------------------------------------


def job_spec(*machine_specs: dict[str, Any], **scheduling: Any) -> dict[str, Any]:
    return {"workerPoolSpecs": [{"machineSpec": s} for s in machine_specs], "scheduling": scheduling}


A100 = spec("a2-highgpu-1g", "NVIDIA_TESLA_A100", 1)


@pytest.mark.parametrize(
    ("given", "field", "fragment"),
    [
        (job_spec(spec("n1-standard-4"), strategy="FLEX_START"), "[0].machineSpec.acceleratorType", "GPU"),
        (
            job_spec(spec("n1-standard-4", "NVIDIA_TESLA_T4", 1), strategy="FLEX_START"),
            "[0].machineSpec.acceleratorType",
            "L4, A100",
        ),
        (
            job_spec(A100, spec("a2-highgpu-2g", "NVIDIA_TESLA_A100", 2), strategy="FLEX_START"),
            "[1].machineSpec",
            "same machine",
        ),
        (job_spec(A100, strategy="FLEX_START", timeout="691200s"), "scheduling.timeout", "7 days"),
        (job_spec(A100, maxWaitDuration="3600s"), "scheduling.maxWaitDuration", "FLEX_START"),
        (job_spec(A100, strategy="SPOT", maxWaitDuration="60s"), "scheduling.maxWaitDuration", "SPOT"),
        (job_spec(spec("cloud-tpu", "TPU_V2", 32), strategy="SPOT"), "scheduling.strategy", "TPU pods"),
    ],
)
def test_scheduling_rules(given: dict[str, Any], field: str, fragment: str) -> None:
    with pytest.raises(ValidationError) as caught:
        check_scheduling(given, "jobSpec")
    assert caught.value.field.endswith(field)
    assert fragment in caught.value.rule


@pytest.mark.parametrize(
    "given",
    [
        job_spec(A100, A100, strategy="FLEX_START", maxWaitDuration="0s", timeout="604800s"),
        job_spec(spec("g2-standard-8", "NVIDIA_L4", 1), strategy="FLEX_START"),
        job_spec(spec("cloud-tpu", "TPU_V2", 8), strategy="SPOT"),
        job_spec(spec("n1-standard-4"), strategy="SPOT", restartJobOnWorkerRestart=True, disableRetries=True),
    ],
)
def test_documented_scheduling_is_accepted(given: dict[str, Any]) -> None:
    check_scheduling(given, "jobSpec")


# --- whole bodies: form checks, TPU pools, the emulator -----------------------------------------


SA = "trainer@my-project.iam.gserviceaccount.com"
BOARD = "projects/p/locations/us-central1/tensorboards/123"


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"serviceAccount": "trainer@example.com"}, "jobSpec.serviceAccount"),
        ({"serviceAccount": "trainer"}, "jobSpec.serviceAccount"),
        ({"network": "projects/my-project/global/networks/vpc"}, "jobSpec.network"),
        ({"network": "global/networks/vpc"}, "jobSpec.network"),
        ({"tensorboard": "tensorboards/123", "serviceAccount": SA}, "jobSpec.tensorboard"),
        ({"tensorboard": BOARD}, "jobSpec.serviceAccount"),
        ({"persistentResourceId": "1pool"}, "jobSpec.persistentResourceId"),
        ({"persistentResourceId": "Pool"}, "jobSpec.persistentResourceId"),
        ({"persistentResourceId": "p" * 64}, "jobSpec.persistentResourceId"),
    ],
)
def test_resource_names_are_checked(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        validate_custom_job(body(**fields))
    assert caught.value.field == field


def test_well_formed_resource_names_pass() -> None:
    validate_custom_job(
        body(
            serviceAccount="123456789-compute@developer.gserviceaccount.com",
            network="projects/12345/global/networks/myVPC",
            tensorboard=BOARD,
            persistentResourceId="my-pool-1",
        )
    )


def test_the_kms_key_is_a_key_name_in_the_jobs_region() -> None:
    key = "projects/p/locations/europe-west4/keyRings/r/cryptoKeys/k"
    assert validate_custom_job({**body(), "encryptionSpec": {"kmsKeyName": key}})["encryptionSpec"]
    for bad, region in ((key.replace("/keyRings", "/rings"), None), (key, "us-central1")):
        with pytest.raises(ValidationError) as caught:
            validate_custom_job({**body(), "encryptionSpec": {"kmsKeyName": bad}}, region=region)
        assert caught.value.field == "encryptionSpec.kmsKeyName"


def test_a_tpu_vm_job_has_one_worker_pool() -> None:
    tpu = body()["jobSpec"]["workerPoolSpecs"][0] | {"machineSpec": spec("cloud-tpu", "TPU_V3", 8)}
    worker = body()["jobSpec"]["workerPoolSpecs"][0] | {"replicaCount": "2"}
    with pytest.raises(ValidationError) as caught:
        validate_custom_job(body([tpu, worker]))
    assert caught.value.field == "jobSpec.workerPoolSpecs[1]"


def test_the_region_is_checked_only_when_given() -> None:
    a100 = body()["jobSpec"]["workerPoolSpecs"][0] | {"machineSpec": A100}
    validate_custom_job(body([a100]))
    with pytest.raises(ValidationError, match="europe-west2"):
        validate_custom_job(body([a100]), region="europe-west2")


def test_ml_v1_errors_name_the_ml_v1_field() -> None:
    a100 = {"acceleratorConfig": {"type": "NVIDIA_TESLA_A100", "count": "1"}}
    error = error_of(make_ti(scaleTier="CUSTOM", masterType="n1-standard-4", masterConfig=a100))
    assert error.field == "trainingInput.masterConfig.acceleratorConfig.type"
    assert 'not supported for machine type "n1-standard-4"' in error.rule
    t4 = {"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "3"}}
    error = error_of(make_ti(scaleTier="CUSTOM", masterType="n1-standard-4", masterConfig=t4))
    assert error.field == "trainingInput.masterConfig.acceleratorConfig.count"
    assert (
        error_of(make_ti(scaleTier="CUSTOM", masterType="n1-standard-2")).field == "trainingInput.masterType"
    )


def test_the_emulator_answers_a_refused_pairing_with_a_400_naming_the_field(tmp_path: Path) -> None:
    from airflow_aip.local.api import create_app
    from airflow_aip.local.service import ServiceConfig, TrainingService

    service = TrainingService(ServiceConfig(tmp_path / "data", storage_url=None))
    try:
        client = TestClient(create_app(service))
        pool = body()["jobSpec"]["workerPoolSpecs"][0] | {
            "machineSpec": spec("n1-standard-4", "NVIDIA_TESLA_A100", 1)
        }
        response = client.post("/v1/projects/proj/locations/us-central1/customJobs", json=body([pool]))
    finally:
        service.stop()
    error = response.json()["error"]
    assert (response.status_code, error["status"]) == (400, "INVALID_ARGUMENT")
    field = "job_spec.worker_pool_specs[0].machine_spec.accelerator_type"
    assert error["message"].startswith(
        f"List of found errors:\t1.Field: {field}; Message: "
    )  # Google's words
    assert (
        'Accelerator "NVIDIA_TESLA_A100" is not supported for machine type "n1-standard-4"'
        in error["message"]
    )

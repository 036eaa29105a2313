"""AI Platform machines, scale tiers and programs -> Vertex AI worker pools: one row per rule."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fixtures.translate import TF_CPU, TF_GPU, error_of, make_ti, pools_of, vertex

PACKAGE = "gs://bkt-x/staging/trainer-0.1.tar.gz"


# --- scale tiers and machines -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tier", "pools"),
    [
        (None, [("n1-standard-4", None, "1")]),
        ("BASIC", [("n1-standard-4", None, "1")]),
        ("BASIC_GPU", [("n1-standard-8", ("NVIDIA_TESLA_T4", 1), "1")]),
        (
            "STANDARD_1",
            [("n1-standard-8", None, "1"), ("n1-standard-8", None, "4"), ("n1-standard-4", None, "3")],
        ),
        (
            "PREMIUM_1",
            [("n1-highcpu-16", None, "1"), ("n1-highcpu-16", None, "19"), ("n1-highmem-8", None, "11")],
        ),
    ],
)
def test_scale_tiers_become_worker_pools(tier: str | None, pools: list[tuple[Any, ...]]) -> None:
    request = vertex(make_ti(scaleTier=tier))
    got = pools_of(request)
    assert len(got) == len(pools)
    for pool, (machine, accelerator, replicas) in zip(got, pools, strict=True):
        expected: dict[str, Any] = {"machineType": machine}
        if accelerator:
            expected.update(acceleratorType=accelerator[0], acceleratorCount=accelerator[1])
        assert pool["machineSpec"] == expected
        assert pool["replicaCount"] == replicas
        image = TF_GPU if accelerator else TF_CPU
        assert pool["pythonPackageSpec"] == {
            "executorImageUri": image,
            "packageUris": [PACKAGE],
            "pythonModule": "trainer.task",
        }


def test_basic_tpu_is_an_error() -> None:
    error = error_of(make_ti(scaleTier="BASIC_TPU"))
    assert error.field == "trainingInput.scaleTier"
    assert "TPU VM" in error.rule


@pytest.mark.parametrize(
    ("legacy", "machine"),
    [
        ("standard", {"machineType": "n1-standard-4"}),
        ("large_model", {"machineType": "n1-highmem-8"}),
        ("complex_model_s", {"machineType": "n1-standard-8"}),  # n1-highcpu-8 is not for training
        ("complex_model_m", {"machineType": "n1-highcpu-16"}),
        ("complex_model_l", {"machineType": "n1-highcpu-32"}),
        (
            "standard_gpu",
            {"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 1},
        ),
        (
            "complex_model_m_gpu",
            {"machineType": "n1-standard-16", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 4},
        ),
        (
            "standard_p100",
            {"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_P100", "acceleratorCount": 1},
        ),
        (
            "complex_model_m_p100",
            {"machineType": "n1-standard-16", "acceleratorType": "NVIDIA_TESLA_P100", "acceleratorCount": 4},
        ),
        (
            "standard_v100",
            {"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_V100", "acceleratorCount": 1},
        ),
        (
            "large_model_v100",
            {"machineType": "n1-highmem-8", "acceleratorType": "NVIDIA_TESLA_V100", "acceleratorCount": 1},
        ),
        (
            "complex_model_m_v100",
            {"machineType": "n1-standard-16", "acceleratorType": "NVIDIA_TESLA_V100", "acceleratorCount": 4},
        ),
        (
            "complex_model_l_v100",
            {"machineType": "n1-standard-32", "acceleratorType": "NVIDIA_TESLA_V100", "acceleratorCount": 8},
        ),
    ],
)
def test_legacy_machine_names_become_compute_engine_machines(legacy: str, machine: dict[str, Any]) -> None:
    [pool] = pools_of(vertex(make_ti(scaleTier="CUSTOM", masterType=legacy)))
    assert pool["machineSpec"] == machine
    gpu = "acceleratorType" in machine
    assert pool["pythonPackageSpec"]["executorImageUri"] == (TF_GPU if gpu else TF_CPU)


@pytest.mark.parametrize(("legacy", "words"), [("complex_model_l_gpu", "8 K80"), ("cloud_tpu", "TPU VMs")])
def test_legacy_machines_without_an_equivalent_are_errors(legacy: str, words: str) -> None:
    error = error_of(make_ti(scaleTier="CUSTOM", masterType="standard", workerType=legacy, workerCount=1))
    assert error.field == "trainingInput.workerType"
    assert words in error.rule


def test_compute_engine_machines_pass_through_with_their_accelerators() -> None:
    ti = make_ti(
        scaleTier="CUSTOM",
        masterType="n1-standard-8",
        masterConfig={"acceleratorConfig": {"type": "NVIDIA_TESLA_V100", "count": "2"}},
        workerType="n1-standard-4",
        workerCount=2,
    )
    master, worker = pools_of(vertex(ti))
    assert master["machineSpec"] == {
        "machineType": "n1-standard-8",
        "acceleratorType": "NVIDIA_TESLA_V100",
        "acceleratorCount": 2,
    }
    assert master["pythonPackageSpec"]["executorImageUri"] == TF_GPU  # GPU image only where the GPUs are
    assert worker["machineSpec"] == {"machineType": "n1-standard-4"}
    assert worker["pythonPackageSpec"]["executorImageUri"] == TF_CPU


@pytest.mark.parametrize("accelerator", ["NVIDIA_TESLA_K80", "TPU_V2_POD", "TPU_V3_POD", "TPU_V2"])
def test_accelerators_vertex_cannot_take_are_errors(accelerator: str) -> None:
    ti = make_ti(
        scaleTier="CUSTOM",
        masterType="n1-standard-8",
        masterConfig={"acceleratorConfig": {"type": accelerator, "count": "1"}},
    )
    error = error_of(ti)
    assert error.field == "trainingInput.masterConfig.acceleratorConfig.type"
    assert accelerator in error.rule


def test_an_unknown_machine_name_lists_the_known_ones() -> None:
    error = error_of(make_ti(scaleTier="CUSTOM", masterType="huge_model"))
    assert error.field == "trainingInput.masterType"
    assert "complex_model_m" in error.rule


def test_a_legacy_machine_takes_no_accelerator_config() -> None:
    ti = make_ti(
        scaleTier="CUSTOM",
        masterType="standard",
        masterConfig={"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "1"}},
    )
    assert error_of(ti).field == "trainingInput.masterConfig.acceleratorConfig"


def test_machine_types_are_read_only_in_the_custom_tier() -> None:
    assert (
        error_of(make_ti(scaleTier="STANDARD_1", masterType="n1-standard-4")).field
        == "trainingInput.masterType"
    )


def test_a_role_type_without_replicas_is_an_error() -> None:
    error = error_of(make_ti(scaleTier="CUSTOM", masterType="standard", workerType="standard"))
    assert error.field == "trainingInput.workerType"


def test_a_role_config_without_replicas_is_an_error() -> None:
    error = error_of(make_ti(workerConfig={"diskConfig": {"bootDiskSizeGb": 200}}))
    assert error.field == "trainingInput.workerConfig"


def test_skipped_pools_are_padded_with_empty_pools() -> None:
    ti = make_ti(scaleTier="CUSTOM", masterType="standard", evaluatorType="n1-standard-4", evaluatorCount=2)
    pools = pools_of(vertex(ti))
    assert [bool(p) for p in pools] == [True, False, False, True]
    assert pools[3]["replicaCount"] == "2"
    assert pools[3]["machineSpec"] == {"machineType": "n1-standard-4"}
    assert "pythonPackageSpec" in pools[3]  # every pool runs the package


def test_disk_config_becomes_disk_spec() -> None:
    ti = make_ti(masterConfig={"diskConfig": {"bootDiskType": "pd-standard", "bootDiskSizeGb": 250}})
    [pool] = pools_of(vertex(ti))
    assert pool["diskSpec"] == {"bootDiskType": "pd-standard", "bootDiskSizeGb": 250}


# --- what each pool runs ------------------------------------------------------------------------


def test_custom_containers_per_role_with_command_and_args() -> None:
    ti = make_ti(
        scaleTier="CUSTOM",
        masterType="n1-standard-4",
        masterConfig={
            "imageUri": "us-docker.pkg.dev/p/r/master:1",
            "containerCommand": ["python", "-m", "task"],
            "containerArgs": ["--role=chief"],
        },
        workerType="n1-standard-4",
        workerCount=2,
        parameterServerType="n1-highmem-2",
        parameterServerCount=1,
        parameterServerConfig={"imageUri": "us-docker.pkg.dev/p/r/ps:1"},
    )
    master, worker, ps = pools_of(vertex(ti))
    assert master["containerSpec"] == {
        "imageUri": "us-docker.pkg.dev/p/r/master:1",
        "command": ["python", "-m", "task"],
        "args": ["--role=chief"],
    }
    assert worker["containerSpec"] == {"imageUri": "us-docker.pkg.dev/p/r/master:1"}  # the master's image
    assert ps["containerSpec"] == {"imageUri": "us-docker.pkg.dev/p/r/ps:1"}


def test_a_role_image_in_a_python_package_job_is_an_error() -> None:
    ti = make_ti(
        scaleTier="CUSTOM",
        masterType="standard",
        workerType="standard",
        workerCount=1,
        workerConfig={"imageUri": "us-docker.pkg.dev/p/r/worker:1"},
    )
    assert error_of(ti).field == "trainingInput.workerConfig.imageUri"


def test_an_explicit_executor_image_wins_and_is_checked() -> None:
    image = "europe-docker.pkg.dev/vertex-ai/training/tf-gpu.2-17.py310:latest"
    [pool] = pools_of(vertex(make_ti(runtimeVersion="1.15"), executor_image_uri=image))
    assert pool["pythonPackageSpec"]["executorImageUri"] == image
    assert error_of(make_ti(), executor_image_uri="python:3.10").field == "executor_image_uri"


def test_executor_image_and_framework_do_not_apply_to_custom_containers() -> None:
    ti = make_ti(masterConfig={"imageUri": "us-docker.pkg.dev/p/r/img:1"})
    assert error_of(ti, executor_image_uri=TF_CPU).field == "executor_image_uri"
    assert error_of(ti, framework="tensorflow").field == "framework"


@pytest.mark.parametrize(
    ("framework", "region", "gpu", "image"),
    [
        ("scikit-learn", "us-central1", False, "us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest"),
        ("SCIKIT_LEARN", "us-central1", False, "us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest"),
        ("xgboost", "us-central1", False, "us-docker.pkg.dev/vertex-ai/training/xgboost-cpu.2-1:latest"),
        ("pytorch", "us-central1", True, "us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-4.py310:latest"),
        (
            "pytorch",
            "us-central1",
            False,
            "us-docker.pkg.dev/vertex-ai/training/pytorch-cpu.2-4.py310:latest",
        ),
        (
            "tensorflow",
            "europe-west4",
            False,
            "europe-docker.pkg.dev/vertex-ai/training/tf-cpu.2-15.py310:latest",
        ),
        (None, "asia-east1", True, "asia-docker.pkg.dev/vertex-ai/training/tf-gpu.2-15.py310:latest"),
    ],
)
def test_runtime_and_framework_choose_the_container(
    framework: str | None, region: str, gpu: bool, image: str
) -> None:
    [pool] = pools_of(
        vertex(make_ti(region=region, scaleTier="BASIC_GPU" if gpu else "BASIC"), framework=framework)
    )
    assert pool["pythonPackageSpec"]["executorImageUri"] == image


@pytest.mark.parametrize(
    ("fields", "framework", "field"),
    [
        ({"runtimeVersion": "1.15"}, None, "trainingInput.runtimeVersion"),
        ({"runtimeVersion": "2.9"}, None, "trainingInput.runtimeVersion"),
        ({"runtimeVersion": None}, None, "trainingInput.runtimeVersion"),
        ({"pythonVersion": "2.7"}, None, "trainingInput.pythonVersion"),
        ({"scaleTier": "BASIC_GPU"}, "xgboost", "trainingInput.runtimeVersion"),
        ({}, "caffe", "framework"),
    ],
)
def test_an_unknown_combination_lists_the_valid_ones(
    fields: dict[str, Any], framework: str | None, field: str
) -> None:
    error = error_of(make_ti(**fields), framework=framework)  # runtimeVersion None: not given
    assert error.field == field
    if field != "framework":
        assert "valid combinations: runtimeVersion one of 2.1," in error.rule
        assert "scikit-learn (cpu only)" in error.rule
    else:
        assert "tensorflow, scikit-learn, xgboost, pytorch" in error.rule


def test_a_custom_container_takes_no_python_version() -> None:
    ti = make_ti(masterConfig={"imageUri": "us-docker.pkg.dev/p/r/img:1"}, pythonVersion="3.7")
    assert error_of(ti).field == "trainingInput.pythonVersion"

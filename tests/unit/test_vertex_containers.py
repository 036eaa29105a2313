"""The pre-built container table: what each executorImageUri runs, for the operators and the local service."""

from __future__ import annotations

import pytest

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.vertex.containers import DEFAULT_IMAGES, runtime_of
from airflow_aip.jobs.vertex.machines import executor_image

US = "us-docker.pkg.dev/vertex-ai/training/"


@pytest.mark.parametrize(
    ("image", "framework", "python", "device", "first"),
    [
        ("sklearn-cpu.1-6", "scikit-learn", "3.10", "cpu", ("numpy==1.26.4", "pandas==2.2.3")),
        ("sklearn-cpu.1-0", "scikit-learn", "3.7", "cpu", ("scikit-learn==1.0", "numpy==1.19.5")),
        ("tf-cpu.2-15.py310", "tensorflow", "3.10", "cpu", ("tensorflow==2.15.*", "numpy<2")),
        ("tf-gpu.2-17.py310", "tensorflow", "3.10", "gpu", ("tensorflow==2.17.*", "numpy<2")),
        ("pytorch-gpu.2-4.py310", "pytorch", "3.10", "gpu", ("torch==2.4.*", "pandas==2.2.3")),
        ("pytorch-gpu.2-2.py311", "pytorch", "3.11", "gpu", ("torch==2.2.*", "numpy<2")),
        ("xgboost-cpu.2-1", "xgboost", "3.10", "cpu", ("xgboost==2.1.*", "google-cloud-storage")),
    ],
)
def test_an_image_names_its_python_framework_and_what_it_ships(
    image: str, framework: str, python: str, device: str, first: tuple[str, ...]
) -> None:
    runtime = runtime_of(f"{US}{image}:latest")
    assert (runtime.image, runtime.framework, runtime.python, runtime.device) == (
        image,
        framework,
        python,
        device,
    )
    assert runtime.requirements[: len(first)] == first
    assert {"cloudml-hypertune"} <= set(runtime.requirements)
    assert any(r.startswith("google-cloud-storage") for r in runtime.requirements)
    assert runtime.accelerated is (device == "gpu")


def test_an_image_outside_the_prebuilt_list_is_refused_naming_the_field() -> None:
    with pytest.raises(ValidationError) as caught:
        runtime_of("docker.io/library/python:3.10", "workerPoolSpecs[0].pythonPackageSpec.executorImageUri")
    assert caught.value.field == "workerPoolSpecs[0].pythonPackageSpec.executorImageUri"


def test_the_operators_choose_from_the_same_table() -> None:
    for framework, (cpu, gpu) in DEFAULT_IMAGES.items():
        chosen = executor_image({"runtimeVersion": "2.11"}, framework, gpu=False)
        assert chosen == f"{US}{cpu}:latest"
        assert runtime_of(chosen).framework == framework
        if gpu:
            assert runtime_of(executor_image({"runtimeVersion": "2.11"}, framework, gpu=True)).accelerated

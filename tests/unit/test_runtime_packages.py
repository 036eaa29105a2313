"""What Google's runtimes ship, in one table; images past end of availability; a missing Python."""

from __future__ import annotations

import sys
from datetime import date
from pathlib import Path

import pytest

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.vertex.containers import DEFAULT_IMAGES, Runtime, ml_runtime_of, runtime_of
from airflow_aip.jobs.vertex.image_packages import IMAGES, RUNTIME_VERSIONS, requirement
from airflow_aip.local.executor.builders import PreparationError, runtime_python

US = "us-docker.pkg.dev/vertex-ai/training/"
FIELD = "workerPoolSpecs[1].pythonPackageSpec.executorImageUri"


def test_every_list_names_its_source_and_google_cloud_storage() -> None:
    for entries, source in (*IMAGES.values(), *RUNTIME_VERSIONS.values()):
        assert source.startswith(("[P]", "[P*]", "[U]")), source
        assert any(requirement(e).startswith("google-cloud-storage") for e in entries)
        assert "cloudml-hypertune" in entries


def test_an_image_installs_its_framework_under_the_name_the_image_carries() -> None:
    tf = runtime_of(f"{US}tf-gpu.2-15.py310:latest")
    assert tf.requirements[0] == "tensorflow==2.15.*"
    assert not any(r.startswith("tensorflow-cpu") for r in tf.requirements)
    assert "google-cloud-storage" in tf.unconfirmed  # the Deep Learning Containers base: [U]


def test_the_sklearn_image_ships_googles_listed_versions_confirmed() -> None:
    runtime = runtime_of(f"{US}sklearn-cpu.1-6:latest")
    assert {"google-cloud-storage==2.19.0", "pandas==2.2.3", "numpy==1.26.4", "scipy==1.15.2"} <= set(
        runtime.requirements
    )
    # dated by the image's listed versions, not listed by Google: no FutureWarning the image lacks
    assert runtime.unconfirmed == ("google-auth==2.38.0", "google-api-core==2.24.1")
    assert runtime.source.startswith("[P]")


@pytest.mark.parametrize("image", ["tf-cpu.2-8", "tf-cpu.2-13.py310", "tf2-gpu.2-1"])
def test_an_image_past_its_end_of_availability_is_refused_naming_the_field(image: str) -> None:
    with pytest.raises(ValidationError) as refused:
        runtime_of(f"{US}{image}:latest", FIELD)
    assert refused.value.field == FIELD
    assert f"{image} is past its end of availability" in str(refused.value)


def test_an_image_is_refused_only_from_its_end_of_availability() -> None:
    assert runtime_of(f"{US}tf-cpu.2-13.py310:latest", today=date(2025, 7, 4)).version == "2.13"
    with pytest.raises(ValidationError):
        runtime_of(f"{US}tf-cpu.2-13.py310:latest", today=date(2025, 7, 5))


def test_the_default_images_are_available() -> None:
    for cpu, gpu in DEFAULT_IMAGES.values():
        for image in filter(None, (cpu, gpu)):
            runtime_of(f"{US}{image}:latest")


def test_an_ai_platform_runtime_version_ships_its_libraries_on_python_3_7() -> None:
    runtime = ml_runtime_of("2.1")
    assert runtime.python == "3.7"
    assert {"tensorflow==2.1.0", "google-cloud-storage==1.23.0", "pandas==0.25.3"} <= set(
        runtime.requirements
    )
    later = ml_runtime_of("2.11", "3.7")
    assert "xgboost==1.6.2" in later.requirements
    assert "google-cloud-storage" in later.unconfirmed
    unnamed = ml_runtime_of(None)
    assert "google-cloud-storage" in unnamed.requirements
    assert not any(r.startswith("tensorflow") for r in unnamed.requirements)


def _runtime(python: str) -> Runtime:
    return Runtime("sklearn-cpu.9-9", "scikit-learn", "9.9", python, "cpu", ())


def test_a_missing_python_fails_the_job_loudly() -> None:
    with pytest.raises(
        PreparationError, match=r"runs Python 3\.99, which this machine lacks.*--allow-python-mismatch"
    ):
        runtime_python(_runtime("3.99"), Path(sys.executable), allow_mismatch=False)


def test_a_missing_python_runs_on_the_services_when_allowed_and_says_so() -> None:
    python, notes = runtime_python(_runtime("3.99"), Path(sys.executable), allow_mismatch=True)
    assert python == Path(sys.executable)
    assert any("--allow-python-mismatch" in note for note in notes)


def test_the_services_python_is_found_for_its_own_version() -> None:
    here = "{}.{}".format(*sys.version_info[:2])
    python, _ = runtime_python(_runtime(here), Path("/nonexistent"), allow_mismatch=False)
    assert python == Path(sys.executable)

"""Vertex AI's pre-built training containers: what each ``executorImageUri`` runs, in one table.

Two readers use it:

- the operators, to choose an image for AI Platform's ``runtimeVersion`` / framework
  (:data:`DEFAULT_IMAGES`, through :func:`airflow_aip.jobs.vertex.machines.executor_image`);
- the local service, to build a trainer's environment the way the container holds it
  (:func:`runtime_of`): the Python minor version and the framework at its version, with the
  trainer's package installed on top, as Vertex pip-installs it into the container.

Sources: the pre-built container list, https://cloud.google.com/vertex-ai/docs/training/pre-built-containers,
and the supported frameworks list, https://cloud.google.com/vertex-ai/docs/supported-frameworks-list.
An image is named
``{framework}-{cpu|gpu}.{MAJOR}-{MINOR}[.py3NN]``; the suffix, where present, is its Python.
What an image ships beside its framework (Google's and the data libraries, each list with its
source) is :mod:`.image_packages`; an image past its end of availability is refused, as Vertex
no longer serves it. AI Platform's runtime versions get their runtime the same way
(:func:`ml_runtime_of`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.vertex.image_packages import (
    AI_PLATFORM_LIBRARIES,
    DLC_BASE,
    RUNTIME_VERSIONS,
    SAMPLES,
    requirement,
    shipped,
    unconfirmed,
)

# {us|europe|asia}-docker.pkg.dev/vertex-ai/training/..., and the older gcr.io/cloud-aiplatform/training/
# registry: "You must use an image from this list" (aiplatform.v1.json, PythonPackageSpec.executorImageUri).
PREBUILT_TRAINING_IMAGE = re.compile(
    r"(?:(?:us|europe|asia)-docker\.pkg\.dev/vertex-ai|gcr\.io/cloud-aiplatform)/training/"
    r"(?P<framework>[a-z][a-z0-9]*(?:-[a-z0-9]+)*?)(?:-(?P<device>cpu|gpu|tpu))?"
    r"\.(?P<major>[0-9]+)-(?P<minor>[0-9]+)(?:\.py3(?P<python>[0-9]{1,2}))?:latest"
)

# Image prefix -> (framework, the PyPI distribution the image carries). GPU images carry the same
# distribution (TensorFlow's `tensorflow` holds both builds); locally it runs on the CPU.
FRAMEWORKS: dict[str, tuple[str, str]] = {
    "tf": ("tensorflow", "tensorflow"),
    "tf2": ("tensorflow", "tensorflow"),
    "sklearn": ("scikit-learn", "scikit-learn"),
    "scikit-learn": ("scikit-learn", "scikit-learn"),  # scikit-learn-cpu.0-23, the older spelling
    "xgboost": ("xgboost", "xgboost"),
    "pytorch": ("pytorch", "torch"),
    "pytorch-xla": ("pytorch", "torch"),  # [U] torch-xla itself is not installed: no TPU here
    "ray": ("ray", "ray"),
}
# The Python of images whose name carries no `.py3NN`: images of 2023 and later are Python 3.10
# (the suffixed ones of the same releases say so); older ones ran AI Platform's Python 3.7.
# [U] unverified: read off the images' names and release dates, not from a published list.
UNSUFFIXED_PYTHON: dict[tuple[str, str], str] = {
    ("sklearn", "1.0"): "3.7",
    ("scikit-learn", "0.23"): "3.7",
    ("xgboost", "1.1"): "3.7",
    ("xgboost", "1.4"): "3.7",
    ("tf", "2.1"): "3.7",
    ("tf", "2.2"): "3.7",
    ("tf", "2.3"): "3.7",
    ("tf", "2.4"): "3.7",
    ("tf", "2.5"): "3.7",
    ("tf", "2.6"): "3.7",
    ("tf", "2.7"): "3.7",
    ("tf", "2.8"): "3.7",
    ("tf", "2.9"): "3.7",
    ("tf", "2.10"): "3.7",
    ("tf", "2.11"): "3.7",
    ("pytorch", "1.13"): "3.7",
}
DEFAULT_PYTHON = "3.10"
ML_PYTHON = "3.7"  # every AI Platform runtime version from 1.15 on (ml.v1.json, pythonVersion)
# Frameworks built against NumPy 1 break on NumPy 2 ("numpy.dtype size changed"); their images
# ship NumPy 1 (TensorFlow < 2.18, scikit-learn < 1.4.2, XGBoost < 2.1, PyTorch < 2.3: each
# project's release notes for its first NumPy 2 build).
_NUMPY_2_SINCE: dict[str, tuple[int, int]] = {
    "tf": (2, 18),
    "sklearn": (1, 5),
    "xgboost": (2, 1),
    "pytorch": (2, 3),
}

# End of availability, from the supported frameworks list's "End of availability" column
# ([P] the training table: TensorFlow 2.12 on 2025-06-30, 2.13 on 2025-07-05). Google retires the
# oldest first, so every older TensorFlow image is past it too ([U] derived: the list no longer
# carries them). 2.14's date differs between copies of the page (2025-09-26 in one, a 2027 date
# for its prediction twin in a later one): it is accepted, as a refusal Vertex may not make is
# the false red this table must not invent. scikit-learn, XGBoost, PyTorch and Ray: no date known.
END_OF_AVAILABILITY: dict[tuple[str, str], date] = {
    ("tf", "2.12"): date(2025, 6, 30),
    ("tf", "2.13"): date(2025, 7, 5),
}
_TF_RETIRED_BEFORE = (2, 12)
_TF_RETIRED_BY = date(2025, 6, 30)
_TF_PREFIXES = ("tf", "tf2")

# The images the operators choose for AI Platform's runtimes (machines.executor_image), cpu and
# gpu ("" = none). TensorFlow 2.15 is the newest whose tf.keras is still Keras 2 (TensorFlow 2.16
# release notes), so AI Platform-era code runs unchanged; its 2.1-2.13 images have reached their
# end of availability (supported frameworks list). scikit-learn and XGBoost images are CPU-only.
# PyTorch was never an AI Platform runtime; its 2.4 images.
DEFAULT_IMAGES: dict[str, tuple[str, str]] = {
    "tensorflow": ("tf-cpu.2-15.py310", "tf-gpu.2-15.py310"),
    "scikit-learn": ("sklearn-cpu.1-6", ""),
    "xgboost": ("xgboost-cpu.2-1", ""),
    "pytorch": ("pytorch-cpu.2-4.py310", "pytorch-gpu.2-4.py310"),
}


@dataclass(frozen=True)
class Runtime:
    """What one pre-built training container (or AI Platform runtime version) holds, as known here."""

    image: str  # sklearn-cpu.1-6, or "runtimeVersion 2.11"
    framework: str  # scikit-learn
    version: str  # 1.6
    python: str  # 3.10
    device: str  # cpu, gpu or tpu
    requirements: tuple[str, ...]  # what to install before the trainer's package
    source: str = ""  # where the list of requirements comes from
    unconfirmed: tuple[str, ...] = ()  # those of them marked [U]

    @property
    def accelerated(self) -> bool:
        return self.device in ("gpu", "tpu")

    def describe(self) -> str:
        return f"{self.framework} {self.version} on Python {self.python} ({self.device})"


def end_of_availability(prefix: str, version: str) -> date | None:
    """The day Vertex AI stopped serving the image ``{prefix}-*.{version}``, where known."""
    if prefix in _TF_PREFIXES:
        known = END_OF_AVAILABILITY.get(("tf", version))
        if known is not None:
            return known
        major, minor = (int(part) for part in version.split("."))
        if (major, minor) < _TF_RETIRED_BEFORE:
            return _TF_RETIRED_BY
    return END_OF_AVAILABILITY.get((prefix, version))


def _packages(prefix: str, major: str, minor: str) -> tuple[tuple[str, ...], str]:
    """What the image carries: its listed packages, or its framework and the Deep Learning base."""
    listed = shipped(prefix, f"{major}.{minor}")
    if listed is not None:
        return listed
    if prefix not in FRAMEWORKS:
        return DLC_BASE, SAMPLES
    requirements = [f"{FRAMEWORKS[prefix][1]}=={major}.{minor}.*"]
    numpy_2 = _NUMPY_2_SINCE.get(prefix)
    if numpy_2 is not None and (int(major), int(minor)) < numpy_2:
        requirements.append("numpy<2")
    return (*requirements, *DLC_BASE), SAMPLES


def runtime_of(uri: str, path: str = "executorImageUri", today: date | None = None) -> Runtime:
    """The runtime of a pre-built training container URI; a ValidationError naming ``path`` otherwise.

    An image past its end of availability is refused: Vertex AI no longer serves it.
    """
    match = PREBUILT_TRAINING_IMAGE.fullmatch(uri)
    if match is None:
        raise ValidationError(
            path,
            "must be a Vertex AI pre-built training container such as "
            f"us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest; got {uri!r}",
        )
    prefix, major, minor = match["framework"], match["major"], match["minor"]
    version = f"{major}.{minor}"
    image = uri.rsplit("/", 1)[-1].removesuffix(":latest")
    retired = end_of_availability(prefix, version)
    if retired is not None and retired <= (today or datetime.now(UTC).date()):
        raise ValidationError(
            path,
            f"{image} is past its end of availability ({retired.isoformat()}): Vertex AI no longer "
            "serves it (https://cloud.google.com/vertex-ai/docs/supported-frameworks-list); use a "
            f"supported image such as {DEFAULT_IMAGES['tensorflow'][0]} or "
            f"{DEFAULT_IMAGES['scikit-learn'][0]}",
        )
    device = match["device"] or "cpu"
    python = (
        f"3.{match['python']}"
        if match["python"]
        else UNSUFFIXED_PYTHON.get((prefix, version), DEFAULT_PYTHON)
    )
    framework = FRAMEWORKS[prefix][0] if prefix in FRAMEWORKS else prefix
    entries, source = _packages(prefix, major, minor)
    requirements = tuple(requirement(e) for e in entries)
    return Runtime(image, framework, version, python, device, requirements, source, unconfirmed(entries))


def ml_runtime_of(runtime_version: str | None, python_version: str | None = None) -> Runtime:
    """What an AI Platform Training (ml v1) job's ``runtimeVersion`` shipped, on its ``pythonVersion``.

    A version this table does not list (or none) gets AI Platform's Google and data libraries,
    unpinned, beside no particular framework.
    """
    python = python_version or ML_PYTHON
    listed = RUNTIME_VERSIONS.get(runtime_version or "")
    entries, source = listed if listed is not None else AI_PLATFORM_LIBRARIES
    image = f"runtimeVersion {runtime_version}" if runtime_version else "AI Platform's runtime"
    framework = "tensorflow" if listed is not None else "AI Platform's libraries"
    requirements = tuple(requirement(e) for e in entries)
    return Runtime(
        image, framework, runtime_version or "", python, "cpu", requirements, source, unconfirmed(entries)
    )

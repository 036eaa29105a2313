"""Vertex AI's pre-built training containers: what each ``executorImageUri`` runs, in one table.

Two readers use it:

- the operators, to choose an image for AI Platform's ``runtimeVersion`` / framework
  (:data:`DEFAULT_IMAGES`, through :func:`airflow_aip.jobs.vertex.machines.executor_image`);
- the local service, to build a trainer's environment the way the container holds it
  (:func:`runtime_of`): the Python minor version and the framework at its version, with the
  trainer's package installed on top, as Vertex pip-installs it into the container.

Sources: the pre-built container list, https://cloud.google.com/vertex-ai/docs/training/pre-built-containers,
and the supported frameworks list, https://cloud.google.com/vertex-ai/docs/supported-frameworks-list
(research/vertex.md §5.1). An image is named
``{framework}-{cpu|gpu}.{MAJOR}-{MINOR}[.py3NN]``; the suffix, where present, is its Python.
Only the framework (and the NumPy it was built against) is modelled: Google does not publish a
package list per training image, and leaving a package out makes a local run stricter than
Vertex, never more lenient.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from airflow_aip.exceptions import ValidationError

# {us|europe|asia}-docker.pkg.dev/vertex-ai/training/..., and the older gcr.io/cloud-aiplatform/training/
# registry: "You must use an image from this list" (aiplatform.v1.json, PythonPackageSpec.executorImageUri).
PREBUILT_TRAINING_IMAGE = re.compile(
    r"(?:(?:us|europe|asia)-docker\.pkg\.dev/vertex-ai|gcr\.io/cloud-aiplatform)/training/"
    r"(?P<framework>[a-z][a-z0-9]*(?:-[a-z0-9]+)*?)(?:-(?P<device>cpu|gpu|tpu))?"
    r"\.(?P<major>[0-9]+)-(?P<minor>[0-9]+)(?:\.py3(?P<python>[0-9]{1,2}))?:latest"
)

# Image prefix -> (framework, the PyPI distribution of that framework's CPU build).
# TensorFlow's GPU images use the same version of `tensorflow`; locally its CPU build runs.
FRAMEWORKS: dict[str, tuple[str, str]] = {
    "tf": ("tensorflow", "tensorflow-cpu"),
    "tf2": ("tensorflow", "tensorflow-cpu"),
    "sklearn": ("scikit-learn", "scikit-learn"),
    "xgboost": ("xgboost", "xgboost"),
    "pytorch": ("pytorch", "torch"),
    "ray": ("ray", "ray"),
}
# The Python of images whose name carries no `.py3NN`: images of 2023 and later are Python 3.10
# (the suffixed ones of the same releases say so); older ones ran AI Platform's Python 3.7.
# [U] unverified: read off the images' names and release dates, not from a published list.
UNSUFFIXED_PYTHON: dict[tuple[str, str], str] = {
    ("sklearn", "1.0"): "3.7",
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
# Frameworks built against NumPy 1 break on NumPy 2 ("numpy.dtype size changed"); their images
# ship NumPy 1 (TensorFlow < 2.18, scikit-learn < 1.4.2, XGBoost < 2.1, PyTorch < 2.3: each
# project's release notes for its first NumPy 2 build).
_NUMPY_2_SINCE: dict[str, tuple[int, int]] = {
    "tf": (2, 18),
    "sklearn": (1, 5),
    "xgboost": (2, 1),
    "pytorch": (2, 3),
}

# The images the operators choose for AI Platform's runtimes (machines.executor_image), cpu and
# gpu ("" = none). TensorFlow 2.15 is the newest whose tf.keras is still Keras 2 (TensorFlow 2.16
# release notes), so AI Platform-era code runs unchanged; its 2.1-2.14 images have reached their
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
    """What one pre-built training container holds, as this table knows it."""

    image: str  # sklearn-cpu.1-6
    framework: str  # scikit-learn
    version: str  # 1.6
    python: str  # 3.10
    device: str  # cpu, gpu or tpu
    requirements: tuple[str, ...]  # what to install before the trainer's package

    @property
    def accelerated(self) -> bool:
        return self.device in ("gpu", "tpu")

    def describe(self) -> str:
        return f"{self.framework} {self.version} on Python {self.python} ({self.device})"


def runtime_of(uri: str, path: str = "executorImageUri") -> Runtime:
    """The runtime of a pre-built training container URI; a ValidationError naming ``path`` otherwise."""
    match = PREBUILT_TRAINING_IMAGE.fullmatch(uri)
    if match is None:
        raise ValidationError(
            path,
            "must be a Vertex AI pre-built training container such as "
            f"us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest; got {uri!r}",
        )
    prefix, major, minor = match["framework"], match["major"], match["minor"]
    version = f"{major}.{minor}"
    device = match["device"] or "cpu"
    python = (
        f"3.{match['python']}"
        if match["python"]
        else UNSUFFIXED_PYTHON.get((prefix, version), DEFAULT_PYTHON)
    )
    image = uri.rsplit("/", 1)[-1].removesuffix(":latest")
    if prefix not in FRAMEWORKS:
        return Runtime(image, prefix, version, python, device, ())
    framework, distribution = FRAMEWORKS[prefix]
    requirements = [f"{distribution}=={version}.*"]
    numpy_2 = _NUMPY_2_SINCE.get(prefix)
    if numpy_2 is not None and (int(major), int(minor)) < numpy_2:
        requirements.append("numpy<2")
    return Runtime(image, framework, version, python, device, tuple(requirements))

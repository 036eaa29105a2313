"""Vertex AI's pre-built prediction containers: which one serves a model, and what it must find.

Two readers use it:

- the register operator, to choose ``containerSpec.imageUri`` from the image the model was
  trained in (:func:`serving_image_for`) when the user gives none;
- the local service, to fail an upload where Vertex AI would (:func:`missing_artifact`): a
  pre-built container loads one file of a fixed name from ``artifactUri``.

Sources: https://cloud.google.com/vertex-ai/docs/predictions/pre-built-containers (the images:
``{us|europe|asia}-docker.pkg.dev/vertex-ai/prediction/{framework}-{cpu|gpu}.{MAJOR}-{MINOR}:latest``,
the list google-cloud-aiplatform 2.7 ships in ``aiplatform/constants/prediction.py``) and
https://cloud.google.com/vertex-ai/docs/training/exporting-model-artifacts (the file names).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.vertex.containers import runtime_of

PREBUILT_SERVING_IMAGE = re.compile(
    r"(?P<repository>us|europe|asia)-docker\.pkg\.dev/vertex-ai/prediction/"
    r"(?P<prefix>[a-z0-9]+)-(?P<device>cpu|gpu)\.(?P<major>[0-9]+)-(?P<minor>[0-9]+):latest"
)
# Image prefix -> (training framework, its versions with a prediction image, newest first).
SERVING_VERSIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "sklearn": (
        "scikit-learn",
        ("1.6", "1.5", "1.4", "1.3", "1.2", "1.0", "0.24", "0.23", "0.22", "0.20"),
    ),
    "xgboost": (
        "xgboost",
        ("2.1", "2.0", "1.7", "1.6", "1.5", "1.4", "1.3", "1.2", "1.1", "0.90", "0.82"),
    ),
    "tf2": ("tensorflow", tuple(f"2.{minor}" for minor in range(15, 0, -1))),
    "pytorch": ("pytorch", ("2.4", "2.3", "2.2", "2.1", "2.0", "1.13", "1.12", "1.11")),
}
# The one file a pre-built container loads from artifactUri (exporting-model-artifacts).
ARTIFACT_FILES: dict[str, tuple[str, ...]] = {
    "sklearn": ("model.joblib", "model.pkl"),
    "xgboost": ("model.bst", "model.joblib", "model.pkl"),
    "tf2": ("saved_model.pb", "saved_model.pbtxt"),
    "pytorch": ("model.mar",),
}
_REPOSITORIES = {"us": "us", "europe": "europe", "asia": "asia"}


@dataclass(frozen=True)
class Serving:
    """What one pre-built prediction container is, as this table knows it."""

    prefix: str  # sklearn
    framework: str  # scikit-learn
    version: str  # 1.6
    device: str  # cpu
    artifact_files: tuple[str, ...]


def serving_of(uri: str) -> Serving | None:
    """The pre-built prediction container ``uri`` names; None for any other image (a custom one)."""
    match = PREBUILT_SERVING_IMAGE.fullmatch(uri)
    if match is None or match["prefix"] not in SERVING_VERSIONS:
        return None
    framework, versions = SERVING_VERSIONS[match["prefix"]]
    version = f"{match['major']}.{match['minor']}"
    if version not in versions:
        return None
    return Serving(match["prefix"], framework, version, match["device"], ARTIFACT_FILES[match["prefix"]])


def _repository(region: str | None) -> str:
    area = (region or "us").split("-", 1)[0]
    return _REPOSITORIES.get(area, "us")


def serving_image_for(
    training_image: str, region: str | None, field: str = "serving_container_image_uri"
) -> str:
    """The CPU prediction container for a model trained in ``training_image``, from ``region``'s registry.

    The same framework at the newest version not newer than the training one (a model pickled by
    scikit-learn 1.6 may not load in 1.5, and no container is newer than the newest listed).
    Raises ValidationError naming ``field`` when there is none: the user must give the image.
    """
    runtime = runtime_of(training_image, field)
    prefix = next(
        (p for p, (framework, _) in SERVING_VERSIONS.items() if framework == runtime.framework), None
    )
    if prefix is None:
        raise ValidationError(
            field,
            f"Vertex AI has no pre-built prediction container for {runtime.framework} (trained in "
            f"{runtime.image}); give a serving container image",
        )
    wanted = _version_key(runtime.version)
    versions = [v for v in SERVING_VERSIONS[prefix][1] if _version_key(v) <= wanted]
    same_major = [v for v in versions if v.split(".")[0] == runtime.version.split(".")[0]]
    if not same_major:
        raise ValidationError(
            field,
            f"no pre-built prediction container serves {runtime.framework} {runtime.version} (trained in "
            f"{runtime.image}); give a serving container image",
        )
    major, minor = same_major[0].split(".")
    return f"{_repository(region)}-docker.pkg.dev/vertex-ai/prediction/{prefix}-cpu.{major}-{minor}:latest"


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def missing_artifact(serving: Serving, artifact_uri: str, names: Iterable[str]) -> str | None:
    """Why ``artifactUri`` cannot be served by this container (None: it can).

    ``names`` are the object names directly below the artifact directory. Exactly one of the
    container's files must be there: the container would not know which to load from two.
    """
    present = sorted(set(names) & set(serving.artifact_files))
    if len(present) == 1:
        return None
    expected = ", ".join(serving.artifact_files)
    if not present:
        return (
            f"Model directory {artifact_uri} is expected to contain exactly one of: [{expected}] for the "
            f"pre-built {serving.framework} {serving.version} prediction container."
        )
    return f"Model directory {artifact_uri} contains more than one of: [{expected}]: {', '.join(present)}."

"""Vertex AI custom training bodies (aiplatform v1): validated once, for the operators and the local service.

Two passes, as for ml v1 (:mod:`airflow_aip.jobs.mlv1.training_input`): the shape comes
from ``aiplatform.v1.json`` (every field, type, enum and format; enums by name or by proto
number, int64 as strings or numbers, answered in canonical proto3 JSON), then the rules the
document states in prose: required fields, worker pool 0 with one replica, one of ``pythonPackageSpec`` and
``containerSpec``, the pre-built training container naming rule for ``executorImageUri``, Cloud
Storage URIs, labels, and the locations Vertex AI serves (the document's regional endpoints:
there is no global endpoint for training).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.labels import validate_labels
from airflow_aip.jobs.locations import AIPLATFORM_V1
from airflow_aip.jobs.mlv1.training_input import duration_seconds
from airflow_aip.jobs.schema import check_object
from airflow_aip.jobs.vertex.study import check_study_spec
from airflow_aip.uris import parse_gcs_uri

CUSTOM_JOB_SCHEMA = "GoogleCloudAiplatformV1CustomJob"
TUNING_JOB_SCHEMA = "GoogleCloudAiplatformV1HyperparameterTuningJob"
MAX_DISPLAY_NAME = 128
MAX_WORKER_POOLS = 4
MAX_PACKAGE_URIS = 100
MAX_ENV_VARS = 100
# {us|europe|asia}-docker.pkg.dev/vertex-ai/training/{framework}-{cpu|gpu}.{MAJOR}-{MINOR}[.py3NN]:latest,
# and the older gcr.io/cloud-aiplatform/training/ registry: "You must use an image from this list".
PREBUILT_TRAINING_IMAGE = re.compile(
    r"(?:(?:us|europe|asia)-docker\.pkg\.dev/vertex-ai|gcr\.io/cloud-aiplatform)/training/"
    r"(?P<framework>[a-z][a-z0-9]*(?:-[a-z0-9]+)*?)(?:-(?P<device>cpu|gpu|tpu))?"
    r"\.(?P<major>[0-9]+)-(?P<minor>[0-9]+)(?:\.py3[0-9]{1,2})?:latest"
)
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_executor_image(uri: str, path: str) -> dict[str, str]:
    """``executorImageUri`` must name a pre-built training container; returns its parts."""
    match = PREBUILT_TRAINING_IMAGE.fullmatch(uri)
    if match is None:
        raise ValidationError(
            path,
            "must be a Vertex AI pre-built training container such as "
            f"us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-14.py310:latest; got {uri!r}",
        )
    return {k: v for k, v in match.groupdict().items() if v}


def _check_python_package(spec: Mapping[str, Any], path: str) -> None:
    for name in ("executorImageUri", "pythonModule"):
        if not spec.get(name):
            raise ValidationError(f"{path}.{name}", "is required")
    check_executor_image(spec["executorImageUri"], f"{path}.executorImageUri")
    uris = spec.get("packageUris") or []
    if not uris:
        raise ValidationError(f"{path}.packageUris", "is required (at least one gs:// URI)")
    if len(uris) > MAX_PACKAGE_URIS:
        raise ValidationError(f"{path}.packageUris", f"at most {MAX_PACKAGE_URIS} URIs, got {len(uris)}")
    for i, uri in enumerate(uris):
        parse_gcs_uri(uri, f"{path}.packageUris[{i}]", require_object=True)
    if not _MODULE.fullmatch(spec["pythonModule"]):
        raise ValidationError(
            f"{path}.pythonModule", f"must be a dotted module name, got {spec['pythonModule']!r}"
        )
    _check_env(spec.get("env") or [], f"{path}.env")


def _check_env(env: Sequence[Mapping[str, Any]], path: str) -> None:
    if len(env) > MAX_ENV_VARS:
        raise ValidationError(path, f"at most {MAX_ENV_VARS} variables, got {len(env)}")
    for i, var in enumerate(env):
        if not _ENV_NAME.fullmatch(str(var.get("name", ""))):
            raise ValidationError(f"{path}[{i}].name", f"must be a variable name, got {var.get('name')!r}")


def _is_empty_pool(pool: Mapping[str, Any]) -> bool:
    return not pool or (int(pool.get("replicaCount", "0") or 0) == 0 and not pool.get("machineSpec"))


def _check_worker_pool(pool: Mapping[str, Any], index: int, path: str) -> None:
    where = f"{path}[{index}]"
    if not (pool.get("machineSpec") or {}).get("machineType"):
        raise ValidationError(f"{where}.machineSpec.machineType", "is required")
    count = int(pool.get("replicaCount", "1" if index == 0 else "0"))  # the primary pool runs one replica
    if index == 0 and count != 1:
        raise ValidationError(f"{where}.replicaCount", f"must be 1 for the primary pool, got {count}")
    if count < 0:
        raise ValidationError(f"{where}.replicaCount", f"must not be negative, got {count}")
    accelerator = pool["machineSpec"]
    if accelerator.get("acceleratorCount", 0) < 0:
        raise ValidationError(f"{where}.machineSpec.acceleratorCount", "must not be negative")
    has_python, has_container = "pythonPackageSpec" in pool, "containerSpec" in pool
    if has_python and has_container:
        raise ValidationError(where, "set exactly one of pythonPackageSpec and containerSpec, not both")
    if has_container:
        if not pool["containerSpec"].get("imageUri"):
            raise ValidationError(f"{where}.containerSpec.imageUri", "is required")
        _check_env(pool["containerSpec"].get("env") or [], f"{where}.containerSpec.env")
    elif has_python:
        _check_python_package(pool["pythonPackageSpec"], f"{where}.pythonPackageSpec")
    else:
        raise ValidationError(where, "one of pythonPackageSpec and containerSpec is required")


def check_job_spec(spec: Mapping[str, Any], path: str) -> None:
    """A ``CustomJobSpec`` (already shape-checked): the rules its descriptions state."""
    pools = spec.get("workerPoolSpecs") or []
    if not pools:
        raise ValidationError(f"{path}.workerPoolSpecs", "is required (at least the primary pool)")
    if len(pools) > MAX_WORKER_POOLS:
        raise ValidationError(
            f"{path}.workerPoolSpecs", f"at most {MAX_WORKER_POOLS} pools, got {len(pools)}"
        )
    for index, pool in enumerate(pools):
        if index and _is_empty_pool(pool):
            continue  # "can be skipped by providing an empty value"
        _check_worker_pool(pool, index, f"{path}.workerPoolSpecs")
    base = spec.get("baseOutputDirectory")
    if base is not None:
        if not base.get("outputUriPrefix"):
            raise ValidationError(f"{path}.baseOutputDirectory.outputUriPrefix", "is required")
        parse_gcs_uri(base["outputUriPrefix"], f"{path}.baseOutputDirectory.outputUriPrefix")
    timeout = (spec.get("scheduling") or {}).get("timeout")
    if timeout is not None and duration_seconds(timeout) <= 0:
        raise ValidationError(f"{path}.scheduling.timeout", f"must be positive, got {timeout}")


def _mapping(body: Any) -> Any:
    if not isinstance(body, Mapping):
        raise ValidationError("body", f"must be a JSON object, got {type(body).__name__}")
    return body


def _check_common(job: dict[str, Any]) -> None:
    name = job.get("displayName")
    if not name:
        raise ValidationError("displayName", "is required")
    if len(name) > MAX_DISPLAY_NAME:
        raise ValidationError("displayName", f"at most {MAX_DISPLAY_NAME} characters, got {len(name)}")
    if "labels" in job:
        job["labels"] = validate_labels(job["labels"])


def validate_custom_job(body: Any) -> dict[str, Any]:
    """A ``CustomJob`` body for ``customJobs.create``, checked and canonical."""
    job = check_object(_mapping(body), CUSTOM_JOB_SCHEMA, "", document=AIPLATFORM_V1)
    _check_common(job)
    if "jobSpec" not in job:
        raise ValidationError("jobSpec", "is required")
    check_job_spec(job["jobSpec"], "jobSpec")
    return job


def validate_tuning_job(body: Any) -> dict[str, Any]:
    """A ``HyperparameterTuningJob`` body for ``hyperparameterTuningJobs.create``, checked and canonical."""
    job = check_object(_mapping(body), TUNING_JOB_SCHEMA, "", document=AIPLATFORM_V1)
    _check_common(job)
    for name in ("studySpec", "trialJobSpec"):
        if name not in job:
            raise ValidationError(name, "is required")
    for name in ("maxTrialCount", "parallelTrialCount"):
        if job.get(name, 0) < 1:
            raise ValidationError(name, f"is required and must be at least 1, got {job.get(name, 0)}")
    if job.get("maxFailedTrialCount", 0) < 0:
        raise ValidationError("maxFailedTrialCount", "must not be negative")
    check_study_spec(job["studySpec"], "studySpec")
    check_job_spec(job["trialJobSpec"], "trialJobSpec")
    return job

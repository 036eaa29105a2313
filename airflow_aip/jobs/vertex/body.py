"""Vertex AI custom training bodies (aiplatform v1): validated once, for the operators and the local service.

Two passes, as for ml v1 (:mod:`airflow_aip.jobs.training_input`): the shape comes
from ``aiplatform.v1.json`` (every field, type, enum and format; enums by name or by proto
number, int64 as strings or numbers, answered in canonical proto3 JSON), then the rules the
document states in prose: required fields, worker pool 0 with one replica, one of ``pythonPackageSpec`` and
``containerSpec``, the pre-built training container naming rule for ``executorImageUri``, Cloud
Storage URIs, labels, and the locations Vertex AI serves (the document's regional endpoints:
there is no global endpoint for training). Machines, accelerators and scheduling are checked against
:mod:`.hardware`'s table; the resource names the job refers to (service account, network,
TensorBoard, KMS key, persistent resource) against the formats the document gives.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.labels import VERTEX_LABELS, validate_labels
from airflow_aip.jobs.locations import AIPLATFORM_V1
from airflow_aip.jobs.schema import check_object
from airflow_aip.jobs.training_input import duration_seconds
from airflow_aip.jobs.vertex.containers import PREBUILT_TRAINING_IMAGE, runtime_of
from airflow_aip.jobs.vertex.enums import ENUM_NUMBERS
from airflow_aip.jobs.vertex.hardware import (
    check_disk_spec,
    check_machine_spec,
    check_scheduling,
    check_tpu_pools,
)
from airflow_aip.jobs.vertex.study import check_study_spec
from airflow_aip.uris import parse_gcs_uri

CUSTOM_JOB_SCHEMA = "GoogleCloudAiplatformV1CustomJob"
TUNING_JOB_SCHEMA = "GoogleCloudAiplatformV1HyperparameterTuningJob"
MAX_DISPLAY_NAME = 128
MAX_WORKER_POOLS = 4
MAX_PACKAGE_URIS = 100
MAX_ENV_VARS = 100
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Resource names of CustomJobSpec (and the job's encryptionSpec), as aiplatform.v1.json describes
# them; a user-managed service account ends in .iam.gserviceaccount.com, the Compute Engine default
# one in @developer.gserviceaccount.com.
_NAMES = {
    "serviceAccount": (
        re.compile(r"[a-z0-9][a-z0-9._-]*@(?:[a-z0-9][a-z0-9.-]*\.iam|developer)\.gserviceaccount\.com"),
        "a service account email such as trainer@my-project.iam.gserviceaccount.com",
    ),
    "network": (
        re.compile(r"projects/[0-9]+/global/networks/[^/]+"),
        "projects/{project number}/global/networks/{network}",
    ),
    "tensorboard": (
        re.compile(r"projects/[^/]+/locations/[^/]+/tensorboards/[^/]+"),
        "projects/{project}/locations/{location}/tensorboards/{tensorboard}",
    ),
    "persistentResourceId": (
        re.compile(r"[a-z][a-z0-9-]{0,62}"),
        "a resource ID: lowercase letters, digits and hyphens, starting with a letter, at most 63",
    ),
}
TRIAL_JOB_SPEC = "trialJobSpec"
JOB_SPEC = "jobSpec"


def job_spec_key(body: Mapping[str, Any]) -> str:
    """Where a body keeps its CustomJobSpec: a tuning job's trials' ``trialJobSpec``, else ``jobSpec``."""
    return TRIAL_JOB_SPEC if TRIAL_JOB_SPEC in body else JOB_SPEC


def job_spec_of(body: Mapping[str, Any]) -> Mapping[str, Any]:
    """The CustomJobSpec of a CustomJob or of a tuning job's trials (empty when there is none)."""
    spec = body.get(job_spec_key(body))
    return spec if isinstance(spec, Mapping) else {}


_KMS_KEY = re.compile(r"projects/[^/]+/locations/(?P<location>[^/]+)/keyRings/[^/]+/cryptoKeys/[^/]+")


def check_executor_image(uri: str, path: str) -> dict[str, str]:
    """``executorImageUri`` must name a pre-built training container; returns its parts."""
    runtime_of(uri, path)  # the container table's rule, with its message
    match = PREBUILT_TRAINING_IMAGE.fullmatch(uri)
    return {k: v for k, v in (match.groupdict() if match else {}).items() if v}


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


def _check_worker_pool(pool: Mapping[str, Any], index: int, path: str, region: str | None) -> None:
    where = f"{path}[{index}]"
    if not (pool.get("machineSpec") or {}).get("machineType"):
        raise ValidationError(f"{where}.machineSpec.machineType", "is required")
    count = int(pool.get("replicaCount", "1" if index == 0 else "0"))  # the primary pool runs one replica
    if index == 0 and count != 1:
        raise ValidationError(f"{where}.replicaCount", f"must be 1 for the primary pool, got {count}")
    if count < 0:
        raise ValidationError(f"{where}.replicaCount", f"must not be negative, got {count}")
    check_machine_spec(pool["machineSpec"], where, region)
    check_disk_spec(pool.get("diskSpec") or {}, where)
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


def _check_names(spec: Mapping[str, Any], path: str) -> None:
    """The resource names a job spec refers to; a TensorBoard needs a service account to write as."""
    for name, (pattern, form) in _NAMES.items():
        if name in spec and not pattern.fullmatch(str(spec[name])):
            raise ValidationError(f"{path}.{name}", f"must be {form}; got {spec[name]!r}")
    if spec.get("tensorboard") and not spec.get("serviceAccount"):
        # python-aiplatform (jobs.py): "`service_account` is required with provided `tensorboard`"
        raise ValidationError(f"{path}.serviceAccount", "is required with a tensorboard")


def check_encryption(job: Mapping[str, Any], region: str | None = None) -> None:
    """``encryptionSpec.kmsKeyName``: "must be in the same region as the resource" (checked given one)."""
    if "encryptionSpec" not in job:
        return
    key = str(job["encryptionSpec"].get("kmsKeyName", ""))
    match = _KMS_KEY.fullmatch(key)
    field = "encryptionSpec.kmsKeyName"
    if match is None:
        raise ValidationError(
            field, f"must be projects/{{p}}/locations/{{l}}/keyRings/{{r}}/cryptoKeys/{{k}}; got {key!r}"
        )
    if region is not None and match["location"] != region:
        raise ValidationError(field, f"the key must be in the job's region {region}, not {match['location']}")


def check_job_spec(spec: Mapping[str, Any], path: str, region: str | None = None) -> None:
    """A ``CustomJobSpec`` (already shape-checked): the rules its descriptions state.

    ``region`` (the URL's location; the body has none) adds the per-region accelerator check.
    """
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
        _check_worker_pool(pool, index, f"{path}.workerPoolSpecs", region)
    check_tpu_pools(spec, path)
    base = spec.get("baseOutputDirectory")
    if base is not None:
        if not base.get("outputUriPrefix"):
            raise ValidationError(f"{path}.baseOutputDirectory.outputUriPrefix", "is required")
        parse_gcs_uri(base["outputUriPrefix"], f"{path}.baseOutputDirectory.outputUriPrefix")
    timeout = (spec.get("scheduling") or {}).get("timeout")
    if timeout is not None and duration_seconds(timeout) <= 0:
        raise ValidationError(f"{path}.scheduling.timeout", f"must be positive, got {timeout}")
    check_scheduling(spec, path)
    _check_names(spec, path)


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
        job["labels"] = validate_labels(job["labels"], rule=VERTEX_LABELS)


def validate_custom_job(body: Any, region: str | None = None) -> dict[str, Any]:
    """A ``CustomJob`` body for ``customJobs.create``, checked and canonical (``region``: the URL's)."""
    job = check_object(_mapping(body), CUSTOM_JOB_SCHEMA, "", document=AIPLATFORM_V1, enums=ENUM_NUMBERS)
    _check_common(job)
    if "jobSpec" not in job:
        raise ValidationError("jobSpec", "is required")
    check_job_spec(job["jobSpec"], "jobSpec", region)
    check_encryption(job, region)
    return job


def validate_tuning_job(body: Any, region: str | None = None) -> dict[str, Any]:
    """A ``HyperparameterTuningJob`` body for ``hyperparameterTuningJobs.create``, checked and canonical."""
    job = check_object(_mapping(body), TUNING_JOB_SCHEMA, "", document=AIPLATFORM_V1, enums=ENUM_NUMBERS)
    _check_common(job)
    for name in ("studySpec", "trialJobSpec"):
        if name not in job:
            raise ValidationError(name, "is required")
    for name in ("maxTrialCount", "parallelTrialCount"):
        if job.get(name, 0) < 1:
            raise ValidationError(name, f"is required and must be at least 1, got {job.get(name, 0)}")
    # [U] unverified: whether Google refuses parallelTrialCount > maxTrialCount (ml v1 refused
    # maxParallelTrials > maxTrials); accepted, and at most maxTrialCount trials run at once.
    if job.get("maxFailedTrialCount", 0) < 0:
        raise ValidationError("maxFailedTrialCount", "must not be negative")
    check_study_spec(job["studySpec"], "studySpec")
    check_job_spec(job["trialJobSpec"], "trialJobSpec", region)
    check_encryption(job, region)
    return job

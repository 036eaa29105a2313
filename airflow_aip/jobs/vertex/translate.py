"""AI Platform's ``trainingInput`` as a Vertex AI CustomJob or HyperparameterTuningJob body.

Our users keep writing jobs in AI Platform's vocabulary (a config.yaml's ``trainingInput``); AI
Platform Training is shut down, so we submit to Vertex AI custom training. This is Google's
migration mapping (https://cloud.google.com/vertex-ai/docs/start/ai-platform-users) made
executable: role-named replicas become ``workerPoolSpecs[0..3]``, machine names and runtime
versions go through the tables of :mod:`.machines`, ``hyperparameters`` make a
HyperparameterTuningJob. Whatever Vertex AI cannot take is a ValidationError naming the
trainingInput field: nothing is dropped silently. ``docs/vertex-migration.md`` has the whole table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.training_input import deep_merge
from airflow_aip.jobs.trials import DEFAULT_METRIC_TAG, Goal
from airflow_aip.jobs.vertex.body import check_executor_image, validate_custom_job, validate_tuning_job
from airflow_aip.jobs.vertex.enums import ENUM_NUMBERS
from airflow_aip.jobs.vertex.hardware import check_disk_spec
from airflow_aip.jobs.vertex.machines import (
    SCALE_TIERS,
    UNTRANSLATABLE_TIERS,
    executor_image,
    framework_name,
    machine_spec,
)
from airflow_aip.jobs.vertex.placement import apply_placement

CUSTOM_JOBS = "customJobs"
TUNING_JOBS = "hyperparameterTuningJobs"
TI = "trainingInput"
# workerPoolSpecs[i] is the i-th role: "primary replica (chief/master), workers, parameter servers,
# evaluators" (https://cloud.google.com/vertex-ai/docs/training/distributed-training).
ROLES = ("master", "worker", "parameterServer", "evaluator")
_FLEX_START = ("FLEX_START", ENUM_NUMBERS["GoogleCloudAiplatformV1Scheduling.strategy"]["FLEX_START"])
_JOB_DIR_FLAGS = ("--job-dir", "--job_dir")
_JOB_DIR_PREFIXES = ("--job-dir=", "--job_dir=")
# Vertex AI's early stopping closest to AI Platform's: "Early stopping is requested for the current
# Trial if there is very low probability to exceed the optimal value found so far" (aiplatform.v1.json,
# StudySpecDecayCurveAutomatedStoppingSpec), on steps as hypertune reports them (global_step).
EARLY_STOPPING = {"decayCurveStoppingSpec": {"useElapsedDuration": False}}

Program = Callable[[str, Mapping[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class VertexRequest:
    """What to create: ``kind``, the collection (CUSTOM_JOBS or TUNING_JOBS); ``body``, canonical."""

    kind: str
    body: dict[str, Any]
    resume_from: str | None = None  # hyperparameters.resumePreviousJobId (jobs.ladder_trials)


def to_vertex(
    training_input: Mapping[str, Any] | None,
    *,
    display_name: str,
    labels: Mapping[str, str],
    executor_image_uri: str | None = None,
    framework: str | None = None,
    vertex_job: Mapping[str, Any] | None = None,
    placement: Mapping[str, Any] | None = None,
) -> VertexRequest:
    """A validated Vertex AI request from an (already validated) trainingInput and/or a Vertex body.

    ``vertex_job`` (Vertex AI's own REST vocabulary) is deep-merged over the translation: mappings
    merge, lists replace. Without a trainingInput it is the whole body. ``display_name`` and
    ``labels`` win over both. A tuning job when there are ``hyperparameters`` or a ``studySpec``.
    ``placement`` (the operator's scheduling and placement arguments, :mod:`..placement`) goes on
    top of everything.
    """
    overlay = _overlay(vertex_job)
    if training_input:
        kind = TUNING_JOBS if "hyperparameters" in training_input or "studySpec" in overlay else CUSTOM_JOBS
        strategy = (placement or {}).get("scheduling_strategy")  # for trainingInput.scheduling.maxWaitTime
        seen = (
            deep_merge(overlay, {"jobSpec": {"scheduling": {"strategy": strategy}}}) if strategy else overlay
        )
        base = _translate(training_input, kind, seen, executor_image_uri, framework)
    else:
        if not overlay:
            raise ValidationError("vertex_job", f"is required when there is no {TI}")
        for name, value in (("executor_image_uri", executor_image_uri), ("framework", framework)):
            if value is not None:
                raise ValidationError(
                    name, f"only applies to a {TI}; set pythonPackageSpec.executorImageUri in vertex_job"
                )
        kind = TUNING_JOBS if "studySpec" in overlay else CUSTOM_JOBS
        base = {}
    placed = apply_placement(deep_merge(base, overlay), placement or {})
    body = deep_merge(placed, {"displayName": display_name, "labels": dict(labels)})
    if not body["labels"]:
        del body["labels"]
    validate = validate_tuning_job if kind == TUNING_JOBS else validate_custom_job
    # The region's accelerators are checked too when the trainingInput names it.
    region = (training_input or {}).get("region")
    resume = ((training_input or {}).get("hyperparameters") or {}).get("resumePreviousJobId") or None
    return VertexRequest(kind, validate(body, region=str(region) if region else None), resume)


def _overlay(vertex_job: Mapping[str, Any] | None) -> dict[str, Any]:
    if vertex_job is None:
        return {}
    if not isinstance(vertex_job, Mapping):
        raise ValidationError("vertex_job", f"must be a mapping, got {type(vertex_job).__name__}")
    return dict(vertex_job)


def _translate(
    spec: Mapping[str, Any],
    kind: str,
    overlay: Mapping[str, Any],
    executor_image_uri: str | None,
    framework: str | None,
) -> dict[str, Any]:
    if spec.get("useChiefInTfConfig"):
        raise ValidationError(
            f"{TI}.useChiefInTfConfig",
            "Vertex AI has no such setting: it writes TF_CONFIG itself; remove it (false is accepted)",
        )
    job_spec = _job_spec(spec, overlay, _program(spec, executor_image_uri, framework))
    body: dict[str, Any] = {}
    kms_key = (spec.get("encryptionConfig") or {}).get("kmsKeyName")
    if kms_key:
        body["encryptionSpec"] = {"kmsKeyName": kms_key}
    if kind == CUSTOM_JOBS:
        body["jobSpec"] = job_spec
        return body
    body.update(maxTrialCount=1, parallelTrialCount=1, trialJobSpec=job_spec)
    if "hyperparameters" in spec:
        body.update(study_fields(spec["hyperparameters"]))
    return body


def _job_spec(spec: Mapping[str, Any], overlay: Mapping[str, Any], program: Program) -> dict[str, Any]:
    job: dict[str, Any] = {"workerPoolSpecs": worker_pools(spec, program)}
    if spec.get("jobDir"):
        job["baseOutputDirectory"] = {"outputUriPrefix": spec["jobDir"]}
    scheduling = _scheduling(spec.get("scheduling") or {}, overlay)
    if scheduling:
        job["scheduling"] = scheduling
    for name in ("serviceAccount", "network", "enableWebAccess"):
        if name in spec:
            job[name] = spec[name]
    return job


def _scheduling(scheduling: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """maxRunningTime -> timeout; maxWaitTime -> maxWaitDuration, only under FLEX_START; no priority."""
    out: dict[str, Any] = {}
    if "maxRunningTime" in scheduling:
        out["timeout"] = scheduling["maxRunningTime"]
    if scheduling.get("priority", 0):
        raise ValidationError(
            f"{TI}.scheduling.priority",
            "Vertex AI has no job priority; remove it (0, the default, is accepted)",
        )
    if "maxWaitTime" in scheduling:
        if _strategy(overlay) not in _FLEX_START:
            raise ValidationError(
                f"{TI}.scheduling.maxWaitTime",
                "Vertex AI limits the wait for resources only with scheduling.strategy FLEX_START "
                "(maxWaitDuration); pass placement={'strategy': 'FLEX_START'} (or set it in vertex_job), "
                "or remove maxWaitTime",
            )
        out["maxWaitDuration"] = scheduling["maxWaitTime"]
    return out


def _strategy(overlay: Mapping[str, Any]) -> Any:
    for name in ("jobSpec", "trialJobSpec"):
        strategy = ((overlay.get(name) or {}).get("scheduling") or {}).get("strategy")
        if strategy is not None:
            return strategy
    return None


def _roles(spec: Mapping[str, Any]) -> dict[str, tuple[str, int]]:
    """Each role's machine name and replica count, from the scale tier or CUSTOM's fields."""
    tier = spec.get("scaleTier", "BASIC")
    if tier in UNTRANSLATABLE_TIERS:
        raise ValidationError(f"{TI}.scaleTier", f"{tier}: {UNTRANSLATABLE_TIERS[tier]}")
    if tier != "CUSTOM":
        for role in ROLES:
            if spec.get(f"{role}Type"):
                raise ValidationError(
                    f"{TI}.{role}Type", f"is only read when scaleTier is CUSTOM, not {tier}"
                )
        return dict(SCALE_TIERS[tier])
    roles = {"master": (str(spec["masterType"]), 1)}
    for role in ROLES[1:]:
        count = int(spec.get(f"{role}Count", "0"))
        if count:
            roles[role] = (str(spec[f"{role}Type"]), count)
        elif spec.get(f"{role}Type"):
            raise ValidationError(f"{TI}.{role}Type", f"is set but {role}Count is 0: set both or neither")
    return roles


def worker_pools(spec: Mapping[str, Any], program: Program) -> list[dict[str, Any]]:
    """``workerPoolSpecs``: master, workers, parameter servers, evaluators; a skipped pool is ``{}``."""
    roles = _roles(spec)
    pools: list[dict[str, Any]] = []
    for role in ROLES:
        config = spec.get(f"{role}Config") or {}
        if role not in roles:
            if config:
                raise ValidationError(f"{TI}.{role}Config", f"is set but the job has no {role} replicas")
            pools.append({})
            continue
        if config.get("tpuTfVersion"):
            raise ValidationError(f"{TI}.{role}Config.tpuTfVersion", "Vertex AI has no TPU runtime versions")
        name, count = roles[role]
        machine = machine_spec(name, config.get("acceleratorConfig"), f"{TI}.{role}")
        pool: dict[str, Any] = {"machineSpec": machine, "replicaCount": str(count)}
        if config.get("diskConfig"):
            check_disk_spec(config["diskConfig"], f"{TI}.{role}Config", name="diskConfig")
            pool["diskSpec"] = dict(config["diskConfig"])
        pool.update(program(role, machine))
        pools.append(pool)
    while not pools[-1]:
        pools.pop()
    return pools


def with_job_dir(args: list[str], job_dir: str | None) -> list[str]:
    """AI Platform passed ``--job-dir`` to every trainer; Vertex AI does not, so we do (once)."""
    given = any(arg in _JOB_DIR_FLAGS or arg.startswith(_JOB_DIR_PREFIXES) for arg in args)
    if not job_dir or given:
        return args
    return [*args, f"--job-dir={job_dir}"]


def _program(spec: Mapping[str, Any], executor_image_uri: str | None, framework: str | None) -> Program:
    """What each pool runs: the Python package in a pre-built container, or custom containers."""
    if (spec.get("masterConfig") or {}).get("imageUri"):
        for name, value in (("executor_image_uri", executor_image_uri), ("framework", framework)):
            if value is not None:
                raise ValidationError(name, "only for a Python package; this job runs custom containers")
        if spec.get("pythonVersion"):
            raise ValidationError(f"{TI}.pythonVersion", "only for a Python package: a container has its own")
        return lambda role, machine: {"containerSpec": _container_spec(spec, role)}
    chosen = framework_name(framework)
    if executor_image_uri is not None:
        check_executor_image(executor_image_uri, "executor_image_uri")

    def python_package(role: str, machine: Mapping[str, Any]) -> dict[str, Any]:
        if (spec.get(f"{role}Config") or {}).get("imageUri"):
            raise ValidationError(
                f"{TI}.{role}Config.imageUri", "needs masterConfig.imageUri: custom containers in every pool"
            )
        gpu = bool(machine.get("acceleratorType"))
        package: dict[str, Any] = {
            "executorImageUri": executor_image_uri or executor_image(spec, chosen, gpu=gpu),
            "packageUris": list(spec["packageUris"]),
            "pythonModule": spec["pythonModule"],
        }
        args = with_job_dir(list(spec.get("args") or []), spec.get("jobDir"))
        if args:
            package["args"] = args
        return {"pythonPackageSpec": package}

    return python_package


def _container_spec(spec: Mapping[str, Any], role: str) -> dict[str, Any]:
    """A role's image, else the master's ("If workerConfig.imageUri has not been set, AI Platform uses
    the value of masterConfig.imageUri", ml.v1.json); its command; its containerArgs, else ``args``."""
    config = spec.get(f"{role}Config") or {}
    container: dict[str, Any] = {"imageUri": config.get("imageUri") or spec["masterConfig"]["imageUri"]}
    if config.get("containerCommand"):
        container["command"] = list(config["containerCommand"])
    args = with_job_dir(list(config.get("containerArgs") or spec.get("args") or []), spec.get("jobDir"))
    if args:
        container["args"] = args
    return container


def study_fields(hyperparameters: Mapping[str, Any]) -> dict[str, Any]:
    """ml v1's HyperparameterSpec as a HyperparameterTuningJob's studySpec and trial counts."""
    # resumePreviousJobId is not a study field on Vertex AI: to_vertex hands it to the submit path.
    goal = Goal.parse(hyperparameters.get("goal"), "hyperparameters.goal").value
    metric_id = hyperparameters.get("hyperparameterMetricTag") or DEFAULT_METRIC_TAG
    study: dict[str, Any] = {
        "metrics": [{"metricId": metric_id, "goal": goal}],
        "parameters": [parameter_spec(param) for param in hyperparameters.get("params") or []],
    }
    if "algorithm" in hyperparameters:
        study["algorithm"] = hyperparameters["algorithm"]
    if hyperparameters.get("enableTrialEarlyStopping"):
        study.update(EARLY_STOPPING)
    out: dict[str, Any] = {
        "studySpec": study,
        "maxTrialCount": hyperparameters.get("maxTrials", 1),
        "parallelTrialCount": hyperparameters.get("maxParallelTrials", 1),
    }
    if "maxFailedTrials" in hyperparameters:
        out["maxFailedTrialCount"] = hyperparameters["maxFailedTrials"]
    return out


def parameter_spec(param: Mapping[str, Any]) -> dict[str, Any]:
    """One ml v1 ParameterSpec as a StudySpecParameterSpec (int64 bounds as strings, NONE scale unset)."""
    out: dict[str, Any] = {"parameterId": param["parameterName"]}
    kind = param["type"]
    if kind == "DOUBLE":
        out["doubleValueSpec"] = {"minValue": float(param["minValue"]), "maxValue": float(param["maxValue"])}
    elif kind == "INTEGER":
        bounds = {name: str(int(param[name])) for name in ("minValue", "maxValue")}
        out["integerValueSpec"] = bounds
    elif kind == "CATEGORICAL":
        out["categoricalValueSpec"] = {"values": list(param["categoricalValues"])}
    else:
        out["discreteValueSpec"] = {"values": [float(v) for v in param["discreteValues"]]}
    if param.get("scaleType", "NONE") != "NONE":
        out["scaleType"] = param["scaleType"]
    return out

"""Build and validate ``trainingInput`` and the whole ``Job`` body, before any request.

Two passes: the shape (every field, type and enum from the discovery document, see
:mod:`.schema`), then the rules AI Platform's documentation states in prose (CUSTOM needs masterType,
package/module versus a custom container image, ``maxWaitTime`` of at least 1800s, the
hyperparameter rules). The operator and the local service both call these, so a body the
operator accepts is a body the local service accepts.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.hyperparameters import check_hyperparameters
from airflow_aip.jobs.ids import validate_job_id
from airflow_aip.jobs.labels import validate_labels
from airflow_aip.jobs.locations import check_location
from airflow_aip.jobs.schema import JOB_SCHEMA, TRAINING_INPUT_SCHEMA, check_object, schema
from airflow_aip.uris import parse_gcs_uri

TI = "trainingInput"
MIN_MAX_WAIT_SECONDS = 1800
MAX_PACKAGE_URIS = 100  # the API's limit on trainingInput.packageUris (staging checks it too)
REPLICAS = ("master", "worker", "parameterServer", "evaluator")
# Set by the server on a job it returns. job_service.proto (google/cloud/ml/v1, googleapis) calls
# the ``output`` oneof (trainingOutput, predictionOutput) "Output only. The current result of the
# job." [P]; ml.v1.json does not mark them, so the schema keeps them. In a create they are checked
# for shape and dropped, as every output-only field is ("the server must ignore it and must not
# throw an error", field_behavior.proto). [U] unverified: what AI Platform itself answered for
# them, and for ``etag`` (a read-modify-write token, meaningless in a create: dropped too).
SERVER_SET_JOB_FIELDS = frozenset({"trainingOutput", "predictionOutput", "etag"})
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def duration_seconds(value: str) -> Decimal:
    """``"3600s"`` -> ``Decimal(3600)`` (the value is shape-checked already)."""
    return Decimal(value[:-1])


def _check_program(spec: Mapping[str, Any]) -> None:
    """Python package + module, or a custom container image: exactly one of the two."""
    image = (spec.get("masterConfig") or {}).get("imageUri")
    if image:
        _check_container_only(spec)
    else:
        _check_python_program(spec)
    for replica in REPLICAS:
        _check_replica(spec, replica, has_image=bool(image))


def _check_container_only(spec: Mapping[str, Any]) -> None:
    for name in ("packageUris", "pythonModule", "runtimeVersion"):
        if spec.get(name):
            raise ValidationError(
                f"{TI}.{name}", "must be unset when masterConfig.imageUri (a custom container) is set"
            )


def _check_python_program(spec: Mapping[str, Any]) -> None:
    for name in ("packageUris", "pythonModule"):
        if not spec.get(name):
            raise ValidationError(f"{TI}.{name}", "is required unless masterConfig.imageUri is set")
    _check_package_uris(spec["packageUris"])
    module = spec["pythonModule"]
    if not _MODULE.fullmatch(module):
        raise ValidationError(f"{TI}.pythonModule", f"must be a dotted Python module name, got {module!r}")


def _check_package_uris(uris: list[str]) -> None:
    if len(uris) > MAX_PACKAGE_URIS:
        raise ValidationError(f"{TI}.packageUris", f"at most {MAX_PACKAGE_URIS} URIs, got {len(uris)}")
    for i, uri in enumerate(uris):
        parse_gcs_uri(uri, f"{TI}.packageUris[{i}]", require_object=True)


def _check_replica(spec: Mapping[str, Any], replica: str, *, has_image: bool) -> None:
    """A replica's container command/args need an image and exclude ``args``; accelerators are complete."""
    config = spec.get(f"{replica}Config") or {}
    where = f"{TI}.{replica}Config"
    for name in ("containerCommand", "containerArgs"):
        if config.get(name) and not (has_image or config.get("imageUri")):
            raise ValidationError(f"{where}.{name}", "needs a custom container (imageUri)")
        if config.get(name) and spec.get("args"):
            raise ValidationError(f"{where}.{name}", "and trainingInput.args are mutually exclusive")
    accelerator = config.get("acceleratorConfig") or {}
    if not accelerator:
        return
    if int(accelerator.get("count", "0")) < 1:
        raise ValidationError(f"{where}.acceleratorConfig.count", "must be at least 1")
    if accelerator.get("type", "ACCELERATOR_TYPE_UNSPECIFIED") == "ACCELERATOR_TYPE_UNSPECIFIED":
        raise ValidationError(f"{where}.acceleratorConfig.type", "is required")


def _check_cluster(spec: Mapping[str, Any]) -> None:
    """scaleTier CUSTOM names its machines; replica counts exist only in CUSTOM."""
    tier = spec.get("scaleTier", "BASIC")
    if tier == "CUSTOM" and not spec.get("masterType"):
        raise ValidationError(f"{TI}.masterType", "is required when scaleTier is CUSTOM")
    for replica in ("worker", "parameterServer", "evaluator"):
        count = int(spec.get(f"{replica}Count", "0"))
        if count < 0:
            raise ValidationError(f"{TI}.{replica}Count", f"must not be negative, got {count}")
        if count and tier != "CUSTOM":
            raise ValidationError(
                f"{TI}.{replica}Count", f"can only be set when scaleTier is CUSTOM, not {tier}"
            )
        if count and not spec.get(f"{replica}Type"):
            raise ValidationError(f"{TI}.{replica}Type", f"is required when {replica}Count is {count}")


def _check_scheduling(spec: Mapping[str, Any]) -> None:
    scheduling = spec.get("scheduling") or {}
    wait = scheduling.get("maxWaitTime")
    if wait is not None and duration_seconds(wait) < MIN_MAX_WAIT_SECONDS:
        raise ValidationError(
            f"{TI}.scheduling.maxWaitTime", f"must be at least {MIN_MAX_WAIT_SECONDS}s, got {wait}"
        )
    running = scheduling.get("maxRunningTime")
    if running is not None and duration_seconds(running) <= 0:
        raise ValidationError(f"{TI}.scheduling.maxRunningTime", f"must be positive, got {running}")
    priority = scheduling.get("priority")
    if priority is not None and not 0 <= priority <= 1000:
        raise ValidationError(f"{TI}.scheduling.priority", f"must be within [0, 1000], got {priority}")


def validate_training_input(training_input: Mapping[str, Any]) -> dict[str, Any]:
    """A complete ``trainingInput``, checked; returned in canonical form (int64 as strings)."""
    spec = check_object(training_input, TRAINING_INPUT_SCHEMA, TI)
    if not spec.get("region"):
        raise ValidationError(f"{TI}.region", "is required (e.g. us-central1)")
    check_location(spec["region"], f"{TI}.region")
    _check_program(spec)
    _check_cluster(spec)
    _check_scheduling(spec)
    if spec.get("jobDir"):
        parse_gcs_uri(spec["jobDir"], f"{TI}.jobDir")
    if "serviceAccount" in spec and "@" not in spec["serviceAccount"]:
        raise ValidationError(
            f"{TI}.serviceAccount", f"must be a service account email, got {spec['serviceAccount']!r}"
        )
    if "hyperparameters" in spec:
        check_hyperparameters(spec["hyperparameters"], f"{TI}.hyperparameters")
    return spec


def validate_job(job: Mapping[str, Any], *, allow_output_only: bool = False) -> dict[str, Any]:
    """A whole training ``Job`` body for ``projects.jobs.create``, checked and canonical.

    ``allow_output_only`` accepts the fields a server fills (state, times, trainingOutput):
    for checking a job the API returned rather than one a client sends.
    """
    if not isinstance(job, Mapping):
        raise ValidationError("job", f"must be a mapping, got {type(job).__name__}")
    body = check_object(job, JOB_SCHEMA, "", allow_output_only=allow_output_only)
    if not allow_output_only:
        for name in SERVER_SET_JOB_FIELDS:
            body.pop(name, None)
    validate_job_id(body.get("jobId", ""), "jobId")
    if "predictionInput" in body:
        raise ValidationError("predictionInput", "prediction jobs are not supported: submit a trainingInput")
    if TI not in body:
        raise ValidationError(TI, "is required")
    body[TI] = validate_training_input(body[TI])
    if "labels" in body:
        body["labels"] = validate_labels(body["labels"])
    return body


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def camel_keys(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {_camel(str(k)): camel_keys(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [camel_keys(v) for v in value]
    return value


def deep_merge(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """``top`` wins; nested mappings merge; lists are replaced whole (as gcloud flags do)."""
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def load_job_config(config: Mapping[str, Any] | str | os.PathLike[str] | None) -> dict[str, Any]:
    """A config.yaml-style ``{"trainingInput": {...}}`` from a mapping or a YAML/JSON file path."""
    if config is None:
        return {}
    if isinstance(config, str | os.PathLike):
        config = _read_config_file(Path(config))
    if not isinstance(config, Mapping):
        raise ValidationError(
            "config", f"must be a mapping like {{'trainingInput': {{...}}}}, got {type(config).__name__}"
        )
    known = schema(JOB_SCHEMA)["properties"]
    for key in config:
        if key not in known:
            raise ValidationError(
                f"config.{key}", f"unknown field; a config mirrors the Job resource ({TI}, ...)"
            )
    for name in (TI, "labels"):
        if name in config and not isinstance(config[name], Mapping):
            raise ValidationError(f"config.{name}", "must be a mapping")
    return dict(config)


def _read_config_file(path: Path) -> Any:
    """The parsed content of a config file (JSON for ``.json``, else YAML); ``{}`` when empty."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ValidationError("config", f"cannot read {str(path)!r}: {err.strerror}") from None
    except UnicodeDecodeError:
        raise ValidationError("config", f"{str(path)!r} is not UTF-8 text (YAML or JSON)") from None
    loaded = _parse_json(text, path) if path.suffix == ".json" else _parse_yaml(text, path)
    return loaded if loaded is not None else {}


def _parse_json(text: str, path: Path) -> Any:
    try:
        return json.loads(text)
    except ValueError as err:
        raise ValidationError("config", f"{str(path)!r} is not valid JSON: {err}") from None


def _parse_yaml(text: str, path: Path) -> Any:
    import yaml  # a JSON document is YAML too

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ValidationError("config", f"{str(path)!r} is not valid YAML: {err}") from None


def build_training_input(
    config: Mapping[str, Any] | str | os.PathLike[str] | None = None, **overrides: Any
) -> dict[str, Any]:
    """The config's ``trainingInput`` with explicit arguments on top, validated.

    Override names may be the API's (``pythonModule``) or snake_case (``python_module``);
    ``None`` means "not given". As with gcloud's flags, an argument beats the file.
    """
    base = load_job_config(config).get(TI) or {}
    given = camel_keys({k: v for k, v in overrides.items() if v is not None})
    return validate_training_input(deep_merge(base, given))

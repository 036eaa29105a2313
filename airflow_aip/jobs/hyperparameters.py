"""The hyperparameter spec's rules beyond its shape.

The discovery document says which fields exist; these are the rules its descriptions state
in prose (bounds, scales, discrete points, trial counts) that the API only checks after a
round trip, or that the local service must enforce the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow_aip.exceptions import ValidationError

LOG_SCALES = ("UNIT_LOG_SCALE", "UNIT_REVERSE_LOG_SCALE")
GRID_TYPES = ("INTEGER", "CATEGORICAL", "DISCRETE")
MAX_DISCRETE_VALUES = 1000
DEFAULT_MAX_TRIALS = 1
DEFAULT_MAX_PARALLEL_TRIALS = 1


def check_parameter_id(value: str, path: str) -> None:
    """A parameter (or metric) id as Vertex AI documents it: non-empty, no whitespace.

    It becomes the trainer's ``--<id>=value`` flag; ml v1's ``parameterName`` follows the same
    rule, so a spec that works on one API works on its successor.
    """
    if not value:
        raise ValidationError(path, "is required")
    if any(ch.isspace() for ch in value):
        raise ValidationError(path, f"must not contain whitespace (it becomes --<id>=value): {value!r}")


def _positive(value: Any, path: str, minimum: int = 1) -> None:
    if value is not None and value < minimum:
        raise ValidationError(path, f"must be at least {minimum}, got {value}")


def _check_bounds(param: Mapping[str, Any], path: str) -> None:
    low, high = param.get("minValue"), param.get("maxValue")
    if low is None or high is None:
        missing = "minValue" if low is None else "maxValue"
        raise ValidationError(f"{path}.{missing}", f"is required for type {param['type']}")
    if param.get("discreteValues") or param.get("categoricalValues"):
        raise ValidationError(path, f"type {param['type']} takes minValue/maxValue, not a list of values")
    if not low < high:
        raise ValidationError(f"{path}.minValue", f"must be less than maxValue ({low} >= {high})")
    if param["type"] == "INTEGER":
        for name in ("minValue", "maxValue"):
            if float(param[name]) != int(param[name]):
                raise ValidationError(
                    f"{path}.{name}", f"must be a whole number for INTEGER, got {param[name]}"
                )
    if param.get("scaleType") in LOG_SCALES and low <= 0:
        raise ValidationError(f"{path}.minValue", f"must be positive for {param['scaleType']}, got {low}")


def _check_discrete(param: Mapping[str, Any], path: str) -> None:
    values = param.get("discreteValues") or []
    where = f"{path}.discreteValues"
    if not values:
        raise ValidationError(where, "is required (non-empty) for type DISCRETE")
    if len(values) > MAX_DISCRETE_VALUES:
        raise ValidationError(where, f"at most {MAX_DISCRETE_VALUES} values, got {len(values)}")
    for i in range(1, len(values)):
        if not values[i - 1] < values[i]:
            raise ValidationError(
                f"{where}[{i}]", f"must be strictly increasing ({values[i - 1]} >= {values[i]})"
            )
    if param.get("scaleType") in LOG_SCALES and values[0] <= 0:
        raise ValidationError(f"{where}[0]", f"must be positive for {param['scaleType']}, got {values[0]}")
    if "minValue" in param or "maxValue" in param or param.get("categoricalValues"):
        raise ValidationError(
            path, "type DISCRETE takes discreteValues only, not minValue/maxValue/categoricalValues"
        )


def _check_categorical(param: Mapping[str, Any], path: str) -> None:
    values = param.get("categoricalValues") or []
    where = f"{path}.categoricalValues"
    if not values:
        raise ValidationError(where, "is required (non-empty) for type CATEGORICAL")
    seen: set[str] = set()
    for i, value in enumerate(values):
        if value in seen:
            raise ValidationError(f"{where}[{i}]", f"duplicate category {value!r}")
        seen.add(value)
    for name in ("minValue", "maxValue", "discreteValues"):
        if name in param:
            raise ValidationError(f"{path}.{name}", "must be unset for type CATEGORICAL")
    if param.get("scaleType", "NONE") != "NONE":
        raise ValidationError(f"{path}.scaleType", "must be unset for type CATEGORICAL")


def check_param(param: Mapping[str, Any], path: str) -> None:
    """One ``ParameterSpec`` (already shape-checked)."""
    check_parameter_id(param.get("parameterName", ""), f"{path}.parameterName")
    kind = param.get("type", "PARAMETER_TYPE_UNSPECIFIED")
    if kind == "PARAMETER_TYPE_UNSPECIFIED":
        raise ValidationError(f"{path}.type", "is required: DOUBLE, INTEGER, CATEGORICAL or DISCRETE")
    if kind in ("DOUBLE", "INTEGER"):
        _check_bounds(param, path)
    elif kind == "DISCRETE":
        _check_discrete(param, path)
    else:
        _check_categorical(param, path)


def check_hyperparameters(spec: Mapping[str, Any], path: str = "trainingInput.hyperparameters") -> None:
    """A whole ``HyperparameterSpec`` (already shape-checked)."""
    params: Sequence[Mapping[str, Any]] = spec.get("params") or []
    if not params:
        raise ValidationError(f"{path}.params", "at least one parameter is required")
    names: set[str] = set()
    for i, param in enumerate(params):
        check_param(param, f"{path}.params[{i}]")
        if param["parameterName"] in names:
            raise ValidationError(
                f"{path}.params[{i}].parameterName", f"duplicate {param['parameterName']!r}"
            )
        names.add(param["parameterName"])
    _positive(spec.get("maxTrials"), f"{path}.maxTrials")
    _positive(spec.get("maxParallelTrials"), f"{path}.maxParallelTrials")
    _positive(spec.get("maxFailedTrials"), f"{path}.maxFailedTrials", minimum=0)
    max_trials = spec.get("maxTrials", DEFAULT_MAX_TRIALS)
    parallel = spec.get("maxParallelTrials", DEFAULT_MAX_PARALLEL_TRIALS)
    if parallel > max_trials:
        raise ValidationError(
            f"{path}.maxParallelTrials", f"must not exceed maxTrials ({parallel} > {max_trials})"
        )
    if spec.get("algorithm") == "GRID_SEARCH":
        for i, param in enumerate(params):
            if param["type"] not in GRID_TYPES:
                raise ValidationError(
                    f"{path}.params[{i}].type",
                    f"GRID_SEARCH needs INTEGER, CATEGORICAL or DISCRETE, not {param['type']}",
                )
    if "hyperparameterMetricTag" in spec and not spec["hyperparameterMetricTag"]:
        raise ValidationError(
            f"{path}.hyperparameterMetricTag", "must not be empty (leave it unset for the default)"
        )

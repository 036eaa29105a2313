"""Which fields of two trainingInputs differ: the check before adopting an existing job.

A job the API returns carries defaults its creator never sent (``scaleTier: BASIC``,
``maxTrials: 1``, int64 counts as strings, ``"3600.000s"``...). Those are not differences: an
absent field equals its default, values compare in canonical form, and fields the server
fills on its own (runtime and Python versions) count only when the request named them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.schema import DURATION, TRAINING_INPUT_SCHEMA, check_object
from airflow_aip.jobs.trials import DEFAULT_METRIC_TAG, UNSPECIFIED_GOALS, Goal

_INDEX = re.compile(r"\[[0-9]+\]")
DEFAULTS: dict[str, Any] = {
    "scaleTier": "BASIC",
    "workerCount": "0",
    "parameterServerCount": "0",
    "evaluatorCount": "0",
    "enableWebAccess": False,
    "useChiefInTfConfig": False,
    "scheduling.maxRunningTime": "604800s",
    "scheduling.priority": 0,
    "hyperparameters.goal": "MAXIMIZE",
    "hyperparameters.maxTrials": 1,
    "hyperparameters.maxParallelTrials": 1,
    "hyperparameters.maxFailedTrials": 0,
    "hyperparameters.hyperparameterMetricTag": DEFAULT_METRIC_TAG,
    "hyperparameters.algorithm": "ALGORITHM_UNSPECIFIED",
    "hyperparameters.enableTrialEarlyStopping": False,
    "hyperparameters.params[].scaleType": "NONE",
}
# Filled by the server when the request leaves them out.
SERVER_FILLED = frozenset({"runtimeVersion", "pythonVersion"})


def _canonical(value: Any, path: str) -> Any:
    """Drop defaults and empties; equalise durations and goal aliases."""
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            child = f"{path}.{key}" if path else str(key)
            canon = _canonical(item, child)
            if canon in (None, {}, []) or DEFAULTS.get(_INDEX.sub("[]", child), object()) == canon:
                continue
            out[key] = canon
        return out
    if isinstance(value, list | tuple):
        return [_canonical(item, f"{path}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, str) and DURATION.fullmatch(value):
        try:
            return f"{Decimal(value[:-1]).normalize():f}s"
        except InvalidOperation:
            return value
    if path == "hyperparameters.goal" and value in UNSPECIFIED_GOALS:
        return Goal.MAXIMIZE.value
    if isinstance(value, int | float) and not isinstance(value, bool) and float(value).is_integer():
        return int(value)
    return value


def _shape(value: Mapping[str, Any]) -> Mapping[str, Any]:
    try:
        return check_object(value, TRAINING_INPUT_SCHEMA, "", allow_output_only=True)
    except ValidationError:
        return value  # a server may answer with fields newer than our document: compare as given


def _walk(a: Any, b: Any, path: str, out: list[str]) -> None:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for key in sorted(set(a) | set(b)):
            child = f"{path}.{key}" if path else str(key)
            if key not in a and not path and key in SERVER_FILLED:
                continue
            _walk(a.get(key), b.get(key), child, out)
    elif (
        isinstance(a, list)
        and isinstance(b, list)
        and len(a) == len(b)
        and any(isinstance(x, Mapping) for x in a + b)
    ):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _walk(x, y, f"{path}[{i}]", out)
    elif a != b:
        out.append(path)


def diff_training_input(requested: Mapping[str, Any], existing: Mapping[str, Any]) -> list[str]:
    """Field paths (``hyperparameters.params[0].maxValue``) where two trainingInputs differ.

    ``requested`` is what we would send; ``existing`` is what the API returned for the job.
    An empty list means the existing job is the one we would have created.
    """
    out: list[str] = []
    _walk(_canonical(_shape(requested), ""), _canonical(_shape(existing), ""), "", out)
    return out

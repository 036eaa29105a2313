"""A Vertex AI ``studySpec``: its rules, and the one search spec the tuner runs for both APIs.

The tuner (the local service's, shared by ml v1 and aiplatform v1) reads ml v1's
``HyperparameterSpec`` vocabulary: ``params[].parameterName/type/minValue/...``, ``goal``,
``hyperparameterMetricTag``, ``maxTrials``... :func:`search_spec` translates a
``HyperparameterTuningJob`` into it once, adding what only Vertex has: conditional parameters
(``parent``/``parentValues``: the child is tried only when its parent took one of those
values), ``measurementSelection`` (LAST or BEST reported value) and ``otherMetricTags`` (metrics
after the first: recorded in each trial's final measurement, not optimized).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.hyperparameters import LOG_SCALES, MAX_DISCRETE_VALUES, check_parameter_id
from airflow_aip.jobs.trials import Goal

_VALUE_SPECS = {
    "doubleValueSpec": "DOUBLE",
    "integerValueSpec": "INTEGER",
    "categoricalValueSpec": "CATEGORICAL",
    "discreteValueSpec": "DISCRETE",
}
_PARENT_CONDITIONS = {
    "parentDiscreteValues": "DISCRETE",
    "parentIntValues": "INTEGER",
    "parentCategoricalValues": "CATEGORICAL",
}
EPSILON = 1e-10  # study.proto: discrete values "at least 1e-10 apart"; "The Epsilon of the value matching"
_STOPPING_SPECS = ("decayCurveStoppingSpec", "medianAutomatedStoppingSpec", "convexAutomatedStoppingSpec")


def parameter_type(param: Mapping[str, Any], path: str) -> str:
    """DOUBLE, INTEGER, CATEGORICAL or DISCRETE: exactly one value spec is set."""
    kinds = [kind for field, kind in _VALUE_SPECS.items() if field in param]
    if len(kinds) != 1:
        raise ValidationError(path, f"set exactly one of {', '.join(_VALUE_SPECS)}")
    return kinds[0]


def _check_range(spec: Mapping[str, Any], kind: str, scale: str, path: str) -> None:
    for name in ("minValue", "maxValue"):
        if name not in spec:
            raise ValidationError(f"{path}.{name}", f"is required for a {kind} parameter")
    low, high = float(spec["minValue"]), float(spec["maxValue"])
    # [U] unverified: whether Google refuses min == max (a one-point range; ml v1 wanted min < max).
    # Accepted: the side that refuses nothing Google takes.
    if low > high:
        raise ValidationError(f"{path}.minValue", f"must not exceed maxValue ({low} > {high})")
    if scale in LOG_SCALES and low <= 0:
        raise ValidationError(f"{path}.minValue", f"must be positive for {scale}, got {spec['minValue']}")


def _check_values(values: Sequence[Any], kind: str, scale: str, path: str) -> None:
    if not values:
        raise ValidationError(path, f"is required (non-empty) for a {kind} parameter")
    if len(values) > MAX_DISCRETE_VALUES:
        raise ValidationError(path, f"at most {MAX_DISCRETE_VALUES} values, got {len(values)}")
    if len(set(values)) != len(values):
        raise ValidationError(path, "values must be unique")
    if kind == "DISCRETE":
        # study.proto DiscreteValueSpec: "The list should be in increasing order and at least
        # 1e-10 apart" [P]. [U] unverified: whether Google refuses (rather than sorts) a list out
        # of order; refused, as the sentence reads, and as ml v1's discreteValues always were here.
        for i in range(1, len(values)):
            if not values[i] - values[i - 1] >= EPSILON:
                raise ValidationError(
                    f"{path}[{i}]", "discrete values must be increasing and at least 1e-10 apart"
                )
        if scale in LOG_SCALES and values[0] <= 0:
            raise ValidationError(f"{path}[0]", f"must be positive for {scale}")


def _same_value(kind: str, one: Any, other: Any) -> bool:
    """Parent values match as study.proto says: DISCRETE within 1e-10, others exactly."""
    if kind == "DISCRETE":
        return abs(float(one) - float(other)) <= EPSILON
    if kind == "INTEGER":
        return int(one) == int(other)
    return str(one) == str(other)


def _check_in_parent_space(param: Mapping[str, Any], kind: str, values: Sequence[Any], path: str) -> None:
    """study.proto ConditionalParameterSpec [P]: the parent values "must exist in" (DISCRETE,
    CATEGORICAL) or "must lie in" (INTEGER) the parent's own value spec."""
    for i, value in enumerate(values):
        if kind == "INTEGER":
            spec = param["integerValueSpec"]
            inside = int(spec["minValue"]) <= int(value) <= int(spec["maxValue"])
        else:
            field = "discreteValueSpec" if kind == "DISCRETE" else "categoricalValueSpec"
            inside = any(_same_value(kind, value, own) for own in param[field].get("values") or [])
        if not inside:
            shown = repr(value) if kind == "CATEGORICAL" else str(value)  # int64 comes as a string
            raise ValidationError(
                f"{path}[{i}]",
                f"{shown} is not in the feasible space of the parent parameter {param['parameterId']!r}",
            )


def _check_condition(child: Mapping[str, Any], kind: str, parent: Mapping[str, Any], where: str) -> list[Any]:
    """A conditional child's ``parent*Values``: one, of the parent's type, inside its space."""
    conditions = [c for c in _PARENT_CONDITIONS if c in child]
    if len(conditions) != 1:
        raise ValidationError(where, f"set exactly one of {', '.join(_PARENT_CONDITIONS)}")
    condition = conditions[0]
    if _PARENT_CONDITIONS[condition] != kind:
        raise ValidationError(f"{where}.{condition}", f"does not fit a {kind} parent parameter")
    values: list[Any] = list(child[condition].get("values") or [])
    if not values:
        raise ValidationError(f"{where}.{condition}.values", "is required (non-empty)")
    _check_in_parent_space(parent, kind, values, f"{where}.{condition}.values")
    if "parameterSpec" not in child:
        raise ValidationError(f"{where}.parameterSpec", "is required")
    return values


def _duplicate(where: str, own_id: str, clash: set[str]) -> None:
    field = f"{where}.parameterId" if own_id in clash else where
    raise ValidationError(field, f"duplicate {sorted(clash)[0]!r}")


def _check_parameter(param: Mapping[str, Any], path: str) -> tuple[str, set[str]]:
    """One ParameterSpec and its conditional children: its type, and every ID in its subtree.

    IDs are unique "amongst all ParameterSpecs", except what study.proto allows in
    ``conditionalParameterSpecs``: "If two items ... have the same name, they must have disjoint
    parent_value_condition" [P]. Such siblings share their own ID only; their subtrees do not.
    """
    check_parameter_id(param.get("parameterId", ""), f"{path}.parameterId")
    kind = parameter_type(param, path)
    scale = param.get("scaleType", "SCALE_TYPE_UNSPECIFIED")
    if kind == "CATEGORICAL":
        if scale != "SCALE_TYPE_UNSPECIFIED":
            raise ValidationError(f"{path}.scaleType", "must be unset for a CATEGORICAL parameter")
        _check_values(
            param["categoricalValueSpec"].get("values") or [],
            kind,
            scale,
            f"{path}.categoricalValueSpec.values",
        )
    elif kind == "DISCRETE":
        _check_values(
            param["discreteValueSpec"].get("values") or [], kind, scale, f"{path}.discreteValueSpec.values"
        )
    else:
        field = "doubleValueSpec" if kind == "DOUBLE" else "integerValueSpec"
        _check_range(param[field], kind, scale, f"{path}.{field}")
    names = {param["parameterId"]}
    children: list[tuple[str, list[Any], set[str]]] = []
    for i, child in enumerate(param.get("conditionalParameterSpecs") or []):
        where = f"{path}.conditionalParameterSpecs[{i}]"
        values = _check_condition(child, kind, param, where)
        _, subtree = _check_parameter(child["parameterSpec"], f"{where}.parameterSpec")
        child_id = child["parameterSpec"]["parameterId"]
        for j, (other_id, other_values, other_subtree) in enumerate(children):
            shared = subtree & other_subtree
            if child_id == other_id and any(_same_value(kind, a, b) for a in values for b in other_values):
                raise ValidationError(
                    f"{where}.parameterSpec.parameterId",
                    f"{child_id!r} is also conditionalParameterSpecs[{j}]; same-named conditional "
                    "parameters need disjoint parent values",
                )
            clash = shared - ({child_id} if child_id == other_id else set())
            if clash:
                _duplicate(f"{where}.parameterSpec", child_id, clash)
        if param["parameterId"] in subtree:
            _duplicate(f"{where}.parameterSpec", child_id, {param["parameterId"]})
        children.append((child_id, values, subtree))
        names |= subtree
    return kind, names


def check_study_spec(spec: Mapping[str, Any], path: str = "studySpec") -> None:
    """A ``StudySpec`` (already shape-checked) as a HyperparameterTuningJob needs it.

    The Vizier-only fields (``observationNoise``, each value spec's ``defaultValue``: "Not
    supported by HyperparameterTuningJob or TrainingPipeline", aiplatform.v1.json [P]) pass and
    are ignored. [U] unverified: whether Google refuses them or ignores them, as here.
    """
    metrics = spec.get("metrics") or []
    if not metrics:
        raise ValidationError(f"{path}.metrics", "at least one metric is required")
    metric_ids: set[str] = set()
    for i, metric in enumerate(metrics):
        check_parameter_id(metric.get("metricId", ""), f"{path}.metrics[{i}].metricId")
        if metric["metricId"] in metric_ids:
            raise ValidationError(f"{path}.metrics[{i}].metricId", f"duplicate {metric['metricId']!r}")
        metric_ids.add(metric["metricId"])
        if "goal" not in metric:
            raise ValidationError(f"{path}.metrics[{i}].goal", "is required: MAXIMIZE or MINIMIZE")
    params = spec.get("parameters") or []
    if not params:
        raise ValidationError(f"{path}.parameters", "at least one parameter is required")
    seen: set[str] = set()
    for i, param in enumerate(params):
        kind, names = _check_parameter(param, f"{path}.parameters[{i}]")
        if names & seen:
            own = param["parameterId"] in seen
            where = f"{path}.parameters[{i}]{'.parameterId' if own else ''}"
            raise ValidationError(where, f"duplicate {sorted(names & seen)[0]!r}")
        seen |= names
        if spec.get("algorithm") == "GRID_SEARCH" and kind == "DOUBLE":
            raise ValidationError(
                f"{path}.parameters[{i}]", "GRID_SEARCH needs INTEGER, CATEGORICAL or DISCRETE parameters"
            )
    stopping = [name for name in _STOPPING_SPECS if name in spec]
    if len(stopping) > 1:
        raise ValidationError(path, f"set at most one of {', '.join(_STOPPING_SPECS)}")


def _typed(values: Sequence[Any], kind: str) -> list[Any]:
    if kind == "INTEGER":
        return [int(v) for v in values]
    if kind == "DISCRETE":
        return [float(v) for v in values]
    return [str(v) for v in values]


def _flatten(
    param: Mapping[str, Any], out: list[dict[str, Any]], parent: tuple[str, list[Any]] | None
) -> None:
    kind = parameter_type(param, param["parameterId"])
    flat: dict[str, Any] = {"parameterName": param["parameterId"], "type": kind}
    scale = param.get("scaleType", "SCALE_TYPE_UNSPECIFIED")
    if scale != "SCALE_TYPE_UNSPECIFIED":
        flat["scaleType"] = scale
    if kind == "CATEGORICAL":
        flat["categoricalValues"] = list(param["categoricalValueSpec"]["values"])
    elif kind == "DISCRETE":
        flat["discreteValues"] = [float(v) for v in param["discreteValueSpec"]["values"]]
    else:
        spec = param["doubleValueSpec" if kind == "DOUBLE" else "integerValueSpec"]
        cast = float if kind == "DOUBLE" else int
        flat.update(minValue=cast(spec["minValue"]), maxValue=cast(spec["maxValue"]))
    if parent is not None:
        flat.update(parent=parent[0], parentValues=parent[1])
    out.append(flat)
    for child in param.get("conditionalParameterSpecs") or []:
        condition = next(c for c in _PARENT_CONDITIONS if c in child)
        values = _typed(child[condition]["values"], kind)
        _flatten(child["parameterSpec"], out, (param["parameterId"], values))


def search_spec(job: Mapping[str, Any]) -> dict[str, Any]:
    """A validated HyperparameterTuningJob as the tuner's search spec (ml v1 vocabulary)."""
    study = job["studySpec"]
    metric = study["metrics"][0]
    params: list[dict[str, Any]] = []
    for param in study["parameters"]:
        _flatten(param, params, None)
    selection = study.get("measurementSelectionType", "MEASUREMENT_SELECTION_TYPE_UNSPECIFIED")
    others = (
        {"otherMetricTags": [m["metricId"] for m in study["metrics"][1:]]}
        if len(study["metrics"]) > 1
        else {}
    )
    return {
        **others,
        "goal": Goal.parse(metric["goal"], "studySpec.metrics[0].goal").value,
        "hyperparameterMetricTag": metric["metricId"],
        "params": params,
        "algorithm": study.get("algorithm", "ALGORITHM_UNSPECIFIED"),
        "maxTrials": job["maxTrialCount"],
        "maxParallelTrials": job["parallelTrialCount"],
        "maxFailedTrials": job.get("maxFailedTrialCount", 0),
        "enableTrialEarlyStopping": any(name in study for name in _STOPPING_SPECS),
        "measurementSelection": "BEST" if selection == "BEST_MEASUREMENT" else "LAST",
        # Vertex passes DiscreteParameterSpec values as floats, "--batch_size=128.0" [O]:
        # kuds/mesozoic-labs#127 ("Vertex AI HPT sends DiscreteParameterSpec values as float
        # strings"), so a trainer's `type=int` fails there as it fails here. INTEGER stays integer.
        "discreteFormat": "float",
    }


def trial_parameter_value(value: str, kind: str) -> Any:
    """A trial's hyperparameter as ``TrialParameter.value``: a number, or a string if CATEGORICAL."""
    if kind == "INTEGER":
        return int(float(value))
    if kind in ("DOUBLE", "DISCRETE"):
        return float(value)
    return value

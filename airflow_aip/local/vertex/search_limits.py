"""What the local tuner cannot search though Vertex AI takes it: a 400 that says so, at create.

study.proto lets two conditional parameters of one parent share an ID when their parent values
are disjoint (``lr`` under ``optimizer=adam`` and another ``lr`` under ``optimizer=sgd``). The local
tuner asks optuna for each parameter by its ID, and an optuna study keeps one distribution per
name: a second ``lr`` of another type, scale or list of values fails there ("Cannot set different
distribution kind to the same parameter name"), and a grid holds one list per name. Rather than
fail every trial, the local service refuses such a spec with a message naming the local limit (a
false red, said out loud, like a ``containerSpec`` without a container engine). Same-named
DOUBLE or INTEGER siblings that differ only in their range search fine, except under GRID_SEARCH.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.vertex.study import parameter_type

_RANGED = ("DOUBLE", "INTEGER")


def _searched_as(spec: Mapping[str, Any], grid: bool) -> Any:
    """What optuna must see the same for two parameters of one name."""
    kind = parameter_type(spec, str(spec.get("parameterId")))
    scale = spec.get("scaleType", "SCALE_TYPE_UNSPECIFIED")
    if kind in _RANGED and not grid:
        return kind, scale
    values = {k: v for k, v in spec.items() if k.endswith("ValueSpec")}
    return kind, scale, repr(sorted(values.items()))


def check_local_search(study: Mapping[str, Any], path: str = "studySpec") -> None:
    """Refuse same-named conditional siblings the local tuner would search as one other parameter."""
    grid = study.get("algorithm") == "GRID_SEARCH"

    def walk(param: Mapping[str, Any], where: str) -> None:
        first: dict[str, tuple[int, Any]] = {}
        for i, child in enumerate(param.get("conditionalParameterSpecs") or []):
            spec, at = child["parameterSpec"], f"{where}.conditionalParameterSpecs[{i}].parameterSpec"
            searched = _searched_as(spec, grid)
            earlier = first.setdefault(spec["parameterId"], (i, searched))
            if earlier[1] != searched:
                raise ValidationError(
                    at,
                    f"the local training service cannot search {spec['parameterId']!r} here: Vertex AI "
                    f"takes it, but conditionalParameterSpecs[{earlier[0]}] has the same ID with another "
                    "type, scale or values"
                    + (" (under GRID_SEARCH, another value spec)" if grid else "")
                    + "; give the two different IDs to run this locally",
                )
            walk(spec, at)

    for index, param in enumerate(study.get("parameters") or []):
        walk(param, f"{path}.parameters[{index}]")

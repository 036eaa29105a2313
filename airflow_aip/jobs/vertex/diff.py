"""Which fields we would send differ from a Vertex AI job the server returned: the adoption check.

The server answers with more than we sent (``name``, ``state``, ``createTime``, ``trials``, defaults
such as ``diskSpec`` or ``scheduling``) and in its own spelling (int64 as strings or numbers,
``"7200.000s"`` for ``"7200s"``, enums as names or proto numbers, ``outputUriPrefix`` with the
``/`` Vertex AI appends). So only the fields WE SENT are compared, each in canonical form; a field
we sent with its proto3 default (``false``, ``0``, ``*_UNSPECIFIED``) equals an absent one, as
proto3 JSON omits defaults. Labels compare on the keys we sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.locations import AIPLATFORM_V1
from airflow_aip.jobs.schema import DURATION, check_value, schema
from airflow_aip.jobs.vertex.body import CUSTOM_JOB_SCHEMA, TUNING_JOB_SCHEMA
from airflow_aip.jobs.vertex.enums import ENUM_NUMBERS

_ZERO_SCALARS: tuple[Any, ...] = (False, 0, "", "0")


def diff_vertex_spec(requested: Mapping[str, Any], existing: Mapping[str, Any]) -> list[str]:
    """Field paths (``jobSpec.workerPoolSpecs[0].machineSpec.machineType``, ``labels.x``) that differ.

    ``requested`` is the body we would send; ``existing`` the resource the server returned. An
    empty list means the existing job is the one we would have created.
    """
    tuning = "studySpec" in requested or "trialJobSpec" in requested
    schema_name = TUNING_JOB_SCHEMA if tuning else CUSTOM_JOB_SCHEMA
    out: list[str] = []
    _walk(
        _canonical(_shape(requested, schema_name), ""), _canonical(_shape(existing, schema_name), ""), "", out
    )
    return out


def _shape(value: Any, schema_name: str) -> Any:
    """Each known field in the API's canonical form; unknown or invalid fields as they are."""
    if not isinstance(value, Mapping):
        return value
    props: Mapping[str, Any] = schema(schema_name, AIPLATFORM_V1).get("properties", {})
    out: dict[str, Any] = {}
    for key, item in value.items():
        prop = props.get(key)
        numbers = ENUM_NUMBERS.get(f"{schema_name}.{key}")
        out[key] = item if prop is None or item is None else _shape_value(item, prop, numbers)
    return out


def _shape_value(item: Any, prop: Mapping[str, Any], numbers: Mapping[str, int] | None) -> Any:
    if "$ref" in prop:
        return _shape(item, prop["$ref"])
    if prop.get("type") == "array" and isinstance(item, list):
        return [_shape_value(element, prop["items"], numbers) for element in item]
    try:
        return check_value(
            item,
            prop,
            "",
            allow_output_only=True,
            document=AIPLATFORM_V1,
            enum_numbers=numbers,
            enums=ENUM_NUMBERS,
        )
    except ValidationError:
        return item  # a server newer than our document: compare as given


def _canonical(value: Any, path: str) -> Any:
    """Durations normalised (``7200.000s`` -> ``7200s``); output prefixes without the trailing ``/``."""
    if isinstance(value, Mapping):
        return {key: _canonical(item, f"{path}.{key}") for key, item in value.items()}
    if isinstance(value, list):
        return [_canonical(item, path) for item in value]
    if isinstance(value, str) and DURATION.fullmatch(value):
        try:
            return f"{Decimal(value[:-1]).normalize():f}s"
        except InvalidOperation:
            return value
    if isinstance(value, str) and path.endswith(".outputUriPrefix"):
        return value.rstrip("/")
    return value


def _is_default(value: Any) -> bool:
    """A proto3 default, which the server leaves out of its answer."""
    if isinstance(value, str) and value.endswith("_UNSPECIFIED"):
        return True
    if isinstance(value, list):
        return not value
    return not isinstance(value, Mapping) and any(
        value == zero and type(value) is type(zero) for zero in _ZERO_SCALARS
    )


def _walk(want: Any, have: Any, path: str, out: list[str]) -> None:
    """Append each path under ``want`` whose value ``have`` does not match."""
    if isinstance(want, Mapping):
        _walk_message(want, have, path, out)
    elif have is None:
        if not _is_default(want):
            out.append(path)
    elif isinstance(want, list) and any(isinstance(item, Mapping) for item in want):
        if not isinstance(have, list) or len(have) != len(want):
            out.append(path)
            return
        for index, (mine, theirs) in enumerate(zip(want, have, strict=True)):
            _walk(mine, theirs, f"{path}[{index}]", out)
    elif want != have:
        out.append(path)


def _walk_message(want: Mapping[str, Any], have: Any, path: str, out: list[str]) -> None:
    if have is None and not want:
        return
    if not isinstance(have, Mapping):
        out.append(path)  # proto3 JSON answers a message we set, even an empty one
        return
    for key, item in want.items():
        _walk(item, have.get(key), f"{path}.{key}" if path else str(key), out)

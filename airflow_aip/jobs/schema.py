"""Shape checks against the discovery documents google-api-python-client ships.

One schema per API, Google's own: every field name, type, enum and format comes from
``googleapiclient/discovery_cache/documents/<api>.json`` (``ml.v1.json`` by default,
``aiplatform.v1.json`` for Vertex AI). The file is read from the installed package directory
without importing googleapiclient (DAG-parse time), once per process.

Values are returned in proto3 JSON canonical form, the form the API answers with: int64 as
decimal strings, int32 as ints, doubles as numbers, and field names in lowerCamelCase (proto3
JSON parsers also take the original proto name, ``display_name``). So a body we send and the
body the API returns compare equal. Output-only fields in a request are checked for shape (a
parser reads them) and then dropped: google/api/field_behavior.proto says the server "must
ignore it and must not throw an error", which is what lets a client GET a job, edit it and
create it again.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from airflow_aip.exceptions import AipError, ValidationError

ML_V1 = "ml.v1.json"
#: ``"Schema.field"`` to an enum's proto numbers by name (see :func:`check_object`).
EnumTable = Mapping[str, Mapping[str, int]]
NO_ENUMS: EnumTable = MappingProxyType({})
JOB_SCHEMA = "GoogleCloudMlV1__Job"
TRAINING_INPUT_SCHEMA = "GoogleCloudMlV1__TrainingInput"
# The API's google-duration (proto3 JSON Duration): seconds, up to 9 fractional digits, then "s".
DURATION = re.compile(r"-?[0-9]+(\.[0-9]{1,9})?s")
_DATETIME = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})"
)
_INT64 = re.compile(r"-?[0-9]+")
_INT32_RANGE = (-(2**31), 2**31 - 1)
_INT64_RANGE = (-(2**63), 2**63 - 1)


def discovery_document_path(document: str = ML_V1) -> Path:
    """Where the installed google-api-python-client keeps a static discovery document."""
    spec = importlib.util.find_spec("googleapiclient")
    if spec is None or not spec.submodule_search_locations:
        raise AipError("google-api-python-client is not installed: the ml v1 schema is unavailable")
    base = Path(next(iter(spec.submodule_search_locations)))
    return base / "discovery_cache" / "documents" / document


@cache
def discovery_document(document: str = ML_V1) -> dict[str, Any]:
    """A parsed discovery document, ml v1 unless named (read once)."""
    loaded: dict[str, Any] = json.loads(discovery_document_path(document).read_text(encoding="utf-8"))
    return loaded


def schema(name: str, document: str = ML_V1) -> dict[str, Any]:
    """One named schema of a document, e.g. ``GoogleCloudMlV1__TrainingInput``."""
    found: dict[str, Any] = discovery_document(document)["schemas"][name]
    return found


def is_output_only(prop: Mapping[str, Any]) -> bool:
    """Fields the server fills: in a request they are ignored (dropped), never refused."""
    return bool(prop.get("readOnly")) or str(prop.get("description", "")).startswith("Output only.")


def _proto_name(json_name: str) -> str:
    """``bootDiskSizeGb`` -> ``boot_disk_size_gb``: the proto field name a JSON name comes from."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", json_name).lower()


@cache
def _json_names(schema_name: str, document: str) -> dict[str, str]:
    """The spellings a proto3 JSON parser takes for a field (``displayName``, ``display_name``) -> JSON name.

    The document lists JSON names only, so the proto name is rebuilt from it (a proto name with a
    digit right after an underscore, none in these schemas, would be missed).
    """
    props = schema(schema_name, document).get("properties", {})
    return {**{_proto_name(name): name for name in props}, **{name: name for name in props}}


def _type_error(path: str, expected: str, value: object) -> ValidationError:
    hint = ""
    if expected == "a string" and isinstance(value, float):
        hint = " (quote it in YAML, e.g. '2.4', or 2.10 becomes 2.1)"
    return ValidationError(path, f"must be {expected}, got {type(value).__name__} {value!r}{hint}")


def _integer(value: object, path: str, bounds: tuple[int, int]) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise _type_error(path, "an integer", value)
    if isinstance(value, str):
        if not _INT64.fullmatch(value.strip()):
            raise _type_error(path, "an integer", value)
        value = int(value)
    if not bounds[0] <= value <= bounds[1]:
        raise ValidationError(path, f"must be within [{bounds[0]}, {bounds[1]}], got {value}")
    return value


def _enum_name(value: int, prop: Mapping[str, Any], path: str, numbers: Mapping[str, int] | None) -> str:
    """proto3 JSON accepts an enum's number; the document lists names only, so a table maps them."""
    names = {number: name for name, number in (numbers or {}).items()}
    if value not in names:
        raise ValidationError(path, f"must be one of {', '.join(prop['enum'])} (by name); got {value!r}")
    return names[value]


def _string(value: object, prop: Mapping[str, Any], path: str, numbers: Mapping[str, int] | None) -> Any:
    fmt = prop.get("format")
    if fmt == "int64":
        return str(_integer(value, path, _INT64_RANGE))
    if "enum" in prop and isinstance(value, int) and not isinstance(value, bool):
        value = _enum_name(value, prop, path, numbers)
    if not isinstance(value, str):
        raise _type_error(path, "a string", value)
    if "enum" in prop and value not in prop["enum"]:
        raise ValidationError(path, f"must be one of {', '.join(prop['enum'])}; got {value!r}")
    if fmt == "google-duration" and not DURATION.fullmatch(value):
        raise ValidationError(
            path, f"must be a duration in seconds ending in 's', e.g. '3600s'; got {value!r}"
        )
    if fmt == "google-datetime" and not _DATETIME.fullmatch(value):
        raise ValidationError(path, f"must be an RFC 3339 timestamp; got {value!r}")
    return value


def _number(value: object, path: str) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _type_error(path, "a number", value)
    if isinstance(value, float) and not math.isfinite(value):
        raise ValidationError(path, f"must be a finite number, got {value!r}")
    return value


def check_value(
    value: Any,
    prop: Mapping[str, Any],
    path: str,
    *,
    allow_output_only: bool,
    document: str = ML_V1,
    enum_numbers: Mapping[str, int] | None = None,
    enums: EnumTable = NO_ENUMS,
) -> Any:
    """``value`` checked against one property schema; returns it in canonical form."""
    if "$ref" in prop:
        return check_object(
            value, prop["$ref"], path, allow_output_only=allow_output_only, document=document, enums=enums
        )
    kind = prop.get("type")
    if kind == "string":
        return _string(value, prop, path, enum_numbers)
    if kind == "integer":
        return _integer(value, path, _INT32_RANGE if prop.get("format") != "uint32" else (0, 2**32 - 1))
    if kind == "number":
        return _number(value, path)
    if kind == "boolean":
        if not isinstance(value, bool):
            raise _type_error(path, "true or false", value)
        return value
    return _collection(
        value,
        prop,
        path,
        allow_output_only=allow_output_only,
        document=document,
        enum_numbers=enum_numbers,
        enums=enums,
    )


def _collection(
    value: Any,
    prop: Mapping[str, Any],
    path: str,
    *,
    allow_output_only: bool,
    document: str,
    enum_numbers: Mapping[str, int] | None,
    enums: EnumTable,
) -> Any:
    """Arrays and maps checked item by item; free-form objects as they are."""
    kind = prop.get("type")
    if kind == "array":
        if not isinstance(value, list | tuple):
            raise _type_error(path, "a list", value)
        return [
            check_value(
                item,
                prop["items"],
                f"{path}[{i}]",
                allow_output_only=allow_output_only,
                document=document,
                enum_numbers=enum_numbers,
                enums=enums,
            )
            for i, item in enumerate(value)
        ]
    if kind == "object" and "additionalProperties" in prop:
        if not isinstance(value, Mapping):
            raise _type_error(path, "a mapping", value)
        inner = prop["additionalProperties"]
        out_only = allow_output_only
        return {
            str(k): check_value(
                v, inner, f"{path}.{k}", allow_output_only=out_only, document=document, enums=enums
            )
            for k, v in value.items()
        }
    if kind == "any" or kind == "object":
        return value
    raise AipError(f"{path}: unsupported schema type {kind!r} in the discovery document")


def check_object(
    value: Any,
    schema_name: str,
    path: str,
    *,
    allow_output_only: bool = False,
    document: str = ML_V1,
    enums: EnumTable = NO_ENUMS,
) -> dict[str, Any]:
    """A mapping checked field by field against a named schema: unknown fields are errors.

    ``enums``: the proto numbers an API also takes for its enums (``"Schema.field"`` to name to
    number), which the discovery document does not carry; its wire folder passes them.

    Proto names (``display_name``) become JSON names; a field spelled both ways is an error.
    Output-only fields are dropped unless ``allow_output_only`` (reading an answer, not a request).
    """
    if not isinstance(value, Mapping):
        raise _type_error(path, "a mapping", value)
    props: Mapping[str, Any] = schema(schema_name, document).get("properties", {})
    names = _json_names(schema_name, document)
    out: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for key, item in value.items():
        name = names.get(key) if isinstance(key, str) else None
        if name is None:
            where = f"{path}.{key}" if path else str(key)
            raise ValidationError(where, f"unknown field; known fields: {', '.join(sorted(props))}")
        where = f"{path}.{name}" if path else name
        if name in spelled:
            raise ValidationError(where, f"is given twice, as {spelled[name]!r} and {key!r}")
        spelled[name] = key
        if item is None:
            continue
        numbers = enums.get(f"{schema_name}.{name}")
        checked = check_value(
            item,
            props[name],
            where,
            allow_output_only=allow_output_only,
            document=document,
            enum_numbers=numbers,
            enums=enums,
        )
        if allow_output_only or not is_output_only(props[name]):
            out[name] = checked
    return out

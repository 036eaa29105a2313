"""What a Model Registry request says, checked: an upload's body, and a list's filter, order and page.

Uploads (``UploadModelRequest``): the shape is the discovery document's (unknown fields are a 400,
output-only ones of the Model are dropped unread, as field_behavior.proto asks), then the rules
Google states: ``model.displayName`` (at most 128 characters) and ``model.containerSpec.imageUri``
required, ``artifactUri`` a gs:// URI, labels by the Vertex label rule, ``modelId`` and aliases by
:mod:`airflow_aip.jobs.vertex.models`, ``parentModel`` a model (not a version) of the request's
own project and location.

Lists (``models.list``, ``models.listVersions``): the jobs face's filter grammar with the fields
the document names for each (``model``, ``display_name``/``displayName``, ``labels.key``), its
``orderBy`` fields, and page tokens that carry the position and the query they belong to.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.labels import VERTEX_LABELS, validate_labels
from airflow_aip.jobs.locations import AIPLATFORM_V1
from airflow_aip.jobs.schema import check_object, is_output_only, schema
from airflow_aip.jobs.vertex.enums import ENUM_NUMBERS
from airflow_aip.jobs.vertex.models import (
    ModelRef,
    parse_model_name,
    validate_alias,
    validate_model_id,
)
from airflow_aip.jobs.vertex.serving import serving_of
from airflow_aip.local import pages
from airflow_aip.local.logs.filters import (
    VERTEX_JOB_FILTER_FIELDS,
    FilterField,
    Node,
    page_size,
    parse_filter,
)
from airflow_aip.local.store import project_number
from airflow_aip.local.vertex.models_store import MODEL_SCHEMA
from airflow_aip.uris import parse_gcs_uri

UPLOAD_SCHEMA = "GoogleCloudAiplatformV1UploadModelRequest"
MERGE_SCHEMA = "GoogleCloudAiplatformV1MergeVersionAliasesRequest"
MAX_DISPLAY_NAME = 128
MODEL_ID_KEY = "model"  # where a list puts the model's ID beside the Model, for the ``model`` filter
_DISPLAY_NAME = FilterField(("displayName",), frozenset({"=", "!="}))
# "For field names both snake_case and camelCase are supported." [U] unverified: displayName on
# listVersions (the document names labels only there).
VERSION_FILTER_FIELDS = {
    "labels": VERTEX_JOB_FILTER_FIELDS["labels"],
    "display_name": _DISPLAY_NAME,
    "displayName": _DISPLAY_NAME,
}
MODEL_FILTER_FIELDS = {**VERSION_FILTER_FIELDS, "model": FilterField((MODEL_ID_KEY,), frozenset({"=", "!="}))}
_ORDER_FIELDS = {"display_name": "displayName", "create_time": "createTime", "update_time": "updateTime"}
MODEL_ORDER_FIELDS = {**_ORDER_FIELDS, **{v: v for v in _ORDER_FIELDS.values()}}
# [U] unverified: that listVersions' create_time and update_time are each version's own times.
VERSION_ORDER_FIELDS = {
    name: f"version{field[0].upper()}{field[1:]}"
    for name, field in MODEL_ORDER_FIELDS.items()
    if field != "displayName"
}
_ORDER = re.compile(r"(?P<field>[A-Za-z_]+)(?:\s+(?P<direction>asc|desc))?", re.IGNORECASE)


@dataclass(frozen=True)
class Upload:
    """An upload request, checked: the version's Model fields, its aliases, and where it goes."""

    model: dict[str, Any]
    aliases: tuple[str, ...]
    model_id: str | None
    parent: ModelRef | None


def _without_output_only(model: Mapping[str, Any]) -> dict[str, Any]:
    """The Model minus what the server sets: output-only fields, and its ``name`` (the server names it).

    Dropped before the shape check, so a Model read back (its enums as numbers, which the jobs'
    enum table cannot read) can be uploaded again, as a server "must ignore" them.
    """
    props = schema(MODEL_SCHEMA, AIPLATFORM_V1)["properties"]
    ignored = {name for name, prop in props.items() if is_output_only(prop)} | {"name"}
    ignored |= {re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower() for name in ignored}
    return {key: value for key, value in model.items() if key not in ignored}


def check_upload(body: Any, number: str, location: str) -> Upload:
    """An ``UploadModelRequest`` for ``projects/{number}/locations/{location}``, or a ValidationError."""
    if not isinstance(body, Mapping):
        raise ValidationError("body", f"must be a JSON object, got {type(body).__name__}")
    raw = dict(body)
    if isinstance(raw.get("model"), Mapping):
        raw["model"] = _without_output_only(raw["model"])
    request = check_object(raw, UPLOAD_SCHEMA, "", document=AIPLATFORM_V1, enums=ENUM_NUMBERS)
    model = request.get("model")
    if not model:
        raise ValidationError("model", "is required")
    _check_model(model)
    aliases = [
        validate_alias(a, f"model.versionAliases[{i}]") for i, a in enumerate(model.pop("versionAliases", []))
    ]
    model.pop("etag", None)  # the server's, not the client's
    model_id = request.get("modelId") or None
    if model_id is not None:
        validate_model_id(model_id)
    parent = _parent_model(request.get("parentModel") or None, number, location)
    # [U] unverified: Google's answer to both; the version goes under parentModel and modelId is unused.
    return Upload(model, tuple(dict.fromkeys(aliases)), None if parent else model_id, parent)


def _check_model(model: dict[str, Any]) -> None:
    name = model.get("displayName")
    if not name:
        raise ValidationError("model.displayName", "is required")
    if len(name) > MAX_DISPLAY_NAME:
        raise ValidationError("model.displayName", f"at most {MAX_DISPLAY_NAME} characters, got {len(name)}")
    image = (model.get("containerSpec") or {}).get("imageUri")
    if not image:
        raise ValidationError("model.containerSpec.imageUri", "is required")
    if "artifactUri" in model:
        parse_gcs_uri(model["artifactUri"], "model.artifactUri")
    elif serving_of(image) is not None:
        # [U] unverified: whether Google refuses this at once or fails the import.
        raise ValidationError(
            "model.artifactUri",
            f"is required: the pre-built prediction container {image} loads the model from it",
        )
    if "labels" in model:
        model["labels"] = validate_labels(model["labels"], "model.labels", rule=VERTEX_LABELS)


def _parent_model(text: str | None, number: str, location: str) -> ModelRef | None:
    if text is None:
        return None
    ref = parse_model_name(text, "parentModel")
    if ref.version is not None:
        raise ValidationError("parentModel", f"must name a model, not one of its versions; got {text!r}")
    if project_number(ref.project) != number or ref.location != location:
        raise ValidationError(
            "parentModel",
            f"must be a model of projects/{number}/locations/{location}, where the version is uploaded; "
            f"got {text!r}",
        )
    return ref


def check_merge(body: Any) -> list[str]:
    """A ``MergeVersionAliasesRequest``'s ``versionAliases`` (``champion``, ``-old``), required."""
    if not isinstance(body, Mapping):
        raise ValidationError("body", f"must be a JSON object, got {type(body).__name__}")
    request = check_object(body, MERGE_SCHEMA, "", document=AIPLATFORM_V1, enums=ENUM_NUMBERS)
    entries: list[str] = request.get("versionAliases") or []
    if not entries:
        raise ValidationError("versionAliases", "is required: at least one alias to add or (-alias) remove")
    return entries


# -- lists --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ListQuery:
    """A list call's query parameters, checked against the fields its method takes."""

    node: Node | None
    order: tuple[tuple[str, bool], ...]  # (Model field, descending)
    size: int
    token: str | None
    read_mask: str | None
    digest: str  # what a page token must have been issued for

    @classmethod
    def parse(
        cls,
        query: Mapping[str, str],
        filters: Mapping[str, FilterField],
        orders: Mapping[str, str],
    ) -> ListQuery:
        node = parse_filter(query.get("filter"), filters)
        order = _parse_order(query.get("orderBy") or "", orders)
        size = pages.page_size(page_size(query.get("pageSize")))
        digest = hashlib.sha256(f"{query.get('filter')}\0{query.get('orderBy')}".encode()).hexdigest()[:16]
        return cls(node, order, size, query.get("pageToken") or None, query.get("readMask") or None, digest)


def _parse_order(text: str, fields: Mapping[str, str]) -> tuple[tuple[str, bool], ...]:
    order = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        match = _ORDER.fullmatch(part)
        if match is None or match["field"] not in fields:
            raise ValidationError("orderBy", f"cannot order by {part!r}; fields: {', '.join(sorted(fields))}")
        order.append((fields[match["field"]], (match["direction"] or "asc").lower() == "desc"))
    return tuple(order)


Item = tuple[str, dict[str, Any]]  # (identity, the Model as answered)


def ordered(items: list[Item], order: Sequence[tuple[str, bool]]) -> list[Item]:
    """``items`` (in their default order) sorted by each ``orderBy`` field, the first one leading."""
    out = list(items)
    for field, descending in reversed(order):  # stable sorts, least significant first
        out.sort(key=lambda item: str(item[1].get(field) or ""), reverse=descending)
    return out


def page(
    items: list[Item], query: ListQuery, key: str, shown: Callable[[dict[str, Any]], Any]
) -> dict[str, Any]:
    """One page of ``items`` (already filtered and ordered) as ``{key: [...], nextPageToken}``.

    A token names the last item given and its place; the next page starts after that item, or at
    its place if it went away meanwhile (a deleted version: what followed it moved up there). A
    token of another filter or order is a 400, as the page it continues would be another list's.
    """
    start = 0
    if query.token:
        last, place = _decode_token(query.token, query.digest)
        ids = [identity for identity, _ in items]
        start = ids.index(last) + 1 if last in ids else min(place, len(items))
    chosen = items[start : start + query.size]
    token = None
    if start + query.size < len(items):
        place = start + len(chosen) - 1
        token = pages.encode_token({"last": chosen[-1][0], "place": place, "query": query.digest})
    return pages.answer(key, [shown(item) for _, item in chosen], token)


def _decode_token(token: str, digest: str) -> tuple[str, int]:
    decoded = pages.decode_token(token, _position)
    if decoded is None or decoded[2] != digest:
        raise ValidationError("pageToken", "was issued for another filter or orderBy")
    return decoded[0], decoded[1]


def _position(token: Any) -> tuple[str, int, str]:
    """(the last item given, its place, the digest of the filter and order it was issued for)."""
    return str(token["last"]), int(token["place"]), token["query"]

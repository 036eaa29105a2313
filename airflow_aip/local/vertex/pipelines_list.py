"""``trainingPipelines.list`` and ``.delete``: the filter fields, pages and answers Google documents.

The filter is aiplatform.v1.json's for this method: ``display_name`` (``=``, ``!=``, ``:``
wildcard), ``state`` (``PIPELINE_STATE_*`` names), ``training_task_definition`` (``=``, ``!=``,
``:`` wildcard), ``create_time`` (RFC 3339) and ``labels.key=value`` / ``labels.key:*``, with the
same strictness as the job lists (:mod:`airflow_aip.local.logs.filters`). Pages run newest first,
as Google's lists do; a page token is the position after the page's last pipeline
(``createTime``, ID), so a pipeline created meanwhile never shifts a page.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.locations import AIPLATFORM_V1
from airflow_aip.jobs.schema import schema
from airflow_aip.local.clock import rfc3339
from airflow_aip.local.logs.filters import VERTEX_JOB_FILTER_FIELDS, FilterField, FilterFields, parse_filter
from airflow_aip.local.service import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
from airflow_aip.local.vertex.render import apply_read_mask

PIPELINE_SCHEMA = "GoogleCloudAiplatformV1TrainingPipeline"


@cache
def _pipeline_states() -> tuple[str, ...]:
    return tuple(schema(PIPELINE_SCHEMA, AIPLATFORM_V1)["properties"]["state"]["enum"])


def _pipeline_state(name: str, op: str, value: str) -> tuple[str, str]:
    """``state="PIPELINE_STATE_SUCCEEDED"``; a JobState or a short name is a 400, not an empty list."""
    if value not in _pipeline_states():
        raise ValidationError(
            "filter", f"{name}: {value!r} is not a PipelineState; one of {', '.join(_pipeline_states())}"
        )
    return op, value


_WILDCARD = frozenset({"=", "!=", ":"})
PIPELINE_FILTER_FIELDS: FilterFields = {
    **VERTEX_JOB_FILTER_FIELDS,
    "state": FilterField(("state",), frozenset({"=", "!="}), literal=_pipeline_state),
    "training_task_definition": FilterField(
        ("trainingTaskDefinition",), _WILDCARD, literal=VERTEX_JOB_FILTER_FIELDS["display_name"].literal
    ),
}


def _position(resource: Mapping[str, Any]) -> tuple[str, str]:
    return str(resource["createTime"]), str(resource["name"]).rsplit("/", 1)[-1]


def _encode(position: tuple[str, str]) -> str:
    return base64.urlsafe_b64encode(json.dumps({"after": list(position)}).encode()).decode()


def _decode(token: str | None) -> tuple[str, str] | None:
    if not token:
        return None
    try:
        stamp, pipeline_id = json.loads(base64.urlsafe_b64decode(token.encode()))["after"]
        return str(stamp), str(pipeline_id)
    except (ValueError, KeyError, TypeError) as exc:
        raise ValidationError("pageToken", "is not a token this service issued") from exc


def list_page(
    resources: Iterable[Mapping[str, Any]],
    filter_text: str | None,
    page_size: int | None,
    page_token: str | None,
    read_mask: str | None,
) -> dict[str, Any]:
    """One ``ListTrainingPipelinesResponse`` page of ``resources`` (a location's pipelines, as answered)."""
    node = parse_filter(filter_text, PIPELINE_FILTER_FIELDS)
    if page_size is not None and page_size < 0:
        raise ValidationError("pageSize", f"must not be negative, got {page_size}")
    size = min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
    after = _decode(page_token)
    newest_first = sorted(resources, key=_position, reverse=True)
    shown = [
        r
        for r in newest_first
        if (after is None or _position(r) < after) and (node is None or node.matches(r))
    ]
    response: dict[str, Any] = {}
    if shown[:size]:
        response["trainingPipelines"] = [apply_read_mask(r, read_mask, PIPELINE_SCHEMA) for r in shown[:size]]
    if len(shown) > size:
        response["nextPageToken"] = _encode(_position(shown[size - 1]))
    return response


def delete_operation(name: str, operation_id: str) -> dict[str, Any]:
    """The ``delete`` answer: a done long-running operation, as the job deletes answer here.

    [U] unverified: whether Google's operation is already done when the call returns (the SDK waits
    on it either way).
    """
    now = rfc3339()
    return {
        "name": f"{name}/operations/{operation_id}",
        "done": True,
        "metadata": {
            "@type": "type.googleapis.com/google.cloud.aiplatform.v1.DeleteOperationMetadata",
            "genericMetadata": {"createTime": now, "updateTime": now},
        },
        "response": {"@type": "type.googleapis.com/google.protobuf.Empty"},
    }

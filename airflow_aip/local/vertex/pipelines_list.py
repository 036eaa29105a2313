"""``trainingPipelines.list`` and ``.delete``: the filter fields, pages and answers Google documents.

The filter is aiplatform.v1.json's for this method: ``display_name`` (``=``, ``!=``, ``:``
wildcard), ``state`` (``PIPELINE_STATE_*`` names), ``training_task_definition`` (``=``, ``!=``,
``:`` wildcard), ``create_time`` (RFC 3339) and ``labels.key=value`` / ``labels.key:*``, with the
same strictness as the job lists (:mod:`airflow_aip.local.logs.filters`). Pages run newest first,
as Google's lists do; a page token is the position after the page's last pipeline
(``createTime``, ID), so a pipeline created meanwhile never shifts a page.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.locations import AIPLATFORM_V1
from airflow_aip.jobs.schema import schema
from airflow_aip.local import pages
from airflow_aip.local.clock import rfc3339
from airflow_aip.local.logs.filters import VERTEX_JOB_FILTER_FIELDS, FilterField, FilterFields, parse_filter
from airflow_aip.local.vertex.render import apply_read_mask, read_mask_paths

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


def _after(token: Any) -> tuple[str, str]:
    stamp, pipeline_id = token["after"]
    return str(stamp), str(pipeline_id)


def list_page(
    resources: Iterable[Mapping[str, Any]],
    filter_text: str | None,
    page_size: int | None,
    page_token: str | None,
    read_mask: str | None,
) -> dict[str, Any]:
    """One ``ListTrainingPipelinesResponse`` page of ``resources`` (a location's pipelines, as answered)."""
    node = parse_filter(filter_text, PIPELINE_FILTER_FIELDS)
    read_mask_paths(read_mask, PIPELINE_SCHEMA)  # a bad mask is a 400 before anything is read
    size = pages.page_size(page_size)
    after = pages.decode_token(page_token, _after)
    newest_first = sorted(((_position(r), r) for r in resources), key=lambda entry: entry[0], reverse=True)

    def shown(resource: Mapping[str, Any]) -> dict[str, Any] | None:
        if node is not None and not node.matches(resource):
            return None
        return apply_read_mask(resource, read_mask, PIPELINE_SCHEMA)

    items, last = pages.newest_first(newest_first, after, size, shown)
    token = None if last is None else pages.encode_token({"after": list(last)})
    return pages.answer("trainingPipelines", items, token)


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

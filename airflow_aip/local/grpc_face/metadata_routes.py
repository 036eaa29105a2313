"""MetadataService and the TensorboardService calls Experiments makes, on the gRPC face.

Each method names the REST call it is and calls the handler the REST route calls
(:mod:`airflow_aip.local.vertex.metadata_api`), as :mod:`.routes` does for jobs and models.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from google.cloud.aiplatform_v1 import types
from google.longrunning import operations_pb2

from airflow_aip.exceptions import ValidationError
from airflow_aip.local.grpc_face.messages import parent_of
from airflow_aip.local.vertex.metadata import KINDS, node_name
from airflow_aip.local.vertex.metadata_service import MetadataHandlers

AIPLATFORM = "google.cloud.aiplatform.v1"
_STORE = re.compile(r"projects/([^/]+)/locations/([^/]+)/metadataStores/([^/]+)")
Row = tuple[str, Any, Any, str, Callable[[dict[str, Any]], str], Callable[[dict[str, Any]], dict[str, Any]]]


def store_of(name: str, field: str = "parent") -> tuple[str, str, str]:
    """``(project, location, store)`` of ``projects/{p}/locations/{l}/metadataStores/{s}``."""
    found = _STORE.fullmatch(name or "")
    if found is None:
        rule = "must be projects/{project}/locations/{location}/metadataStores/{metadata_store}"
        raise ValidationError(field, f"{rule}; got {name!r}")
    return found[1], found[2], found[3]


def _rest(field: str, tail: str = "") -> Callable[[dict[str, Any]], str]:
    return lambda request: f"/v1/{request.get(field, '')}{tail}"


def _node_rows(handlers: MetadataHandlers, kind: str) -> list[Row]:
    """Create, Get, List and Update of contexts, artifacts or executions."""
    metadata, singular = handlers.metadata, KINDS[kind]["singular"]
    field = singular.lower()
    message = getattr(types, singular)

    def create(request: dict[str, Any]) -> dict[str, Any]:
        body, node_id = request.get(field) or {}, request.get(KINDS[kind]["id"])
        return metadata.create(kind, *store_of(request.get("parent", "")), body, node_id)

    def update(request: dict[str, Any]) -> dict[str, Any]:
        body = request.get(field) or {}
        name = str(body.get("name", ""))
        mask, allow = request.get("updateMask"), bool(request.get("allowMissing"))
        return metadata.patch(kind, node_name(name, kind, f"{field}.name"), body, mask, allow)

    return [
        (
            f"Create{singular}",
            getattr(types, f"Create{singular}Request"),
            message,
            "POST",
            _rest("parent", f"/{kind}"),
            create,
        ),
        (
            f"Get{singular}",
            getattr(types, f"Get{singular}Request"),
            message,
            "GET",
            _rest("name"),
            lambda r: metadata.resource(node_name(r.get("name", ""), kind), singular),
        ),
        (
            f"List{singular}s",
            getattr(types, f"List{singular}sRequest"),
            getattr(types, f"List{singular}sResponse"),
            "GET",
            _rest("parent", f"/{kind}"),
            lambda r: metadata.list(kind, *store_of(r.get("parent", "")), r),
        ),
        (
            f"Update{singular}",
            getattr(types, f"Update{singular}Request"),
            message,
            "PATCH",
            lambda r: f"/v1/{(r.get(field) or {}).get('name', '')}",
            update,
        ),
    ]


def _store_rows(handlers: MetadataHandlers) -> list[Row]:
    metadata, links = handlers.metadata, handlers.links
    return [
        (
            "CreateMetadataStore",
            types.CreateMetadataStoreRequest,
            operations_pb2.Operation,
            "POST",
            _rest("parent", "/metadataStores"),
            lambda r: metadata.create_store(
                *parent_of(r.get("parent", "")), r.get("metadataStore") or {}, r.get("metadataStoreId")
            ),
        ),
        (
            "GetMetadataStore",
            types.GetMetadataStoreRequest,
            types.MetadataStore,
            "GET",
            _rest("name"),
            lambda r: metadata.get_store(*store_of(r.get("name", ""), "name")),
        ),
        (
            "ListMetadataStores",
            types.ListMetadataStoresRequest,
            types.ListMetadataStoresResponse,
            "GET",
            _rest("parent", "/metadataStores"),
            lambda r: metadata.list_stores(
                *parent_of(r.get("parent", "")), r.get("pageSize"), r.get("pageToken")
            ),
        ),
        (
            "AddContextChildren",
            types.AddContextChildrenRequest,
            types.AddContextChildrenResponse,
            "POST",
            _rest("context", ":addContextChildren"),
            lambda r: links.add_context_children(r.get("context", ""), r.get("childContexts") or []),
        ),
        (
            "AddContextArtifactsAndExecutions",
            types.AddContextArtifactsAndExecutionsRequest,
            types.AddContextArtifactsAndExecutionsResponse,
            "POST",
            _rest("context", ":addContextArtifactsAndExecutions"),
            lambda r: links.add_artifacts_and_executions(
                r.get("context", ""), r.get("artifacts") or [], r.get("executions") or []
            ),
        ),
        (
            "QueryContextLineageSubgraph",
            types.QueryContextLineageSubgraphRequest,
            types.LineageSubgraph,
            "GET",
            _rest("context", ":queryContextLineageSubgraph"),
            lambda r: links.context_subgraph(r.get("context", "")),
        ),
        (
            "AddExecutionEvents",
            types.AddExecutionEventsRequest,
            types.AddExecutionEventsResponse,
            "POST",
            _rest("execution", ":addExecutionEvents"),
            lambda r: links.add_execution_events(r.get("execution", ""), r.get("events") or []),
        ),
        (
            "QueryExecutionInputsAndOutputs",
            types.QueryExecutionInputsAndOutputsRequest,
            types.LineageSubgraph,
            "GET",
            _rest("execution", ":queryExecutionInputsAndOutputs"),
            lambda r: links.execution_inputs_and_outputs(r.get("execution", "")),
        ),
    ]


def _tensorboard_rows(handlers: MetadataHandlers) -> list[Row]:
    boards = handlers.tensorboards
    return [
        (
            "CreateTensorboard",
            types.CreateTensorboardRequest,
            operations_pb2.Operation,
            "POST",
            _rest("parent", "/tensorboards"),
            lambda r: boards.create(*parent_of(r.get("parent", "")), r.get("tensorboard") or {}),
        ),
        (
            "GetTensorboard",
            types.GetTensorboardRequest,
            types.Tensorboard,
            "GET",
            _rest("name"),
            lambda r: boards.get(r.get("name", "")),
        ),
        (
            "ListTensorboards",
            types.ListTensorboardsRequest,
            types.ListTensorboardsResponse,
            "GET",
            _rest("parent", "/tensorboards"),
            lambda r: boards.list(*parent_of(r.get("parent", "")), r),
        ),
        (
            "CreateTensorboardExperiment",
            types.CreateTensorboardExperimentRequest,
            types.TensorboardExperiment,
            "POST",
            _rest("parent", "/experiments"),
            lambda r: boards.create_child(
                "experiments",
                r.get("parent", ""),
                r.get("tensorboardExperiment") or {},
                r.get("tensorboardExperimentId", ""),
                "tensorboardExperimentId",
            ),
        ),
        (
            "GetTensorboardExperiment",
            types.GetTensorboardExperimentRequest,
            types.TensorboardExperiment,
            "GET",
            _rest("name"),
            lambda r: boards.get_child("experiments", r.get("name", "")),
        ),
        (
            "CreateTensorboardRun",
            types.CreateTensorboardRunRequest,
            types.TensorboardRun,
            "POST",
            _rest("parent", "/runs"),
            lambda r: boards.create_child(
                "runs",
                r.get("parent", ""),
                r.get("tensorboardRun") or {},
                r.get("tensorboardRunId", ""),
                "tensorboardRunId",
            ),
        ),
        (
            "GetTensorboardRun",
            types.GetTensorboardRunRequest,
            types.TensorboardRun,
            "GET",
            _rest("name"),
            lambda r: boards.get_child("runs", r.get("name", "")),
        ),
        (
            "ListTensorboardTimeSeries",
            types.ListTensorboardTimeSeriesRequest,
            types.ListTensorboardTimeSeriesResponse,
            "GET",
            _rest("parent", "/timeSeries"),
            lambda r: boards.list_time_series(r.get("parent", "")),
        ),
    ]


def metadata_rows(handlers: MetadataHandlers) -> list[tuple[str, Row]]:
    """Every served method as ``(service, row)``: the row's method name is relative to its service."""
    metadata_service, tensorboard_service = (
        f"{AIPLATFORM}.MetadataService",
        f"{AIPLATFORM}.TensorboardService",
    )
    rows = [(metadata_service, row) for row in _store_rows(handlers)]
    for kind in KINDS:
        rows += [(metadata_service, row) for row in _node_rows(handlers, kind)]
    rows += [(tensorboard_service, row) for row in _tensorboard_rows(handlers)]
    return rows

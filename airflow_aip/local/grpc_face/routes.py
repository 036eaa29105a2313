"""The methods the gRPC face serves, each as the REST call it is: the same handler, the same path.

Each method names the REST verb and path the same call takes (``POST /v1/{parent}/customJobs``),
so what the REST face decides by path (a disabled API, the fault plan's method names, counting a
project's calls) is decided the same way for gRPC, and the handler it calls is the one the REST
route calls (:mod:`airflow_aip.local.vertex`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.cloud.aiplatform_v1 import types
from google.longrunning import operations_pb2
from google.protobuf import empty_pb2

from airflow_aip.local.grpc_face.messages import list_query, parent_of, resource_of
from airflow_aip.local.grpc_face.metadata_routes import metadata_rows
from airflow_aip.local.grpc_face.status import Unserved
from airflow_aip.local.logs.filters import page_size
from airflow_aip.local.unserved import google_method
from airflow_aip.local.vertex.handlers import VertexHandlers
from airflow_aip.local.vertex.render import CUSTOM_JOBS, TUNING_JOBS

AIPLATFORM = "google.cloud.aiplatform.v1"
OPERATIONS = "google.longrunning.Operations"
_LIST_FIELDS = ("filter", "pageSize", "pageToken", "readMask", "orderBy")


@dataclass(frozen=True)
class Method:
    """One served method: its messages, the REST call it is, and the handler's call."""

    name: str  # ``google.cloud.aiplatform.v1.JobService/CreateCustomJob``
    request: Any
    response: Any
    verb: str
    path: Callable[[dict[str, Any]], str]
    call: Callable[[dict[str, Any]], dict[str, Any]]


def _size(request: dict[str, Any]) -> int | None:
    return page_size(str(request["pageSize"]) if request.get("pageSize") else None)


def _job_methods(handlers: VertexHandlers, kind: str, singular: str) -> list[Method]:
    """create, get, list, cancel and delete of one job kind (``customJobs``, ``CustomJob``)."""
    jobs, service = handlers.jobs, f"{AIPLATFORM}.JobService"
    field = singular[0].lower() + singular[1:]
    message = getattr(types, singular)

    def named(request: dict[str, Any]) -> tuple[str, str, str]:
        return resource_of(request.get("name", ""), kind)

    def listed(request: dict[str, Any]) -> dict[str, Any]:
        project, location = parent_of(request.get("parent", ""))
        page_token, mask = request.get("pageToken"), request.get("readMask")
        return jobs.list(kind, project, location, request.get("filter"), _size(request), page_token, mask)

    return [
        Method(
            f"{service}/Create{singular}",
            getattr(types, f"Create{singular}Request"),
            message,
            "POST",
            lambda r: f"/v1/{r.get('parent', '')}/{kind}",
            lambda r: jobs.create(kind, *parent_of(r.get("parent", "")), r.get(field) or {}),
        ),
        Method(
            f"{service}/Get{singular}",
            getattr(types, f"Get{singular}Request"),
            message,
            "GET",
            lambda r: f"/v1/{r.get('name', '')}",
            lambda r: jobs.get(kind, *named(r)),
        ),
        Method(
            f"{service}/List{singular}s",
            getattr(types, f"List{singular}sRequest"),
            getattr(types, f"List{singular}sResponse"),
            "GET",
            lambda r: f"/v1/{r.get('parent', '')}/{kind}",
            listed,
        ),
        Method(
            f"{service}/Cancel{singular}",
            getattr(types, f"Cancel{singular}Request"),
            empty_pb2.Empty,
            "POST",
            lambda r: f"/v1/{r.get('name', '')}:cancel",
            lambda r: jobs.cancel(kind, *named(r)),
        ),
        Method(
            f"{service}/Delete{singular}",
            getattr(types, f"Delete{singular}Request"),
            operations_pb2.Operation,
            "DELETE",
            lambda r: f"/v1/{r.get('name', '')}",
            lambda r: jobs.delete(kind, *named(r)),
        ),
    ]


def _pipeline_methods(handlers: VertexHandlers) -> list[Method]:
    pipelines, service, kind = handlers.pipelines, f"{AIPLATFORM}.PipelineService", "trainingPipelines"

    def named(request: dict[str, Any]) -> tuple[str, str, str]:
        return resource_of(request.get("name", ""), kind)

    def listed(request: dict[str, Any]) -> dict[str, Any]:
        project, location = parent_of(request.get("parent", ""))
        page_token, mask = request.get("pageToken"), request.get("readMask")
        return pipelines.list(project, location, request.get("filter"), _size(request), page_token, mask)

    return [
        Method(
            f"{service}/CreateTrainingPipeline",
            types.CreateTrainingPipelineRequest,
            types.TrainingPipeline,
            "POST",
            lambda r: f"/v1/{r.get('parent', '')}/{kind}",
            lambda r: pipelines.create(*parent_of(r.get("parent", "")), r.get("trainingPipeline") or {}),
        ),
        Method(
            f"{service}/GetTrainingPipeline",
            types.GetTrainingPipelineRequest,
            types.TrainingPipeline,
            "GET",
            lambda r: f"/v1/{r.get('name', '')}",
            lambda r: pipelines.get(*named(r)),
        ),
        Method(
            f"{service}/ListTrainingPipelines",
            types.ListTrainingPipelinesRequest,
            types.ListTrainingPipelinesResponse,
            "GET",
            lambda r: f"/v1/{r.get('parent', '')}/{kind}",
            listed,
        ),
        Method(
            f"{service}/CancelTrainingPipeline",
            types.CancelTrainingPipelineRequest,
            empty_pb2.Empty,
            "POST",
            lambda r: f"/v1/{r.get('name', '')}:cancel",
            lambda r: pipelines.cancel(*named(r)),
        ),
        Method(
            f"{service}/DeleteTrainingPipeline",
            types.DeleteTrainingPipelineRequest,
            operations_pb2.Operation,
            "DELETE",
            lambda r: f"/v1/{r.get('name', '')}",
            lambda r: pipelines.delete(*named(r)),
        ),
    ]


def _model_reads(handlers: VertexHandlers) -> list[Method]:
    registry, service = handlers.registry, f"{AIPLATFORM}.ModelService"

    def model(request: dict[str, Any], field: str = "name") -> tuple[str, str, str]:
        return resource_of(request.get(field, ""), "models", field)

    return [
        Method(
            f"{service}/GetModel",
            types.GetModelRequest,
            types.Model,
            "GET",
            lambda r: f"/v1/{r.get('name', '')}",
            lambda r: registry.get(*model(r)),
        ),
        Method(
            f"{service}/ListModels",
            types.ListModelsRequest,
            types.ListModelsResponse,
            "GET",
            lambda r: f"/v1/{r.get('parent', '')}/models",
            lambda r: registry.list_models(*parent_of(r.get("parent", "")), list_query(r, _LIST_FIELDS)),
        ),
        Method(
            f"{service}/ListModelVersions",
            types.ListModelVersionsRequest,
            types.ListModelVersionsResponse,
            "GET",
            lambda r: f"/v1/{r.get('name', '')}:listVersions",
            lambda r: registry.list_versions(*model(r), list_query(r, _LIST_FIELDS)),
        ),
    ]


def _model_writes(handlers: VertexHandlers) -> list[Method]:
    registry, service = handlers.registry, f"{AIPLATFORM}.ModelService"

    def model(request: dict[str, Any], field: str = "name") -> tuple[str, str, str]:
        return resource_of(request.get(field, ""), "models", field)

    def upload(request: dict[str, Any]) -> dict[str, Any]:
        body = {key: value for key, value in request.items() if key != "parent"}
        return registry.upload(*parent_of(request.get("parent", "")), body)

    def update(request: dict[str, Any]) -> dict[str, Any]:
        body = request.get("model") or {}
        mask = request.get("updateMask")
        return registry.patch_model(*resource_of(body.get("name", ""), "models", "model.name"), body, mask)

    return [
        Method(
            f"{service}/UploadModel",
            types.UploadModelRequest,
            operations_pb2.Operation,
            "POST",
            lambda r: f"/v1/{r.get('parent', '')}/models:upload",
            upload,
        ),
        Method(
            f"{service}/MergeVersionAliases",
            types.MergeVersionAliasesRequest,
            types.Model,
            "POST",
            lambda r: f"/v1/{r.get('name', '')}:mergeVersionAliases",
            lambda r: registry.merge_aliases(*model(r), {"versionAliases": r.get("versionAliases", [])}),
        ),
        Method(
            f"{service}/DeleteModelVersion",
            types.DeleteModelVersionRequest,
            operations_pb2.Operation,
            "DELETE",
            lambda r: f"/v1/{r.get('name', '')}:deleteVersion",
            lambda r: registry.delete_version(*model(r)),
        ),
        Method(
            f"{service}/DeleteModel",
            types.DeleteModelRequest,
            operations_pb2.Operation,
            "DELETE",
            lambda r: f"/v1/{r.get('name', '')}",
            lambda r: registry.delete_model(*model(r)),
        ),
        Method(
            f"{service}/UpdateModel",
            types.UpdateModelRequest,
            types.Model,
            "PATCH",
            lambda r: f"/v1/{(r.get('model') or {}).get('name', '')}",
            update,
        ),
    ]


def _operation(handlers: VertexHandlers) -> Method:
    """``GetOperation`` of a model's operation, or a location's (what an upload's future polls)."""

    def get(request: dict[str, Any]) -> dict[str, Any]:
        name = request.get("name", "")
        head, _, operation = name.rpartition("/operations/")
        model = None
        if "/models/" in head:
            head, _, model = head.partition("/models/")
        elif head.count("/") > 3 and (method := google_method("GET", f"/v1/{name}")) is not None:
            raise Unserved(method)  # a job's or a pipeline's operation: REST's 501 too
        project, location = parent_of(head, "name")
        return handlers.registry.get_operation(project, location, model, operation)

    return Method(
        f"{OPERATIONS}/GetOperation",
        operations_pb2.GetOperationRequest,
        operations_pb2.Operation,
        "GET",
        lambda r: f"/v1/{r.get('name', '')}",
        get,
    )


def served_methods(handlers: VertexHandlers) -> dict[str, Method]:
    """Every served method by its full name (``/`` + name is the HTTP/2 path)."""
    methods = [
        *_job_methods(handlers, CUSTOM_JOBS, "CustomJob"),
        *_job_methods(handlers, TUNING_JOBS, "HyperparameterTuningJob"),
        *_pipeline_methods(handlers),
        *_model_reads(handlers),
        *_model_writes(handlers),
        _operation(handlers),
    ]
    for service, (name, request, response, verb, path, call) in metadata_rows(handlers.metadata):
        methods.append(Method(f"{service}/{name}", request, response, verb, path, call))
    return {method.name: method for method in methods}

"""The HTTP routes of the Model Registry (aiplatform v1 ``models``), on the jobs' app and port.

Exactly the paths googleapiclient's static ``aiplatform.v1.json`` generates (and the Vertex AI
SDK's REST transport sends), under ``/v1/projects/{project}/locations/{location}/``:
``POST models:upload``, ``GET models``, ``GET models/{model}[@version]``,
``GET models/{model}:listVersions``, ``POST models/{model}@{version}:mergeVersionAliases``,
``DELETE models/{model}@{version}:deleteVersion``, ``DELETE models/{model}``,
``PATCH models/{model}[@version]?updateMask=...``, and the operations
``GET models/{model}/operations/{id}`` and ``GET operations/{id}`` (also under ``/ui/`` instead of
``/v1/``: where the SDK's REST transport polls an operation). A path parameter matches any
text without ``/``, ``:`` included, so each ``{model}:method`` route is registered before
``{model}``, which would otherwise take ``m:listVersions`` as a model ID.

System parameters and errors are the jobs face's (:mod:`.api`): with
``$alt=json;enum-encoding=int`` (the SDK asks for it) enums go out as numbers. A model's
``/console/`` page is the console's (:mod:`airflow_aip.local.api` routes it).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from starlette.concurrency import run_in_threadpool

from airflow_aip.local.vertex.api import check_system_parameters
from airflow_aip.local.vertex.models import ModelRegistry
from airflow_aip.local.vertex.models_store import model_enums_as_numbers

PARENT = "/projects/{project}/locations/{location}"
BASE = "/v1" + PARENT


def _answer(model: dict[str, Any], numbers: bool) -> dict[str, Any]:
    return model_enums_as_numbers(model) if numbers else model


def _listed(page: dict[str, Any], numbers: bool) -> dict[str, Any]:
    if numbers and "models" in page:
        page["models"] = [model_enums_as_numbers(model) for model in page["models"]]
    return page


def add_model_routes(app: FastAPI, registry: ModelRegistry, json_body: Any) -> None:
    """Register the ``models`` methods; ``json_body`` parses a request body as the other faces do."""
    _add_reads(app, registry)
    _add_writes(app, registry, json_body)
    _add_operations(app, registry)


def _add_reads(app: FastAPI, registry: ModelRegistry) -> None:
    async def list_models(project: str, location: str, request: Request) -> Any:
        numbers = check_system_parameters(request)
        query = dict(request.query_params)
        return _listed(await run_in_threadpool(registry.list_models, project, location, query), numbers)

    async def list_versions(project: str, location: str, model: str, request: Request) -> Any:
        numbers = check_system_parameters(request)
        query = dict(request.query_params)
        page = await run_in_threadpool(registry.list_versions, project, location, model, query)
        return _listed(page, numbers)

    async def get(project: str, location: str, model: str, request: Request) -> Any:
        numbers = check_system_parameters(request)
        return _answer(await run_in_threadpool(registry.get, project, location, model), numbers)

    app.add_api_route(f"{BASE}/models", list_models, methods=["GET"], name="models.list")
    app.add_api_route(
        f"{BASE}/models/{{model}}:listVersions", list_versions, methods=["GET"], name="models.listVersions"
    )
    app.add_api_route(f"{BASE}/models/{{model}}", get, methods=["GET"], name="models.get")


def _add_writes(app: FastAPI, registry: ModelRegistry, json_body: Any) -> None:
    async def upload(project: str, location: str, request: Request) -> Any:
        check_system_parameters(request)
        body = await json_body(request)
        return await run_in_threadpool(registry.upload, project, location, body)

    async def merge(project: str, location: str, model: str, request: Request) -> Any:
        numbers = check_system_parameters(request)
        body = await json_body(request)
        return _answer(
            await run_in_threadpool(registry.merge_aliases, project, location, model, body), numbers
        )

    async def delete_version(project: str, location: str, model: str, request: Request) -> Any:
        check_system_parameters(request)
        return await run_in_threadpool(registry.delete_version, project, location, model)

    async def delete(project: str, location: str, model: str, request: Request) -> Any:
        check_system_parameters(request)
        return await run_in_threadpool(registry.delete_model, project, location, model)

    async def patch(project: str, location: str, model: str, request: Request) -> Any:
        numbers = check_system_parameters(request)
        body = await json_body(request)
        mask = request.query_params.get("updateMask") or request.query_params.get("update_mask")
        return _answer(
            await run_in_threadpool(registry.patch_model, project, location, model, body, mask), numbers
        )

    app.add_api_route(f"{BASE}/models:upload", upload, methods=["POST"], name="models.upload")
    app.add_api_route(
        f"{BASE}/models/{{model}}:mergeVersionAliases",
        merge,
        methods=["POST"],
        name="models.mergeVersionAliases",
    )
    app.add_api_route(
        f"{BASE}/models/{{model}}:deleteVersion",
        delete_version,
        methods=["DELETE"],
        name="models.deleteVersion",
    )
    # After every ``{model}:method`` route of the same HTTP method (see the module's docstring).
    app.add_api_route(f"{BASE}/models/{{model}}", delete, methods=["DELETE"], name="models.delete")
    app.add_api_route(f"{BASE}/models/{{model}}", patch, methods=["PATCH"], name="models.patch")


def _add_operations(app: FastAPI, registry: ModelRegistry) -> None:
    async def model_operation(
        project: str, location: str, model: str, operation: str, request: Request
    ) -> Any:
        check_system_parameters(request)
        return await run_in_threadpool(registry.get_operation, project, location, model, operation)

    async def location_operation(project: str, location: str, operation: str, request: Request) -> Any:
        check_system_parameters(request)
        return await run_in_threadpool(registry.get_operation, project, location, None, operation)

    # The SDK's REST operations client reads an operation at ``/ui/{name}`` (the first of the URIs
    # its GetOperation binding lists), googleapiclient at ``/v1/{name}``: both are served.
    for root in ("/v1", "/ui"):
        base = root + PARENT
        app.add_api_route(
            f"{base}/models/{{model}}/operations/{{operation}}",
            model_operation,
            methods=["GET"],
            name=f"models.operations.get{root}",
        )
        app.add_api_route(
            f"{base}/operations/{{operation}}",
            location_operation,
            methods=["GET"],
            name=f"operations.get{root}",
        )

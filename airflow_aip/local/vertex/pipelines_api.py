"""The HTTP routes of ``trainingPipelines`` (custom training only: :mod:`.pipelines`).

``POST trainingPipelines`` (create), ``GET trainingPipelines`` (list: filter, pageSize, pageToken,
readMask), ``GET trainingPipelines/{id}``, ``POST trainingPipelines/{id}:cancel`` and ``DELETE
trainingPipelines/{id}`` under ``/v1/projects/{project}/locations/{location}/``, as the Vertex AI
SDK's REST transport sends them. Enums go out
as names, which proto3 JSON parsers take even when ``$alt=json;enum-encoding=int`` asked for
numbers.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from starlette.concurrency import run_in_threadpool

from airflow_aip.local.logs.filters import page_size
from airflow_aip.local.vertex.api import check_system_parameters
from airflow_aip.local.vertex.pipelines import TrainingPipelines

BASE = "/v1/projects/{project}/locations/{location}/trainingPipelines"


def add_pipeline_routes(app: FastAPI, pipelines: TrainingPipelines, json_body: Any) -> None:
    async def create(project: str, location: str, request: Request) -> Any:
        check_system_parameters(request)
        body = await json_body(request)
        return await run_in_threadpool(pipelines.create, project, location, body)

    async def cancel(project: str, location: str, pipeline: str, request: Request) -> Any:
        check_system_parameters(request)
        await json_body(request)
        return await run_in_threadpool(pipelines.cancel, project, location, pipeline)

    async def get(project: str, location: str, pipeline: str, request: Request) -> Any:
        check_system_parameters(request)
        return await run_in_threadpool(pipelines.get, project, location, pipeline)

    async def list_pipelines(project: str, location: str, request: Request) -> Any:
        check_system_parameters(request)
        query = request.query_params
        return await run_in_threadpool(
            pipelines.list,
            project,
            location,
            query.get("filter"),
            page_size(query.get("pageSize")),
            query.get("pageToken"),
            query.get("readMask"),
        )

    async def delete(project: str, location: str, pipeline: str, request: Request) -> Any:
        check_system_parameters(request)
        return await run_in_threadpool(pipelines.delete, project, location, pipeline)

    app.add_api_route(BASE, create, methods=["POST"], name="trainingPipelines.create")
    app.add_api_route(BASE, list_pipelines, methods=["GET"], name="trainingPipelines.list")
    app.add_api_route(
        f"{BASE}/{{pipeline}}:cancel", cancel, methods=["POST"], name="trainingPipelines.cancel"
    )
    app.add_api_route(f"{BASE}/{{pipeline}}", get, methods=["GET"], name="trainingPipelines.get")
    app.add_api_route(f"{BASE}/{{pipeline}}", delete, methods=["DELETE"], name="trainingPipelines.delete")

"""The HTTP routes of ``trainingPipelines`` (custom training only: :mod:`.pipelines`).

``POST trainingPipelines``, ``GET trainingPipelines/{id}`` and ``POST trainingPipelines/{id}:cancel``
under ``/v1/projects/{project}/locations/{location}/``, as the Vertex AI SDK's REST transport
sends them; ``list`` and ``delete`` answer 501 (:mod:`airflow_aip.local.unserved`). Enums go out
as names, which proto3 JSON parsers take even when ``$alt=json;enum-encoding=int`` asked for
numbers.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from starlette.concurrency import run_in_threadpool

from airflow_aip.local.vertex.api import _check_system_parameters
from airflow_aip.local.vertex.pipelines import TrainingPipelines

BASE = "/v1/projects/{project}/locations/{location}/trainingPipelines"


def add_pipeline_routes(app: FastAPI, pipelines: TrainingPipelines, json_body: Any) -> None:
    async def create(project: str, location: str, request: Request) -> Any:
        _check_system_parameters(request)
        body = await json_body(request)
        return await run_in_threadpool(pipelines.create, project, location, body)

    async def cancel(project: str, location: str, pipeline: str, request: Request) -> Any:
        _check_system_parameters(request)
        await json_body(request)
        return await run_in_threadpool(pipelines.cancel, project, location, pipeline)

    async def get(project: str, location: str, pipeline: str, request: Request) -> Any:
        _check_system_parameters(request)
        return await run_in_threadpool(pipelines.get, project, location, pipeline)

    app.add_api_route(BASE, create, methods=["POST"], name="trainingPipelines.create")
    app.add_api_route(
        f"{BASE}/{{pipeline}}:cancel", cancel, methods=["POST"], name="trainingPipelines.cancel"
    )
    app.add_api_route(f"{BASE}/{{pipeline}}", get, methods=["GET"], name="trainingPipelines.get")

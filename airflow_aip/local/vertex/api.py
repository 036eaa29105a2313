"""The HTTP routes of the aiplatform v1 face, on the same app (and port) as ml v1 and logging v2.

Exactly the paths googleapiclient's static ``aiplatform.v1.json`` generates (and the Vertex AI
SDK's REST transport sends), for ``customJobs`` and ``hyperparameterTuningJobs``:
``POST .../{kind}`` (create), ``GET .../{kind}`` (list: filter, pageSize, pageToken, readMask),
``GET .../{kind}/{id}``, ``POST .../{kind}/{id}:cancel``, ``DELETE .../{kind}/{id}``, under
``/v1/projects/{project}/locations/{location}/``. The system parameters clients add (``alt``,
``$alt``, ``$.xgafv``) are accepted with their documented values; errors have the envelope the
ml v1 face uses (:mod:`.api`).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from starlette.concurrency import run_in_threadpool

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.locations import AIPLATFORM_V1
from airflow_aip.jobs.vertex.body import CUSTOM_JOB_SCHEMA, TUNING_JOB_SCHEMA
from airflow_aip.jobs.vertex.enums import enums_as_numbers
from airflow_aip.local.logs.filters import page_size
from airflow_aip.local.vertex.render import CUSTOM_JOBS, TUNING_JOBS
from airflow_aip.local.vertex.service import VertexJobs

ENUMS_AS_NUMBERS = "json;enum-encoding=int"  # what the Vertex AI SDK's REST transport asks for
_ALT = {"json", ENUMS_AS_NUMBERS}
_XGAFV = {"1", "2"}
_SCHEMAS = {CUSTOM_JOBS: CUSTOM_JOB_SCHEMA, TUNING_JOBS: TUNING_JOB_SCHEMA}


def check_system_parameters(request: Request) -> bool:
    """Refuse ``alt``/``$alt``/``$.xgafv`` values Google would; True if enums are to go out as numbers."""
    query = request.query_params
    numbers = False
    for name in ("alt", "$alt"):
        if name in query:
            if query[name] not in _ALT:
                raise ValidationError(name, f"must be json (or {ENUMS_AS_NUMBERS}), got {query[name]!r}")
            numbers = numbers or query[name] == ENUMS_AS_NUMBERS
    if "$.xgafv" in query and query["$.xgafv"] not in _XGAFV:
        raise ValidationError("$.xgafv", f"must be 1 or 2, got {query['$.xgafv']!r}")
    return numbers


def _answer(job: dict[str, Any], kind: str, numbers: bool) -> Any:
    return enums_as_numbers(job, _SCHEMAS[kind], AIPLATFORM_V1) if numbers else job


def add_vertex_routes(app: FastAPI, jobs: VertexJobs, json_body: Any) -> None:
    """Register both job kinds' five methods; ``json_body`` parses a request body as the ml face does."""
    for kind in (CUSTOM_JOBS, TUNING_JOBS):
        _add_kind(app, jobs, kind, json_body)


def _add_kind(app: FastAPI, jobs: VertexJobs, kind: str, json_body: Any) -> None:
    base = "/v1/projects/{project}/locations/{location}/" + kind

    async def create(project: str, location: str, request: Request) -> Any:
        numbers = check_system_parameters(request)
        body = await json_body(request)
        return _answer(await run_in_threadpool(jobs.create, kind, project, location, body), kind, numbers)

    async def list_jobs(project: str, location: str, request: Request) -> Any:
        numbers = check_system_parameters(request)
        query = request.query_params
        size = page_size(query.get("pageSize"))
        page = await run_in_threadpool(
            jobs.list,
            kind,
            project,
            location,
            query.get("filter"),
            size,
            query.get("pageToken"),
            query.get("readMask"),
        )
        if kind in page:
            page[kind] = [_answer(job, kind, numbers) for job in page[kind]]
        return page

    async def get(project: str, location: str, job_id: str, request: Request) -> Any:
        numbers = check_system_parameters(request)
        return _answer(await run_in_threadpool(jobs.get, kind, project, location, job_id), kind, numbers)

    async def cancel(project: str, location: str, job_id: str, request: Request) -> Any:
        check_system_parameters(request)
        await json_body(request)  # CancelCustomJobRequest is empty; a broken body is still an error
        return await run_in_threadpool(jobs.cancel, kind, project, location, job_id)

    async def delete(project: str, location: str, job_id: str, request: Request) -> Any:
        check_system_parameters(request)
        return await run_in_threadpool(jobs.delete, kind, project, location, job_id)

    app.add_api_route(base, create, methods=["POST"], name=f"{kind}.create")
    app.add_api_route(base, list_jobs, methods=["GET"], name=f"{kind}.list")
    app.add_api_route(base + "/{job_id}", get, methods=["GET"], name=f"{kind}.get")
    app.add_api_route(base + "/{job_id}:cancel", cancel, methods=["POST"], name=f"{kind}.cancel")
    app.add_api_route(base + "/{job_id}", delete, methods=["DELETE"], name=f"{kind}.delete")

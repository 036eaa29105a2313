"""The HTTP faces of the local service: ml v1 ``projects.jobs``, aiplatform v1 custom and tuning
jobs (:mod:`airflow_aip.local.vertex.api`), Model Registry ``models``
(:mod:`airflow_aip.local.vertex.models_api`), custom ``trainingPipelines``
(:mod:`airflow_aip.local.vertex.pipelines_api`), Vertex AI Experiments' ``metadataStores`` and
``tensorboards`` calls (:mod:`airflow_aip.local.vertex.metadata_api`), logging v2 ``entries:list``.

Paths, bodies and errors are the discovery document's and Google's, so google-api-python-client
(and TrainingJobHook) talk to it unchanged, with only the endpoint overridden. Errors have
Google's shape, ``{"error": {"code", "message", "status"}}``: 400 INVALID_ARGUMENT in each API's
words with the field's proto (snake_case) path, as Google names it (Vertex AI: ``List of found
errors:\t1.Field: job_spec.worker_pool_specs[0]...; Message: ...\t``; ml v1: ``Field: ...
Error: ...``), with a ``google.rpc.BadRequest`` field violation naming the JSON path; 501 UNIMPLEMENTED for a
method of those APIs this service does not serve (:mod:`.unserved`); 404 NOT_FOUND, 409 ALREADY_EXISTS,
400 FAILED_PRECONDITION for cancelling a finished job, 413 for bodies over 1 MiB, 429
RESOURCE_EXHAUSTED for a create the region's capacity model refuses (:mod:`.capacity`), whose
state ``/_capacity`` shows (and, with ``--fault-admin``, changes: :mod:`.capacity_admin`).
``/logs/viewer``, where a failed job's message links its logs in Google's form, opens the job's page.
"""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from airflow_aip import __version__
from airflow_aip.exceptions import JobAlreadyExistsError, JobNotFoundError, ValidationError
from airflow_aip.local import console
from airflow_aip.local.capacity import ResourceExhaustedError
from airflow_aip.local.capacity_admin import apply_update
from airflow_aip.local.faults.asgi import ASGIApp, Message, Receive, Scope, Send
from airflow_aip.local.log_entries import list_entries
from airflow_aip.local.logs.filters import page_size
from airflow_aip.local.permissions import PermissionRefused, disabled_answer
from airflow_aip.local.service import FailedPreconditionError, ServiceConfig, TrainingService
from airflow_aip.local.store import project_number
from airflow_aip.local.unserved import google_method, unimplemented_message
from airflow_aip.local.vertex.api import add_vertex_routes
from airflow_aip.local.vertex.handlers import VertexHandlers
from airflow_aip.local.vertex.metadata_api import add_metadata_routes
from airflow_aip.local.vertex.models import registry_of
from airflow_aip.local.vertex.models_api import add_model_routes
from airflow_aip.local.vertex.pipelines_api import add_pipeline_routes
from airflow_aip.uris import is_loopback

MAX_BODY_BYTES = 1 << 20
_STATUS = {
    400: "INVALID_ARGUMENT",
    404: "NOT_FOUND",
    405: "UNIMPLEMENTED",
    409: "ALREADY_EXISTS",
    413: "INVALID_ARGUMENT",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
}


def google_error(code: int, message: str, status: str | None = None, details: Any = None) -> JSONResponse:
    """An error body as Google's APIs send it (googleapiclient's HttpError reads ``message``)."""
    error: dict[str, Any] = {
        "code": code,
        "message": message,
        "status": status or _STATUS.get(code, "UNKNOWN"),
    }
    if details:
        error["details"] = details
    return JSONResponse({"error": error}, status_code=code)


class BodySizeLimit:
    """Refuse request bodies over ``max_bytes`` (413), whether or not Content-Length is declared."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await google_error(413, f"Request body larger than {self.max_bytes} bytes.")(scope, receive, send)
            return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.max_bytes:
                raise StarletteHTTPException(413, f"Request body larger than {self.max_bytes} bytes.")
            return message

        await self.app(scope, limited, send)


async def _json_body(request: Request) -> Any:
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ValidationError("body", f"is not valid JSON: {exc}") from exc


def create_app(service: TrainingService, handlers: VertexHandlers | None = None) -> FastAPI:
    """The ASGI app serving ``service``: Google's error envelope, then one face per API.

    ``handlers`` are the aiplatform v1 handlers the gRPC face shares (made here if not given).
    """
    app = FastAPI(title="aip-local", version=__version__, docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(BodySizeLimit)
    _add_disabled_apis(app, service)
    _add_error_envelope(app)
    _add_ml_routes(app, service)
    handlers = handlers or VertexHandlers.of(service)
    add_vertex_routes(app, handlers.jobs, _json_body)
    add_model_routes(app, handlers.registry, _json_body)
    add_pipeline_routes(app, handlers.pipelines, _json_body)
    add_metadata_routes(app, handlers.metadata, _json_body)
    _add_logging_routes(app, service)
    _add_console_routes(app, service)
    _add_capacity_routes(app, service)
    _add_permission_routes(app, service)
    return app


def _add_disabled_apis(app: FastAPI, service: TrainingService) -> None:
    """Every call to an API ``--disable-api`` names answers Google's 403 SERVICE_DISABLED."""

    @app.middleware("http")
    async def disabled(request: Request, call_next: Any) -> Any:
        error = disabled_answer(service.permissions, request.url.path, project_number)
        if error is not None:
            return JSONResponse({"error": error}, status_code=403)
        return await call_next(request)


def _add_permission_routes(app: FastAPI, service: TrainingService) -> None:
    """``/_permissions``: read always; change (POST) or grant all (DELETE) only with ``--fault-admin``."""

    @app.get("/_permissions")
    async def permissions() -> Any:
        return service.permissions.snapshot()

    @app.api_route("/_permissions", methods=["POST", "DELETE"])
    async def change_permissions(request: Request) -> Any:
        if not service.config.capacity_admin:
            return google_error(
                403, "fault admin is off: start aip-local serve with --fault-admin", "PERMISSION_DENIED"
            )
        if request.method == "DELETE":
            service.permissions.reset()
        else:
            service.permissions.update(await _json_body(request))
        return service.permissions.snapshot()


_CAMEL_HUMP = re.compile(r"(?<=[a-z0-9])([A-Z])")


def proto_path(field: str) -> str:
    """A JSON field path as Google's messages name it, in proto field names:
    ``jobSpec.workerPoolSpecs[0].machineSpec`` -> ``job_spec.worker_pool_specs[0].machine_spec``."""
    return _CAMEL_HUMP.sub(lambda hump: "_" + hump.group(1).lower(), field)


def invalid_argument_message(path: str, field: str, rule: str) -> str:
    """A 400's message in the words of the API the request went to.

    Vertex AI (any ``.../locations/...`` path): ``List of found errors:\t1.Field:
    job_spec.worker_pool_specs[0].machine_spec.machine_type; Message: ...\t`` [O a gRPC error's
    details and the SDK's InvalidArgument, both quoted in public code]. ml v1 (AI Platform
    Training) and logging: ``Field: training_input.scale_tier Error: ...``.
    """
    if "/locations/" in path:
        return f"List of found errors:\t1.Field: {field}; Message: {rule}\t"
    return f"Field: {field} Error: {rule}"


def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    """Starlette's own errors; no route for one of Google's methods (we do not serve it) is a 501."""
    method = google_method(request.method, request.url.path) if exc.status_code in (404, 405) else None
    if method is not None:
        return google_error(501, unimplemented_message(method), "UNIMPLEMENTED")
    return google_error(exc.status_code, str(exc.detail))


def _add_error_envelope(app: FastAPI) -> None:
    """Every error as Google's APIs send it (``code``, ``message``, ``status``), 400s naming the field."""

    @app.exception_handler(ValidationError)
    async def invalid(request: Request, exc: ValidationError) -> JSONResponse:
        # [U] unverified: whether Google sends BadRequest details, and in which path form: here the
        # request's JSON path, as the client sent the field; the message has the proto path.
        violation = {"field": exc.field, "description": exc.rule}
        details = [{"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [violation]}]
        message = invalid_argument_message(request.url.path, proto_path(exc.field), exc.rule)
        return google_error(400, message, "INVALID_ARGUMENT", details=details)

    @app.exception_handler(JobNotFoundError)
    async def not_found(_: Request, exc: JobNotFoundError) -> JSONResponse:
        return google_error(404, exc.message)

    @app.exception_handler(JobAlreadyExistsError)
    async def exists(_: Request, exc: JobAlreadyExistsError) -> JSONResponse:
        return google_error(409, exc.message)

    @app.exception_handler(FailedPreconditionError)
    async def precondition(_: Request, exc: FailedPreconditionError) -> JSONResponse:
        return google_error(400, str(exc), "FAILED_PRECONDITION")

    @app.exception_handler(PermissionRefused)
    async def refused(_: Request, exc: PermissionRefused) -> JSONResponse:
        return JSONResponse({"error": exc.error}, status_code=int(exc.error["code"]))

    @app.exception_handler(ResourceExhaustedError)
    async def exhausted(_: Request, exc: ResourceExhaustedError) -> JSONResponse:
        return google_error(429, str(exc), "RESOURCE_EXHAUSTED")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _http_error(request, exc)

    @app.exception_handler(RequestValidationError)
    async def bad_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        return google_error(400, f"Invalid request: {exc.errors()}")

    @app.exception_handler(Exception)
    async def internal(_: Request, exc: Exception) -> JSONResponse:
        return google_error(500, f"Internal error in the local training service: {exc!r}")


def _add_ml_routes(app: FastAPI, service: TrainingService) -> None:
    """ml v1 ``projects.jobs``: create, list, get, cancel."""

    @app.get("/")
    async def root() -> dict[str, Any]:
        apis = ["ml/v1", "aiplatform/v1", "logging/v2"]
        return {"service": "aip-local", "version": __version__, "api": "ml/v1", "apis": apis}

    @app.post("/v1/projects/{project}/jobs")
    async def create_job(project: str, request: Request) -> Any:
        body = await _json_body(request)
        return await run_in_threadpool(service.create_job, project, body)

    @app.get("/v1/projects/{project}/jobs")
    async def list_jobs(project: str, request: Request) -> Any:
        query = request.query_params
        size = page_size(query.get("pageSize"))
        return await run_in_threadpool(
            service.list_jobs, project, query.get("filter"), size, query.get("pageToken")
        )

    @app.get("/v1/projects/{project}/jobs/{job_id}")
    async def get_job(project: str, job_id: str) -> Any:
        return await run_in_threadpool(service.get_job, project, job_id)

    @app.post("/v1/projects/{project}/jobs/{job_id}:cancel")
    async def cancel_job(project: str, job_id: str, request: Request) -> Any:
        await _json_body(request)  # CancelJobRequest is empty; a broken body is still an error
        return await run_in_threadpool(service.cancel_job, project, job_id)


def _add_logging_routes(app: FastAPI, service: TrainingService) -> None:
    """Cloud Logging v2 ``entries.list`` over every job's log."""

    @app.post("/v2/entries:list")
    async def entries_list(request: Request) -> Any:
        body = await _json_body(request)
        if not isinstance(body, dict):
            raise ValidationError("body", "must be a JSON object")
        return await run_in_threadpool(list_entries, service.store, body)


def _logs_page(service: TrainingService, project: str, resource: str) -> str | None:
    """The console page of the job a Google logs link names (``resource=ml_job/job_id/<id>``)."""
    kind, _, job_id = resource.removeprefix("ml_job/").partition("/")
    if kind != "job_id" or not job_id:
        return None
    try:
        job = service.store.get(project, job_id)
    except (JobNotFoundError, ValidationError):
        return None
    resource_name = (job.get("resource") or {}).get("name") or f"projects/{project}/jobs/{job_id}"
    return f"{console.PREFIX.rstrip('/')}/{resource_name}"


def _add_console_routes(app: FastAPI, service: TrainingService) -> None:
    """``/console/{resource name}``: a job's page (what a job link opens locally); ``/console/``: all.

    A model's page (``/console/projects/{p}/locations/{l}/models/{id}``) is routed first: the
    catch-all knows jobs only.
    """
    registry = registry_of(service)

    @app.get("/logs/viewer", response_model=None)
    async def logs_viewer(request: Request) -> HTMLResponse | RedirectResponse:
        """Where a failed job's message sends the reader, as Google's links to its Logs Explorer."""
        query = request.query_params
        resource = query.get("resource", "")
        page = await run_in_threadpool(_logs_page, service, query.get("project", ""), resource)
        if page is None:
            return HTMLResponse(console.render_missing(resource), status_code=404)
        return RedirectResponse(page, status_code=307)

    @app.get("/console/projects/{project}/locations/{location}/models/{model}", response_class=HTMLResponse)
    async def model_page(project: str, location: str, model: str) -> HTMLResponse:
        try:
            found = await run_in_threadpool(registry.model_versions, project, location, model)
        except (JobNotFoundError, ValidationError):
            name = f"projects/{project}/locations/{location}/models/{model}"
            return HTMLResponse(console.render_missing_model(name), status_code=404)
        return HTMLResponse(console.render_model(found))

    @app.get("/console", response_class=HTMLResponse)
    @app.get("/console/{name:path}", response_class=HTMLResponse)
    async def console_page(name: str = "") -> HTMLResponse:
        if not name.strip("/"):
            return HTMLResponse(await run_in_threadpool(console.render_index, service))
        job = await run_in_threadpool(console.find_job, service, name)
        if job is None:
            return HTMLResponse(console.render_missing(name), status_code=404)
        return HTMLResponse(console.render_job(job))


def may_change_capacity(config: ServiceConfig, client_host: str | None) -> bool:
    """``--fault-admin``: any client (tests); ``--capacity-admin``: a client on this machine only.

    ``make ui`` and ``make demo`` start the service with ``--capacity-admin``, so a Dag's task (a
    process on this machine) can make a rung run out of capacity, while the faults of ``/_faults``
    stay off and nothing reaching the port from elsewhere can change the region.
    """
    return bool(config.capacity_admin or (config.capacity_admin_loopback and is_loopback(client_host or "")))


def _add_capacity_routes(app: FastAPI, service: TrainingService) -> None:
    """``/_capacity``: read always; change (POST) or clear (DELETE) as :func:`may_change_capacity` allows."""

    @app.get("/_capacity")
    async def capacity() -> Any:
        return service.capacity.snapshot()

    @app.api_route("/_capacity", methods=["POST", "DELETE"])
    async def change_capacity(request: Request) -> Any:
        if not may_change_capacity(service.config, request.client.host if request.client else None):
            message = (
                "capacity admin is off: start aip-local serve with --capacity-admin (from this "
                "machine only) or --fault-admin"
            )
            return google_error(403, message, "PERMISSION_DENIED")
        if request.method == "DELETE":
            await run_in_threadpool(service.capacity.reset)
        else:
            await run_in_threadpool(apply_update, service.capacity, await _json_body(request))
        return service.capacity.snapshot()

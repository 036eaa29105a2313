"""The HTTP routes of Vertex AI Metadata (``metadataStores``) and TensorBoard, on the jobs' app and port.

Exactly the paths googleapiclient's static ``aiplatform.v1.json`` generates (and the Vertex AI
SDK's REST transport sends), under ``/v1/projects/{project}/locations/{location}/``: metadata
stores (create, get, list); a store's ``contexts``, ``artifacts`` and ``executions`` (create with
``{kind}Id``, get, list with ``filter``, patch with ``updateMask``/``allowMissing``); a context's
``:addContextChildren``, ``:addContextArtifactsAndExecutions`` and
``:queryContextLineageSubgraph``; an execution's ``:addExecutionEvents`` and
``:queryExecutionInputsAndOutputs``; and the TensorBoard calls :mod:`.tensorboards` serves.
Each ``{id}:method`` route is registered before ``{id}`` (see :mod:`.models_api`). Everything
else under these collections stays Google's 501 (:mod:`airflow_aip.local.unserved`).

System parameters and errors are the jobs face's (:mod:`.api`): with
``$alt=json;enum-encoding=int`` (the SDK asks for it) states and event types go out as numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from starlette.concurrency import run_in_threadpool

from airflow_aip.local.vertex.api import check_system_parameters
from airflow_aip.local.vertex.metadata import ARTIFACT_STATES, EXECUTION_STATES, KINDS, location_name
from airflow_aip.local.vertex.metadata_links import EVENT_TYPES
from airflow_aip.local.vertex.metadata_service import MetadataHandlers

BASE = "/v1/projects/{project}/locations/{location}"
STORE = BASE + "/metadataStores/{store}"
TENSORBOARD = BASE + "/tensorboards/{tensorboard}"


def metadata_numbers(answer: Any) -> Any:
    """An answer with artifacts' and executions' states and events' types as proto numbers."""
    if isinstance(answer, list):
        return [metadata_numbers(item) for item in answer]
    if not isinstance(answer, dict):
        return answer
    shown = {key: metadata_numbers(value) for key, value in answer.items()}
    name = str(answer.get("name", ""))
    table = ARTIFACT_STATES if "/artifacts/" in name else EXECUTION_STATES if "/executions/" in name else None
    if table is not None and isinstance(answer.get("state"), str):
        shown["state"] = table.get(answer["state"], answer["state"])
    if "artifact" in answer and "execution" in answer and isinstance(answer.get("type"), str):
        shown["type"] = EVENT_TYPES.get(answer["type"], answer["type"])
    return shown


def _route(app: FastAPI, path: str, verb: str, name: str, call: Callable[..., Any], json_body: Any) -> None:
    """One route: system parameters checked, the body parsed for POST and PATCH, the answer's enums."""

    async def endpoint(request: Request) -> Any:
        numbers = check_system_parameters(request)
        body = await json_body(request) if verb in ("POST", "PATCH") else {}
        params = dict(request.path_params)
        answer = await run_in_threadpool(call, params, dict(request.query_params), body)
        return metadata_numbers(answer) if numbers else answer

    app.add_api_route(path, endpoint, methods=[verb], name=name)


def _node(params: dict[str, str], kind: str, node_id: str = "") -> str:
    store = f"{location_name(params['project'], params['location'])}/metadataStores/{params['store']}"
    return f"{store}/{kind}/{node_id or params['node']}"


def add_metadata_routes(app: FastAPI, handlers: MetadataHandlers, json_body: Any) -> None:
    """Register the metadata stores' and tensorboards' served methods."""
    metadata, links = handlers.metadata, handlers.links
    routes: list[tuple[str, str, str, Callable[..., Any]]] = [
        (
            "POST",
            BASE + "/metadataStores",
            "metadataStores.create",
            lambda p, q, b: metadata.create_store(p["project"], p["location"], b, q.get("metadataStoreId")),
        ),
        (
            "GET",
            BASE + "/metadataStores",
            "metadataStores.list",
            lambda p, q, b: metadata.list_stores(
                p["project"], p["location"], q.get("pageSize"), q.get("pageToken")
            ),
        ),
        (
            "GET",
            STORE,
            "metadataStores.get",
            lambda p, q, b: metadata.get_store(p["project"], p["location"], p["store"]),
        ),
        (
            "POST",
            STORE + "/contexts/{node}:addContextChildren",
            "contexts.addContextChildren",
            lambda p, q, b: links.add_context_children(_node(p, "contexts"), b.get("childContexts") or []),
        ),
        (
            "POST",
            STORE + "/contexts/{node}:addContextArtifactsAndExecutions",
            "contexts.addContextArtifactsAndExecutions",
            lambda p, q, b: links.add_artifacts_and_executions(
                _node(p, "contexts"), b.get("artifacts") or [], b.get("executions") or []
            ),
        ),
        (
            "GET",
            STORE + "/contexts/{node}:queryContextLineageSubgraph",
            "contexts.queryContextLineageSubgraph",
            lambda p, q, b: links.context_subgraph(_node(p, "contexts")),
        ),
        (
            "POST",
            STORE + "/executions/{node}:addExecutionEvents",
            "executions.addExecutionEvents",
            lambda p, q, b: links.add_execution_events(_node(p, "executions"), b.get("events") or []),
        ),
        (
            "GET",
            STORE + "/executions/{node}:queryExecutionInputsAndOutputs",
            "executions.queryExecutionInputsAndOutputs",
            lambda p, q, b: links.execution_inputs_and_outputs(_node(p, "executions")),
        ),
    ]
    for kind in KINDS:
        routes += _node_routes(handlers, kind)
    routes += _tensorboard_routes(handlers)
    for verb, path, name, call in routes:
        _route(app, path, verb, name, call, json_body)


def _node_routes(handlers: MetadataHandlers, kind: str) -> list[tuple[str, str, str, Callable[..., Any]]]:
    """create, list, get and patch of contexts, artifacts or executions."""
    metadata, spec = handlers.metadata, KINDS[kind]
    singular = spec["singular"]

    def create(p: dict[str, str], q: dict[str, str], b: Any) -> Any:
        return metadata.create(kind, p["project"], p["location"], p["store"], b, q.get(spec["id"]))

    def patch(p: dict[str, str], q: dict[str, str], b: Any) -> Any:
        allow = q.get("allowMissing", "false").lower() == "true"
        return metadata.patch(kind, _node(p, kind), b, q.get("updateMask"), allow)

    return [
        ("POST", f"{STORE}/{kind}", f"{kind}.create", create),
        (
            "GET",
            f"{STORE}/{kind}",
            f"{kind}.list",
            lambda p, q, b: metadata.list(kind, p["project"], p["location"], p["store"], q),
        ),
        (
            "GET",
            f"{STORE}/{kind}/{{node}}",
            f"{kind}.get",
            lambda p, q, b: metadata.resource(_node(p, kind), singular),
        ),
        ("PATCH", f"{STORE}/{kind}/{{node}}", f"{kind}.patch", patch),
    ]


def _tensorboard_routes(handlers: MetadataHandlers) -> list[tuple[str, str, str, Callable[..., Any]]]:
    boards = handlers.tensorboards

    def name(p: dict[str, str], *tail: str) -> str:
        return f"projects/{p['project']}/locations/{p['location']}/tensorboards/{p['tensorboard']}" + "".join(
            f"/{part}" for part in tail
        )

    experiment = TENSORBOARD + "/experiments/{experiment}"
    run = experiment + "/runs/{run}"
    return [
        (
            "POST",
            BASE + "/tensorboards",
            "tensorboards.create",
            lambda p, q, b: boards.create(p["project"], p["location"], b),
        ),
        (
            "GET",
            BASE + "/tensorboards",
            "tensorboards.list",
            lambda p, q, b: boards.list(p["project"], p["location"], q),
        ),
        ("GET", TENSORBOARD, "tensorboards.get", lambda p, q, b: boards.get(name(p))),
        (
            "POST",
            TENSORBOARD + "/experiments",
            "tensorboards.experiments.create",
            lambda p, q, b: boards.create_child(
                "experiments", name(p), b, q.get("tensorboardExperimentId", ""), "tensorboardExperimentId"
            ),
        ),
        (
            "GET",
            experiment,
            "tensorboards.experiments.get",
            lambda p, q, b: boards.get_child("experiments", name(p, "experiments", p["experiment"])),
        ),
        (
            "POST",
            experiment + "/runs",
            "tensorboards.experiments.runs.create",
            lambda p, q, b: boards.create_child(
                "runs",
                name(p, "experiments", p["experiment"]),
                b,
                q.get("tensorboardRunId", ""),
                "tensorboardRunId",
            ),
        ),
        (
            "GET",
            run,
            "tensorboards.experiments.runs.get",
            lambda p, q, b: boards.get_child(
                "runs", name(p, "experiments", p["experiment"], "runs", p["run"])
            ),
        ),
        (
            "GET",
            run + "/timeSeries",
            "tensorboards.experiments.runs.timeSeries.list",
            lambda p, q, b: boards.list_time_series(
                name(p, "experiments", p["experiment"], "runs", p["run"])
            ),
        ),
    ]

"""The gRPC server of the local service: aiplatform v1 and google.longrunning, on the REST face's handlers.

grpcio's generic handler takes every method by name, so no generated servicer is needed: a
served method's bytes are parsed with Google's message class (:mod:`.messages`), handed to the
handler the REST route calls (:mod:`.routes`), and the answer written back the same way. A
method the service does not serve answers UNIMPLEMENTED naming itself; bytes that are not the
method's message, INVALID_ARGUMENT (the service goes on); a message over the REST face's body
limit, RESOURCE_EXHAUSTED (grpcio's own answer to ``max_receive_message_length``).

What the REST face decides by path, this face decides by the same path: a disabled API
(``--disable-api``), and the fault plan (``--fault-rate``/``--fault-admin``): its method names,
its counters and ``/_stats`` cover both faces. An HTTP fault becomes the code Google's front end
sends for it (429 RESOURCE_EXHAUSTED, 500 INTERNAL, 503 UNAVAILABLE); a dropped or reset
connection becomes UNAVAILABLE, which is what a gRPC client reports for one (grpcio gives a
handler no way to close the client's HTTP/2 connection).

One port, in clear (HTTP/2 with prior knowledge), on the service's host: what a client given an
endpoint and a plain channel reaches (our tests, the bench), and where the client proxy sends the
bytes of a gRPC client it ended TLS for (:mod:`airflow_aip.local.egress.clients`).
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent import futures
from typing import TYPE_CHECKING, Any

import grpc

from airflow_aip.local.faults import FaultPlan, api_method
from airflow_aip.local.faults.middleware import project_in_path
from airflow_aip.local.grpc_face.messages import MalformedMessage, parse_request, render_response
from airflow_aip.local.grpc_face.status import (
    FAULT_CODES,
    HTTP_OF,
    Failure,
    failure_of,
    failure_of_error,
    unimplemented,
)
from airflow_aip.local.permissions import disabled_answer
from airflow_aip.local.service import TrainingService
from airflow_aip.local.store import project_number
from airflow_aip.local.vertex.handlers import VertexHandlers

if TYPE_CHECKING:
    from airflow_aip.local.grpc_face.routes import Method

_LOG = logging.getLogger(__name__)
MAX_MESSAGE_BYTES = 1 << 20  # the REST face's body limit (airflow_aip.local.api.MAX_BODY_BYTES)
_OURS = ("/google.cloud.aiplatform.v1.", "/google.longrunning.Operations/")


def _abort(context: grpc.ServicerContext, failure: Failure) -> Any:
    context.abort_with_status(failure.status())


def _fault_failure(kind: int | str, label: str) -> Failure:
    if isinstance(kind, int):
        return Failure(FAULT_CODES[kind], f"Injected fault ({label}): aip-local answers {kind}.")
    what = "the connection was dropped" if kind == "drop" else "connection reset by peer"
    return Failure(grpc.StatusCode.UNAVAILABLE, f"Injected fault ({label}): {what}.")


class AiplatformHandler(grpc.GenericRpcHandler):  # type: ignore[misc]
    """Every method under aiplatform v1 and google.longrunning: served, or UNIMPLEMENTED by name."""

    def __init__(self, handlers: VertexHandlers, service: TrainingService, plan: FaultPlan | None) -> None:
        self.handlers = handlers
        self._methods: dict[str, Method] | None = None
        self._methods_lock = threading.Lock()
        self.training = service  # not `service`: grpcio calls this handler's service()
        self.plan = plan

    @property
    def methods(self) -> dict[str, Method]:
        """The served methods, built on the first call: Google's message classes take 0.6 s of
        CPU to import, which a service no gRPC client talks to (most tests') never spends."""
        with self._methods_lock:
            if self._methods is None:
                from airflow_aip.local.grpc_face.routes import served_methods

                self._methods = served_methods(self.handlers)
            return self._methods

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        path = handler_call_details.method
        if not path.startswith(_OURS):
            return None  # not Google's API at all: grpcio's own UNIMPLEMENTED
        method = self.methods.get(path.lstrip("/"))
        if method is not None:
            return grpc.unary_unary_rpc_method_handler(lambda data, context: self.call(method, data, context))
        name = path.lstrip("/")
        return grpc.unary_unary_rpc_method_handler(
            lambda _data, context: _abort(context, unimplemented(name))
        )

    def call(self, method: Method, data: bytes, context: grpc.ServicerContext) -> bytes:
        try:
            request = parse_request(method.request, data)
        except MalformedMessage as exc:
            return _abort(context, Failure(grpc.StatusCode.INVALID_ARGUMENT, str(exc)))  # type: ignore[no-any-return]
        path = method.path(request)
        name = api_method(method.verb, path) if self.plan is not None else None
        fault = self._fault_before(name, path, context)
        answer, failure = self._answer(method, request, path)
        if name is not None and self.plan is not None:
            self.plan.record_answer(name, HTTP_OF.get(failure.code, 500) if failure else 200)
        if fault is not None:  # after the service applied it: the client cannot tell
            if fault.kind == "delay":
                _hold(context, fault.seconds)
            else:
                failure = _fault_failure(fault.kind, fault.label)
        if failure is not None:
            return _abort(context, failure)  # type: ignore[no-any-return]
        return answer

    def _fault_before(self, name: str | None, path: str, context: grpc.ServicerContext) -> Any:
        """The plan's fault for this call: a ``before`` one is answered here (or waited, for a
        delay); an ``after`` one is returned, to replace the answer."""
        if name is None or self.plan is None:
            return None
        fault = self.plan.decide(name)
        if (project := project_in_path(path)) is not None:
            self.plan.count_for_project(project, name)
        if fault is None or fault.when == "after":
            return fault
        if fault.kind == "delay":
            time.sleep(fault.seconds)
            return None
        return _abort(context, _fault_failure(fault.kind, fault.label))

    def _answer(self, method: Method, request: dict[str, Any], path: str) -> tuple[bytes, Failure | None]:
        disabled = disabled_answer(self.training.permissions, path, project_number)
        if disabled is not None:
            return b"", failure_of_error(disabled)
        try:
            return render_response(method.response, method.call(request)), None
        except Exception as exc:  # every handler error is a status, as REST's envelope makes it a body
            failure = failure_of(exc, path)
            if failure.code is grpc.StatusCode.INTERNAL:  # a bug of ours: its traceback to the log
                _LOG.exception("%s failed", method.name)
            return b"", failure


def _hold(context: grpc.ServicerContext, seconds: float) -> None:
    """Wait ``seconds`` before answering, or less if the client goes away."""
    deadline = time.monotonic() + seconds
    while context.is_active() and time.monotonic() < deadline:
        time.sleep(0.05)


class GrpcFace:
    """The gRPC server, in clear on ``host:port`` (0: any free port; :attr:`port` says which)."""

    def __init__(
        self,
        handlers: VertexHandlers,
        service: TrainingService,
        plan: FaultPlan | None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        options = [
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.so_reuseport", 0),  # a second service on the same port fails, as uvicorn's does
        ]
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="aip-grpc"),
            handlers=[AiplatformHandler(handlers, service, plan)],
            options=options,
        )
        self.host = host
        self.port = self._server.add_insecure_port(f"{host}:{port}")

    def start(self) -> GrpcFace:
        self._server.start()
        return self

    def stop(self, grace: float = 1.0) -> None:
        self._server.stop(grace).wait()

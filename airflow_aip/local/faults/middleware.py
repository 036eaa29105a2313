"""The ASGI middleware that applies the plan's decisions to real connections.

Outermost around the app, so it owns the connection: a ``before`` fault answers (or drops the
connection) without the app seeing the request; an ``after`` fault lets the app apply it, holds
its answer, and replaces it, so the client cannot tell a lost request from a lost answer.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import struct

from airflow_aip.local.faults.admin import ADMIN_PATHS, serve_admin
from airflow_aip.local.faults.asgi import ASGIApp, Message, Receive, Scope, Send, send_error
from airflow_aip.local.faults.plan import FaultPlan
from airflow_aip.local.faults.routes import api_method
from airflow_aip.local.faults.rules import Fault


class ConnectionDropped(Exception):
    """Raised where the server gives no way to close the connection (in-process test clients)."""


class FaultInjection:
    """ASGI middleware wrapping the whole service app (outermost, so it owns the connection).

    ``admin`` enables ``POST``/``DELETE /_faults`` (targeted faults); ``GET /_stats`` and
    ``GET /_faults`` are read-only and always served while the middleware is installed.
    """

    def __init__(self, app: ASGIApp, plan: FaultPlan, *, admin: bool = False) -> None:
        self.app = app
        self.plan = plan
        self.admin = admin

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        verb, path = scope["method"], scope["path"]
        query = scope.get("query_string", b"").decode("latin-1")
        if path in ADMIN_PATHS:
            await serve_admin(self.plan, verb, path, receive, send, admin=self.admin, query=query)
            return
        method = api_method(verb, path, query)
        if method is None:
            await self.app(scope, receive, send)
            return
        fault = self.plan.decide(method)
        if project := _PROJECT_IN_PATH.search(path):
            self.plan.count_for_project(project[1], method)
        elif method in _PROJECTS_IN_BODY:
            receive = self._counting_body_projects(receive, method)
        if fault is not None and fault.when == "before":
            if fault.kind != "delay":
                await _inject(fault, send)
                return
            await asyncio.sleep(fault.seconds)
            fault = None
        await self._serve(scope, receive, send, method, fault)

    def _counting_body_projects(self, receive: Receive, method: str) -> Receive:
        """``receive``, counting the request for each project its JSON body names
        (``entries.list``: ``resourceNames``) once the app has read the whole body."""
        chunks: list[bytes] = []

        async def counting() -> Message:
            message = await receive()
            chunks.append(message.get("body", b""))
            if message["type"] == "http.request" and not message.get("more_body", False):
                for project in _projects_in(b"".join(chunks)):
                    self.plan.count_for_project(project, method)
            return message

        return counting

    async def _serve(
        self, scope: Scope, receive: Receive, send: Send, method: str, fault: Fault | None
    ) -> None:
        """The app answers; an ``after`` fault then replaces (or delays) that answer, once applied."""
        held: list[Message] = []

        async def answer(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.plan.record_answer(method, int(message["status"]))
            if fault is None:
                await send(message)
            else:
                held.append(message)

        await self.app(scope, receive, answer)
        if fault is None:
            return
        if fault.kind == "delay":
            if not await _client_left(receive, fault.seconds):
                for message in held:
                    await send(message)
            return
        await _inject(fault, send)


_PROJECT_IN_PATH = re.compile(r"/projects/([^/:]+)")


def project_in_path(path: str) -> str | None:
    """The project a REST path names (``/v1/projects/{project}/...``): what ``/_stats?project=`` counts."""
    found = _PROJECT_IN_PATH.search(path)
    return found[1] if found else None


_PROJECTS_IN_BODY = frozenset({"entries.list"})


def _projects_in(body: bytes) -> set[str]:
    try:
        names = json.loads(body or b"{}").get("resourceNames", [])
    except (ValueError, AttributeError):
        return set()
    return {m[1] for name in names if isinstance(name, str) and (m := _PROJECT_IN_PATH.search("/" + name))}


async def _client_left(receive: Receive, seconds: float) -> bool:
    """Hold for ``seconds``, or less if the client goes away (a killed client frees the server)."""

    async def disconnected() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    try:
        await asyncio.wait_for(disconnected(), seconds)
    except TimeoutError:
        return False
    return True


async def _inject(fault: Fault, send: Send) -> None:
    if isinstance(fault.kind, int):
        message = f"Injected fault ({fault.label}): aip-local answers {fault.kind}."
        await send_error(send, fault.kind, message)
        return
    # ASGI has no message for "close without answering"; uvicorn's send is a bound method of its
    # request cycle, which holds the connection's transport. Close it (FIN) or reset it (RST).
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    if transport is None:
        raise ConnectionDropped(f"injected fault {fault.label}")
    if fault.kind == "reset":
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()
    else:
        transport.close()
    # Let the server notice the connection is gone, so it does not try to answer on it.
    for _ in range(3):
        await asyncio.sleep(0)

"""A reverse proxy in front of fake-gcs-server, so Cloud Storage calls can fail on purpose too.

fake-gcs-server is a separate Go binary: the fault middleware of :mod:`airflow_aip.local.faults`
cannot wrap it. ``aip-local serve`` with fault flags puts this ASGI app, wrapped by the same
middleware and sharing the same :class:`~airflow_aip.local.faults.FaultPlan`, between the
clients under test (Airflow tasks) and the emulator, and points ``STORAGE_EMULATOR_HOST`` at it.
The training service itself still talks to fake-gcs-server directly.

Every request (method, path, query, headers, body) is forwarded as a stream and the answer
streamed back. The emulator's own URL, in a resumable upload's ``Location`` and in metadata
(``selfLink``, ``mediaLink``), is replaced by the proxy's, so follow-up calls come back here.

One thing is answered here instead of forwarded: a resumable-upload chunk sent again after
its answer was lost. Google ignores bytes it already persisted and answers a finished upload
with its object again; fake-gcs-server appends the bytes a second time and forgets a finished
upload (404). The proxy remembers, per ``upload_id``, what the emulator persisted and its final
answer, and replays them, so a client's retry meets Google's behaviour, not the emulator's.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs

import httpx
import uvicorn

from airflow_aip.local.faults import FaultInjection, FaultPlan, Message, Receive, Scope, Send, api_method

# Hop-by-hop headers (RFC 9110 7.6.1) belong to one connection, never forwarded.
_HOP_BY_HOP = {
    b"connection",
    b"keep-alive",
    b"proxy-authenticate",
    b"proxy-authorization",
    b"te",
    b"trailer",
    b"transfer-encoding",
    b"upgrade",
    b"expect",
}
_REWRITE_LIMIT = 1 << 20  # metadata answers are small; media is never rewritten


class _ClientLeft(Exception):
    """The client went away while its request body was being forwarded."""


class StorageProxy:
    """ASGI app forwarding to ``upstream`` (fake-gcs-server); ``public_url`` is the proxy's own."""

    def __init__(self, upstream: str, public_url: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.public_url = public_url.rstrip("/")
        self._client: httpx.AsyncClient | None = None
        self.sessions = _Sessions()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        if self._client is None:  # made in the server's own event loop
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(300.0, connect=10.0))
        query = scope.get("query_string", b"")
        raw_path = scope.get("raw_path") or scope["path"].encode()
        url = self.upstream + raw_path.decode("latin-1") + ("?" + query.decode("latin-1") if query else "")
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in _HOP_BY_HOP | {b"host"}]
        upload = _upload_id(scope)
        replay = self.sessions.replay(upload, scope) if upload else None
        if replay is not None:
            await _drain(receive)
            await _answer(send, *replay)
            return
        has_body = any(k.lower() in (b"content-length", b"transfer-encoding") for k, _ in scope["headers"])
        request = httpx.Request(
            scope["method"], url, headers=headers, content=_body(receive) if has_body else b""
        )
        try:
            response = await self._client.send(request, stream=True)
        except _ClientLeft:
            return
        except httpx.HTTPError as exc:
            await _bad_gateway(send, f"fake-gcs-server did not answer: {exc!r}")
            return
        try:
            answer = await self._relay(scope, response, send)
        finally:
            await response.aclose()
        if upload:
            self.sessions.observe(upload, response.status_code, answer)

    async def _relay(self, scope: Scope, response: httpx.Response, send: Send) -> _Answer | None:
        """Stream the answer back; a (rewritten) metadata answer is returned too."""
        headers = [
            (k, self._rewrite(v) if k.lower() == b"location" else v)
            for k, v in response.headers.raw
            if k.lower() not in _HOP_BY_HOP
        ]
        if self._rewritable(scope, response):
            body = self._rewrite(await response.aread())
            headers = [(k, v) for k, v in headers if k.lower() != b"content-length"]
            headers.append((b"content-length", str(len(body)).encode()))
            await _answer(send, response.status_code, headers, body)
            return response.status_code, headers, body
        await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
        async for chunk in response.aiter_raw():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return response.status_code, headers, b""

    def _rewritable(self, scope: Scope, response: httpx.Response) -> bool:
        """A JSON metadata answer (never media: an object's bytes pass untouched)."""
        method = api_method(scope["method"], scope["path"], scope.get("query_string", b"").decode("latin-1"))
        declared = response.headers.get("content-length", "")
        return (
            method != "storage.objects.download"
            and response.headers.get("content-type", "").startswith("application/json")
            and "content-encoding" not in response.headers
            and declared.isdigit()
            and int(declared) <= _REWRITE_LIMIT
        )

    def _rewrite(self, value: bytes) -> bytes:
        return value.replace(self.upstream.encode(), self.public_url.encode())

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._client is not None:
                    await self._client.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return


_Answer = tuple[int, list[tuple[bytes, bytes]], bytes]
_RANGE = re.compile(rb"bytes (\d+)-(\d+)/")
_PERSISTED = re.compile(rb"bytes=0-(\d+)")
_SESSIONS_KEPT = 1000


class _Sessions:
    """Per resumable upload: bytes the emulator persisted, and its final answer once finished."""

    def __init__(self) -> None:
        self._persisted: OrderedDict[str, int] = OrderedDict()
        self._finished: OrderedDict[str, _Answer] = OrderedDict()

    def replay(self, upload: str, scope: Scope) -> _Answer | None:
        """The answer Google gives to a chunk it already has; None: forward the request."""
        if upload in self._finished:
            return self._finished[upload]
        sent = _RANGE.match(dict(scope["headers"]).get(b"content-range", b""))
        persisted = self._persisted.get(upload, 0)
        if sent is None or int(sent[2]) >= persisted:
            return None
        return 308, [(b"range", f"bytes=0-{persisted - 1}".encode()), (b"content-length", b"0")], b""

    def observe(self, upload: str, status: int, answer: _Answer | None) -> None:
        if status == 308 and answer is not None:
            ranges = [v for k, v in answer[1] if k.lower() == b"range"]
            persisted = _PERSISTED.match(ranges[0]) if ranges else None
            _keep(self._persisted, upload, int(persisted[1]) + 1 if persisted else 0)
        elif status in (200, 201) and answer is not None and answer[2]:
            _keep(self._finished, upload, answer)
            self._persisted.pop(upload, None)


def _keep(table: OrderedDict[str, Any], key: str, value: Any) -> None:
    table[key] = value
    table.move_to_end(key)
    while len(table) > _SESSIONS_KEPT:
        table.popitem(last=False)


def _upload_id(scope: Scope) -> str | None:
    """The ``upload_id`` of a resumable upload's chunk (a PUT), None for any other request."""
    if scope["method"] != "PUT" or not scope["path"].startswith("/upload/"):
        return None
    ids = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("upload_id")
    return ids[0] if ids else None


async def _answer(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _drain(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect" or not message.get("more_body"):
            return


async def _body(receive: Receive) -> AsyncIterator[bytes]:
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            raise _ClientLeft
        chunk = message.get("body", b"")
        if chunk:
            yield chunk
        if not message.get("more_body"):
            return


async def _bad_gateway(send: Send, message: str) -> None:
    body = json.dumps({"error": {"code": 502, "message": message, "status": "UNAVAILABLE"}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 502, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class StorageProxyServer:
    """The proxy, fault-wrapped, served by uvicorn in a thread of the ``aip-local serve`` process.

    One process, so the fault plan (and ``/_faults``, ``/_stats`` on the ml port) is shared.
    """

    def __init__(self, upstream: str, plan: FaultPlan, host: str, port: int, *, admin: bool) -> None:
        self.url = f"http://{host}:{port}"
        app: Any = FaultInjection(StorageProxy(upstream, self.url), plan, admin=admin)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self.server.run, name="aip-local-gcs-proxy", daemon=True)

    def start(self, timeout: float = 20.0) -> StorageProxyServer:
        self._thread.start()
        self._thread.join(0.05)
        waited = 0.05
        while not self.server.started:
            if not self._thread.is_alive() or waited > timeout:
                raise RuntimeError(f"the Cloud Storage fault proxy did not start on {self.url}")
            self._thread.join(0.05)
            waited += 0.05
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        self._thread.join(timeout)

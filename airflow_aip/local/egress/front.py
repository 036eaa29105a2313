"""Google's Cloud Storage hosts, answered on this machine for a trainer's HTTPS.

The job's proxy (:mod:`.tunnel`) ends TLS for ``storage.googleapis.com`` and
``www.googleapis.com`` under a certificate of the service's own authority (:mod:`.authority`),
and sends their requests here, in clear, to uvicorn on loopback. Behind it is the app that
fronts the emulator for faults (:class:`~airflow_aip.local.storage.gcs_proxy.StorageProxy`):
the emulator's own URL in answers (a resumable upload's ``Location``, ``selfLink``,
``mediaLink``) becomes Google's, so the next call comes back through the proxy too. uvicorn
runs its h11 parser here, which keeps a header's case: TensorFlow looks ``Location`` up
case-sensitively, and httptools would send ``location``.

- Cloud Storage's JSON API (``/storage/v1``, ``/upload/…``, ``/download/…``, ``/batch/…``) on
  either host: the emulator, as Google would answer it.
- ``storage.googleapis.com/<bucket>/<object>`` (how TensorFlow reads, and how public datasets
  are fetched): the emulator's object when the bucket is one of the emulator's; otherwise the
  real public object, fetched from Google without credentials, as a Vertex VM downloading a
  public dataset gets it (``keras.datasets`` does). Offline, that fails loudly (502).
- Anything else on ``www.googleapis.com`` (other Google APIs' old paths): 403, naming it.
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from collections.abc import Collection
from pathlib import Path

import httpx
import uvicorn

from airflow_aip.local.egress.authority import authority
from airflow_aip.local.faults import Receive, Scope, Send
from airflow_aip.local.storage.gcs_proxy import StorageProxy

GOOGLE_STORAGE = "https://storage.googleapis.com"
_API_PREFIXES = ("/storage/", "/upload/storage/", "/download/storage/", "/batch/storage/")
_DROPPED = {b"host", b"authorization", b"connection", b"keep-alive", b"transfer-encoding", b"te"}
_UNKNOWN_FOR = 2.0  # seconds a bucket the emulator lacks is remembered as lacking


async def json_error(send: Send, code: int, status: str, message: str) -> None:
    body = json.dumps({"error": {"code": code, "message": message, "status": status}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": code, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def stream_response(send: Send, response: httpx.Response, dropped: Collection[bytes]) -> None:
    """Send an upstream ``response`` on as it arrives, without the ``dropped`` headers; then close it."""
    try:
        kept = [(k, v) for k, v in response.headers.raw if k.lower() not in dropped]
        await send({"type": "http.response.start", "status": response.status_code, "headers": kept})
        async for chunk in response.aiter_raw():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    finally:
        await response.aclose()


class GoogleStorageFront:
    """The ASGI app: the emulator for its buckets and the API, Google for public objects."""

    def __init__(self, emulator: str) -> None:
        self.emulator = emulator.rstrip("/")
        self.storage = StorageProxy(self.emulator, "https://www.googleapis.com")
        self._buckets: dict[str, float] = {}  # bucket -> time it was found missing (0: present)
        self._client: httpx.AsyncClient | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        headers = dict(scope["headers"])
        host = headers.get(b"host", b"").decode("latin-1").split(":")[0].lower()
        path: str = scope["path"]
        if path.startswith(_API_PREFIXES):
            await self.storage(scope, receive, send)
            return
        if host != "storage.googleapis.com":
            message = f"aip-local refuses {host}{path}: a trainer's calls to Google stay on this machine"
            await json_error(send, 403, "PERMISSION_DENIED", message)
            return
        bucket = path.lstrip("/").split("/", 1)[0]
        if scope["method"] not in ("GET", "HEAD") or await self._emulator_has(bucket):
            await self.storage(scope, receive, send)
            return
        await self._public(scope, send)

    async def _emulator_has(self, bucket: str) -> bool:
        missing_since = self._buckets.get(bucket)
        if missing_since == 0.0:
            return True
        if missing_since is not None and time.monotonic() - missing_since < _UNKNOWN_FOR:
            return False
        client = self._http()
        response = await client.get(f"{self.emulator}/storage/v1/b/{bucket}")
        self._buckets[bucket] = 0.0 if response.status_code == 200 else time.monotonic()
        return response.status_code == 200

    async def _public(self, scope: Scope, send: Send) -> None:
        """A public object from Google itself, with no credentials (never the job's token)."""
        query = scope.get("query_string", b"").decode("latin-1")
        url = GOOGLE_STORAGE + scope["path"] + ("?" + query if query else "")
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in _DROPPED]
        try:
            response = await self._http().send(
                httpx.Request(scope["method"], url, headers=headers), stream=True
            )
        except httpx.HTTPError as exc:
            message = f"{url} is not in the local emulator, and Google could not be reached: {exc!r}"
            await json_error(send, 502, "UNAVAILABLE", message)
            return
        await stream_response(send, response, _DROPPED)

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:  # made in the server's own event loop
            self._client = httpx.AsyncClient(trust_env=False, timeout=httpx.Timeout(300.0, connect=10.0))
        return self._client


class StorageFrontServer:
    """The front on a free loopback port, in a daemon thread of the service process; the TLS
    context the proxies end Google's names with, and the bundle replicas trust it by."""

    def __init__(self, emulator: str, directory: Path) -> None:
        self.bundle, leaf, key = authority(directory).write(directory)
        self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.tls.load_cert_chain(leaf, key)
        listener = listen_loopback()
        self.address: tuple[str, int] = listener.getsockname()[:2]
        config = uvicorn.Config(GoogleStorageFront(emulator), log_level="warning", lifespan="off", http="h11")
        self._server = uvicorn.Server(config)
        self._listener = listener

    def start(self) -> StorageFrontServer:
        serve_in_thread(self._server, self._listener, "aip-local-storage-front")
        return self


def serve_in_thread(
    server: uvicorn.Server, listener: socket.socket, name: str, timeout: float = 20.0
) -> None:
    """Run ``server`` on ``listener`` in a daemon thread of this process; return once it serves."""
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, name=name, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"{name} did not start")
        thread.join(0.02)


def listen_loopback() -> socket.socket:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    return listener


_FRONTS: dict[tuple[str, Path], StorageFrontServer] = {}
_FRONTS_LOCK = threading.Lock()


def storage_front(emulator: str, directory: Path) -> StorageFrontServer:
    """The process's one front to ``emulator``, started on first use and kept while it lives;
    its certificate files and the replicas' CA bundle are written to ``directory``. Jobs start
    side by side, so the first one makes it under a lock (two writing the same files at once
    would hand one of them a half-written key)."""
    with _FRONTS_LOCK:
        key = (emulator, directory)
        if key not in _FRONTS:
            _FRONTS[key] = StorageFrontServer(emulator, directory).start()
        return _FRONTS[key]

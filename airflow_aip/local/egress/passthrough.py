"""Google's other APIs, passed through to Google with the developer's own credentials, on purpose.

On Vertex AI a trainer calls BigQuery, Secret Manager or Pub/Sub with its job's service account
("The default Vertex AI service agent has access to BigQuery and Cloud Storage": Google's
custom-service-account page). Locally a trainer's token is one only the local services accept, so
those calls are refused by default (:mod:`.routes`). ``aip-local serve --pass-through-host HOST``
(repeatable, one host each: no groups, so what leaves the machine is spelled out) names hosts whose
calls go to Google instead:

- the job's proxy ends the replica's TLS for that host under the service's authority, as it does
  for Cloud Storage's, and sends its HTTP/1.1 requests here in clear, telling the job's log each
  request (:mod:`.tunnel`);
- this app sends each request on to Google over TLS, with the replica's ``Authorization``
  replaced by the developer's Application Default Credentials (``google.auth.default()`` in the
  service, refreshed when stale; their quota project too): the calls act with the developer's
  rights, not the job's service account's, which is the difference the job's log names.

gRPC (HTTP/2) is not passed: a replica that picks ``h2`` is told so in the job's log and its
connection closed; Google's gRPC clients take ``transport="rest"``. Where the requests go is
:attr:`PassThrough.upstream`: Google by the host's name, or, in tests, a stand-in on loopback
(given in-process, or to a service process by :data:`TEST_UPSTREAM`).
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from airflow_aip.local.egress.authority import authority
from airflow_aip.local.egress.front import json_error, listen_loopback, serve_in_thread, stream_response
from airflow_aip.local.faults import Receive, Scope, Send

CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
# Hop-by-hop headers, and the replica's credentials and host (both replaced).
_DROPPED = {
    b"host",
    b"authorization",
    b"x-goog-user-project",
    b"connection",
    b"keep-alive",
    b"transfer-encoding",
    b"te",
    b"proxy-authorization",
}
Upstream = tuple[str, "ssl.SSLContext | bool"]


def developer_credentials() -> Any:
    """The developer's Application Default Credentials (gcloud's ADC file, a key file named by
    ``GOOGLE_APPLICATION_CREDENTIALS``, ...), for the cloud-platform scope; raises
    ``google.auth.exceptions.DefaultCredentialsError`` when there are none."""
    import google.auth

    credentials, _ = google.auth.default(scopes=[CLOUD_PLATFORM])
    return credentials


# Tests only: a stand-in for Google (its base URL, and the CA file it is verified by), since no test
# reaches Google; read by the service process at each new passed host.
TEST_UPSTREAM = "AIP_LOCAL_TEST_GOOGLE_UPSTREAM"
TEST_UPSTREAM_CA = "AIP_LOCAL_TEST_GOOGLE_UPSTREAM_CA"


def google_upstream(host: str) -> Upstream:
    """Google itself, by the host's name, verified by the public roots (or a test's stand-in)."""
    stand_in = os.environ.get(TEST_UPSTREAM)
    if stand_in:
        return stand_in.rstrip("/"), ssl.create_default_context(cafile=os.environ.get(TEST_UPSTREAM_CA))
    return f"https://{host}", True


@dataclass(frozen=True)
class PassThrough:
    """The hosts passed to Google, whose credentials they go with, and where (the boundary a test
    replaces: ``upstream(host) -> (base URL, TLS verification)``)."""

    hosts: frozenset[str]
    credentials: Callable[[], Any] = developer_credentials
    upstream: Callable[[str], Upstream] = google_upstream


class GooglePassThrough:
    """The ASGI app: each request to a passed host, on to Google with the developer's token."""

    def __init__(self, passing: PassThrough) -> None:
        self.passing = passing
        self._credentials: Any = None
        self._lock = threading.Lock()
        self._clients: dict[str, httpx.AsyncClient] = {}

    def _authorization(self) -> dict[str, str]:
        """The developer's ``Authorization`` (and quota project), refreshed when stale."""
        import google.auth.transport.requests

        with self._lock:
            if self._credentials is None:
                self._credentials = self.passing.credentials()
            if not self._credentials.valid:
                self._credentials.refresh(google.auth.transport.requests.Request())
            headers: dict[str, str] = {}
            self._credentials.apply(headers)
            return headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        host = dict(scope["headers"]).get(b"host", b"").decode("latin-1").split(":")[0].lower()
        if host not in self.passing.hosts:
            await json_error(send, 403, "PERMISSION_DENIED", f"aip-local does not pass {host} to Google")
            return
        try:
            credentials = await asyncio.to_thread(self._authorization)
        except Exception as exc:  # google.auth's errors: no ADC, a refresh refused
            message = f"aip-local could not get your Application Default Credentials for {host}: {exc}"
            await json_error(send, 401, "UNAUTHENTICATED", message)
            return
        body = b""
        more = True
        while more:
            received = await receive()
            body += received.get("body", b"")
            more = received.get("more_body", False)
        base, _ = self.passing.upstream(host)
        query = scope.get("query_string", b"").decode("latin-1")
        url = base + scope["raw_path"].decode("latin-1").split("?")[0] + ("?" + query if query else "")
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in _DROPPED]
        headers += [(b"host", host.encode())]
        headers += [(k.lower().encode(), v.encode()) for k, v in credentials.items()]
        await self._relay(send, httpx.Request(scope["method"], url, headers=headers, content=body), host)

    async def _relay(self, send: Send, request: httpx.Request, host: str) -> None:
        try:
            response = await self._client(host).send(request, stream=True)
        except httpx.HTTPError as exc:
            await json_error(send, 502, "UNAVAILABLE", f"aip-local could not reach {host}: {exc!r}")
            return
        await stream_response(send, response, _DROPPED)

    def _client(self, host: str) -> httpx.AsyncClient:
        if host not in self._clients:  # made in the server's own event loop
            _, verify = self.passing.upstream(host)
            timeout = httpx.Timeout(300.0, connect=10.0)
            self._clients[host] = httpx.AsyncClient(trust_env=False, verify=verify, timeout=timeout)
        return self._clients[host]


class PassThroughServer:
    """The app on a free loopback port, in a daemon thread of the service process, and the TLS the
    job's proxy ends a passed host's names with (ALPN: ``http/1.1``, and ``h2`` only to say no)."""

    def __init__(self, passing: PassThrough, directory: Path) -> None:
        _, leaf, key = authority(directory).write(directory)
        self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.tls.load_cert_chain(leaf, key)
        # The server's order wins: HTTP/1.1 for a client offering both (curl), h2 only for one that
        # offers nothing else (gRPC), so it can be told it is not passed.
        self.tls.set_alpn_protocols(["http/1.1", "h2"])
        listener = listen_loopback()
        self.address: tuple[str, int] = listener.getsockname()[:2]
        config = uvicorn.Config(GooglePassThrough(passing), log_level="warning", lifespan="off", http="h11")
        self._server = uvicorn.Server(config)
        self._listener = listener

    def start(self) -> PassThroughServer:
        serve_in_thread(self._server, self._listener, "aip-local-pass-through")
        return self


_SERVERS: dict[tuple[PassThrough, Path], PassThroughServer] = {}
_SERVERS_LOCK = threading.Lock()


def pass_through_server(passing: PassThrough, directory: Path) -> PassThroughServer:
    """The process's one pass-through for ``passing``, started on first use and kept while it lives."""
    with _SERVERS_LOCK:
        key = (passing, directory)
        if key not in _SERVERS:
            _SERVERS[key] = PassThroughServer(passing, directory).start()
        return _SERVERS[key]


def said(request_head: bytes) -> str:
    """``METHOD host/path`` of a request head, for the job's log (no query: it may hold secrets)."""
    first, _, rest = request_head.partition(b"\r\n")
    words = first.decode("latin-1", "replace").split()
    host = ""
    for line in rest.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"host":
            host = value.strip().decode("latin-1", "replace")
    path = words[1].split("?")[0] if len(words) > 1 else ""
    return json.dumps(f"{words[0] if words else '?'} {host}{path}")[1:-1]

"""An HTTPS proxy per job on loopback: ``https_proxy`` for its replicas (``CONNECT`` only).

Each ``CONNECT host:port`` is routed by :func:`.routes.way_of`:
- to the Cloud Storage front: TLS ends here, under the service's certificate, and the requests
  go on in clear through :class:`~.framing.RequestStream`;
- Vertex AI's hosts: TLS ends here too (:func:`end_here`), and the client's choice of protocol
  (ALPN) picks the service's face: HTTP/2 (gRPC, what gapic clients speak) or HTTP/1.1 (REST);
- a host named by ``--pass-through-host``: TLS ends here, and its HTTP/1.1 requests go to the
  pass-through (:mod:`.passthrough`), which sends them to Google with the developer's credentials;
  each request's method, host and path is told to the job's log through ``on_pass``;
- to a refusal: ``403`` with a reason phrase naming the host and why (Python's clients show
  it, curl shows the code), also told once per host to the job's log through ``on_refusal``,
  so a trainer that swallows the error still leaves a trace;
- or through a plain tunnel.

Threads, not asyncio: a replica opens a few long connections, and a blocking pipe per
connection is the simplest thing that cannot stall the service's event loop.
"""

from __future__ import annotations

import select
import socket
import socketserver
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass

from airflow_aip.local.egress.framing import FramingError, RequestStream
from airflow_aip.local.egress.routes import Way, way_of
from airflow_aip.local.loopback import LoopbackServer

_IDLE_SECONDS = 600.0
_CHUNK = 1 << 16


@dataclass(frozen=True)
class VertexFaces:
    """The service's two faces in clear, and the TLS (ALPN ``h2`` and ``http/1.1``) that ends
    Vertex AI's names in front of them."""

    tls: ssl.SSLContext
    grpc: tuple[str, int]
    rest: tuple[str, int]


@dataclass(frozen=True)
class Passing:
    """The hosts passed to Google, where the pass-through listens (in clear), its TLS, and who hears
    of each request (``on_pass(host, "METHOD host/path")``)."""

    hosts: frozenset[str]
    address: tuple[str, int]
    tls: ssl.SSLContext
    on_pass: Callable[[str, str], None]


@dataclass(frozen=True)
class Front:
    """Where Google's storage hosts are answered (in clear), and the TLS they are answered with;
    where Vertex AI's are (None: refused); where the passed hosts go (None: none is)."""

    address: tuple[str, int]
    tls: ssl.SSLContext | None
    vertex: VertexFaces | None = None
    passing: Passing | None = None


def pipe(client: socket.socket, server: socket.socket, requests: RequestStream | None = None) -> None:
    """Bytes both ways until either side closes or both idle for :data:`_IDLE_SECONDS`.

    ``requests`` reframes what the client sends. A TLS socket may hold decrypted bytes that
    ``select`` cannot see (``pending()``), so those are read first.
    """
    pair = (client, server)
    while True:
        ready: list[socket.socket] = []
        if isinstance(client, ssl.SSLSocket) and client.pending():
            ready = [client]
        else:
            ready, _, _ = select.select(pair, (), (), _IDLE_SECONDS)
        if not ready:
            return
        for source in ready:
            try:
                data = source.recv(_CHUNK)
                if not data:
                    return
                if source is client:
                    server.sendall(requests.feed(data) if requests else data)
                else:
                    client.sendall(data)
            except (OSError, FramingError):
                return


def end_here(
    connection: socket.socket,
    tls: ssl.SSLContext,
    h2: tuple[str, int],
    http1: tuple[str, int],
    requests: RequestStream | None = None,
) -> None:
    """End the client's TLS on ``connection`` (tunnel established already), and pass its clear
    bytes to ``h2`` if it chose HTTP/2 by ALPN (gRPC insists on it), else to ``http1``."""
    try:
        client = tls.wrap_socket(connection, server_side=True)
    except (OSError, ssl.SSLError):
        return  # the client does not trust the service's root: its own error says so
    with client:
        target = h2 if client.selected_alpn_protocol() == "h2" else http1
        try:
            upstream = socket.create_connection(target, timeout=10)
        except OSError:
            return
        with upstream:
            upstream.settimeout(None)
            upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pipe(client, upstream, requests)


def passed(connection: socket.socket, host: str, passing: Passing) -> None:
    """End the client's TLS for a passed ``host`` and relay its HTTP/1.1 requests to the
    pass-through, each head told to ``passing.on_pass``; gRPC (ALPN ``h2``) is refused, said once."""
    from airflow_aip.local.egress.passthrough import said

    try:
        client = passing.tls.wrap_socket(connection, server_side=True)
    except (OSError, ssl.SSLError):
        return
    with client:
        if client.selected_alpn_protocol() == "h2":
            passing.on_pass(host, "not passed: gRPC (HTTP/2) is not passed through; use the client's REST")
            return
        try:
            upstream = socket.create_connection(passing.address, timeout=10)
        except OSError:
            return
        with upstream:
            upstream.settimeout(None)
            pipe(client, upstream, RequestStream(lambda head: passing.on_pass(host, said(head))))


class ConnectHandler(socketserver.StreamRequestHandler):
    """What both proxies do with a connection before routing it: read its request, answer it."""

    def read_request(self) -> list[str]:
        """The request line's words (``CONNECT host:port HTTP/1.1``), the headers read past."""
        request = self.rfile.readline(8192).decode("latin-1").split()
        while self.rfile.readline(8192) not in (b"\r\n", b"\n", b""):
            pass
        return request

    def established(self) -> None:
        self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        self.wfile.flush()

    def answer(self, code: int, reason: str) -> None:
        """A refusal with ``reason`` as its phrase (what Python's clients show) and its body."""
        phrase = reason.replace("\r", " ").replace("\n", " ")
        body = (phrase + "\n").encode()
        head = f"HTTP/1.1 {code} {phrase}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
        self.wfile.write(head.encode("latin-1", "replace") + b"Connection: close\r\n\r\n" + body)


class _Handler(ConnectHandler):
    server: _TunnelServer

    def handle(self) -> None:
        request = self.read_request()
        if len(request) != 3 or request[0].upper() != "CONNECT":
            return self.answer(405, "aip-local's trainer proxy only tunnels HTTPS (CONNECT)")
        host, _, port_text = request[1].rpartition(":")
        if not port_text.isdigit():
            return self.answer(400, f"no port in {request[1]!r}")
        return self._route(host, port_text)

    def _route(self, host: str, port_text: str) -> None:
        front = self.server.front
        way, why = way_of(host, int(port_text), front.passing.hosts if front.passing else frozenset())
        if way is Way.PASS and front.passing is not None:
            self.established()
            return passed(self.connection, host.lower().rstrip("."), front.passing)
        if way is Way.VERTEX and front.vertex is None:
            way, why = Way.REFUSE, f"aip-local refuses {host}: the service did not say where it serves gRPC"
        if way is Way.REFUSE:
            self.server.refused(host, why)
            return self.answer(403, why)
        if way is Way.VERTEX and front.vertex is not None:
            self.established()
            vertex = front.vertex
            return end_here(self.connection, vertex.tls, vertex.grpc, vertex.rest)
        if way is Way.FRONT and front.tls is None:
            return self.answer(403, f"aip-local has no Cloud Storage emulator to answer {host}")
        target = front.address if way is Way.FRONT else (host, int(port_text))
        try:
            upstream = socket.create_connection(target, timeout=10)
        except OSError as exc:
            return self.answer(502, f"aip-local could not reach {host}:{port_text}: {exc.strerror or exc}")
        with upstream:
            upstream.settimeout(None)
            self.established()
            if way is not Way.FRONT or front.tls is None:
                return pipe(self.connection, upstream)
            try:
                client = front.tls.wrap_socket(self.connection, server_side=True)
            except (OSError, ssl.SSLError):
                return  # the replica does not trust the service's root: its client says so
            with client:
                pipe(client, upstream, RequestStream())


class _TunnelServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, front: Front, on_refusal: Callable[[str, str], None]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.front = front
        self._on_refusal = on_refusal
        self._told: set[str] = set()
        self._lock = threading.Lock()

    def refused(self, host: str, why: str) -> None:
        with self._lock:
            first = host not in self._told
            self._told.add(host)
        if first:
            self._on_refusal(host, why)


class TrainerProxy(LoopbackServer):
    """One job's proxy; its :attr:`url` is the value of ``https_proxy``."""

    def __init__(self, front: Front, on_refusal: Callable[[str, str], None]) -> None:
        super().__init__(_TunnelServer(front, on_refusal))

    @property
    def url(self) -> str:
        return f"http://{self.host}"

"""The client proxy: Google's own clients, unchanged, reach the local service by their usual names.

Google's SDK, gapic clients and the Google provider's hooks call ``{region}-aiplatform.googleapis.com:443``
(gRPC by default), ``oauth2.googleapis.com`` for tokens and ``storage.googleapis.com``, by fixed
names. gRPC's core takes an HTTP CONNECT proxy from ``grpc_proxy``/``https_proxy`` and its roots from
``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH``; requests and google-auth take ``https_proxy`` and
``REQUESTS_CA_BUNDLE``. With ``aip-local env``'s variables, every such call arrives here as a
``CONNECT host:443``, and:

- Vertex AI's hosts (``aiplatform.googleapis.com``, ``{region}-aiplatform.googleapis.com``): TLS
  ends here under the service's authority (:mod:`.authority`), offering ALPN ``h2`` and
  ``http/1.1``. A gRPC client picks ``h2`` (gRPC insists on it): its bytes go on to the gRPC face;
  a REST client (the SDK with ``api_transport="rest"``, googleapiclient) picks ``http/1.1``: the
  REST face. Both faces answer from one set of handlers.
- Google's token endpoint (``oauth2.googleapis.com``, where google-auth sends every grant): any
  ``POST .../token`` gets a local access token, so ADC, a user's refresh token or a service
  account's key file all work, and no credential (nor a JWT signed with a real key) leaves the machine.
- Cloud Storage's hosts: the service's front to the emulator, as a trainer's proxy sends them (:mod:`.front`).
- Google's other hosts are refused, naming the host (:mod:`.routes`, today's rule for trainers).
- Any other host is tunnelled untouched.

Loopback clients only, unless the service was started to serve others (``--allow-remote``).
"""

from __future__ import annotations

import http.server
import json
import secrets
import socket
import socketserver
import ssl
from dataclasses import dataclass
from pathlib import Path

from airflow_aip.local.egress.authority import authority
from airflow_aip.local.egress.framing import RequestStream
from airflow_aip.local.egress.routes import Way, is_vertex_host, way_of
from airflow_aip.local.egress.tunnel import ConnectHandler, end_here, pipe
from airflow_aip.local.loopback import LoopbackServer
from airflow_aip.uris import is_loopback

TOKEN_HOSTS = frozenset({"oauth2.googleapis.com"})  # google-auth's token endpoint, every grant
_TOKEN_LIFETIME = 3600


@dataclass(frozen=True)
class Upstreams:
    """Where the proxy sends what it answers locally: the two faces and the Cloud Storage front."""

    grpc: tuple[str, int]
    rest: tuple[str, int]
    storage: tuple[str, int] | None


def server_tls(directory: Path) -> tuple[ssl.SSLContext, Path]:
    """The TLS the proxy ends Google's names with (ALPN ``h2`` first), and the roots file that
    trusts it (the public roots and the service's root)."""
    bundle, leaf, key = authority(directory).write(directory)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(leaf, key)
    context.set_alpn_protocols(["h2", "http/1.1"])
    return context, bundle


class _TokenAnswer(http.server.BaseHTTPRequestHandler):
    """``POST .../token`` (OAuth 2.0's token endpoint, every grant): a local bearer token."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not self.path.split("?")[0].endswith("/token"):
            return self._send(404, {"error": "not_found", "error_description": f"aip-local: no {self.path}"})
        token = {
            "access_token": f"aip-local.{secrets.token_urlsafe(24)}",
            "expires_in": _TOKEN_LIFETIME,
            "token_type": "Bearer",
            "scope": "https://www.googleapis.com/auth/cloud-platform",
        }
        self._send(200, token)

    def _send(self, code: int, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        return


def _is_token_host(name: str, port: int) -> bool:
    return port == 443 and name in TOKEN_HOSTS


class _Handler(ConnectHandler):
    server: _ClientProxyServer

    def handle(self) -> None:
        request = self.read_request()
        if not (self.server.allow_remote or is_loopback(self.client_address[0])):
            return self.answer(403, "aip-local's client proxy serves this machine only")
        if len(request) != 3 or request[0].upper() != "CONNECT":
            return self.answer(405, "aip-local's client proxy only tunnels HTTPS (CONNECT)")
        host, _, port_text = request[1].rpartition(":")
        if not port_text.isdigit():
            return self.answer(400, f"no port in {request[1]!r}")
        name, port = host.lower().rstrip(".").strip("[]"), int(port_text)
        upstreams = self.server.upstreams
        if port == 443 and is_vertex_host(name):
            return self._ended_here(upstreams.grpc, upstreams.rest)
        if _is_token_host(name, port):
            return self._tokens()
        way, why = way_of(name, port, trainer=False)
        if way is Way.REFUSE:
            return self.answer(403, why)
        if way is Way.FRONT:
            if upstreams.storage is None:
                return self.answer(403, f"aip-local has no Cloud Storage emulator to answer {name}")
            return self._ended_here(upstreams.storage, upstreams.storage, RequestStream())
        return self._tunnel((host, port))

    def _tunnel(self, target: tuple[str, int]) -> None:
        try:
            upstream = socket.create_connection(target, timeout=10)
        except OSError as exc:
            return self.answer(
                502, f"aip-local could not reach {target[0]}:{target[1]}: {exc.strerror or exc}"
            )
        with upstream:
            upstream.settimeout(None)
            self.established()
            pipe(self.connection, upstream)

    def _wrapped(self) -> ssl.SSLSocket | None:
        self.established()
        try:
            return self.server.tls.wrap_socket(self.connection, server_side=True)
        except (OSError, ssl.SSLError):
            return None  # the client does not trust the service's root: its own error says so

    def _ended_here(
        self, h2: tuple[str, int], http1: tuple[str, int], requests: RequestStream | None = None
    ) -> None:
        """TLS ends here; the clear bytes go on to ``h2`` if the client chose HTTP/2 (gRPC), else to
        ``http1``; ``requests`` reframes HTTP/1.1 requests on the way (the storage front's)."""
        self.established()
        end_here(self.connection, self.server.tls, h2, http1, requests)

    def _tokens(self) -> None:
        client = self._wrapped()
        if client is None:
            return
        with client:
            _TokenAnswer(client, self.client_address, self.server)


class _ClientProxyServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self, address: tuple[str, int], upstreams: Upstreams, tls: ssl.SSLContext, allow_remote: bool
    ) -> None:
        super().__init__(address, _Handler)
        self.upstreams = upstreams
        self.tls = tls
        self.allow_remote = allow_remote


class ClientProxy(LoopbackServer):
    """The proxy on ``address``; :attr:`url` is the value of ``grpc_proxy`` and ``https_proxy``."""

    def __init__(
        self,
        address: tuple[str, int],
        upstreams: Upstreams,
        directory: Path,
        *,
        allow_remote: bool = False,
    ) -> None:
        tls, self.roots = server_tls(directory)
        super().__init__(_ClientProxyServer(address, upstreams, tls, allow_remote))

    @property
    def url(self) -> str:
        return f"http://{self.host}"

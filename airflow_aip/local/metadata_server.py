"""The Compute Engine metadata server a trainer's Application Default Credentials come from.

On Vertex AI (and AI Platform) a replica runs on a VM whose metadata server, at
``metadata.google.internal`` / ``169.254.169.254``, answers the project and the job's service
account, and hands out its access tokens: ``google.auth.default()`` finds it when nothing else is
configured, and TensorFlow's ``gs://`` file system asks it for a token too. Locally each running
job gets one of these on loopback, in the service process, for as long as it runs, and its
replicas find it through ``GCE_METADATA_HOST`` and ``GCE_METADATA_IP`` (which google-auth reads;
TensorFlow reads ``GCE_METADATA_HOST``). One server per job, so each answers its own job's
project and service account at the root paths clients ask for.

What it answers, as Compute Engine's does (cloud.google.com/compute/docs/metadata):
- ``/`` and every path only with the request header ``Metadata-Flavor: Google``, else 403; a
  request carrying ``X-Forwarded-For`` is refused (403) as the real server refuses proxied ones;
  each answer carries ``Metadata-Flavor: Google`` (google-auth's ping checks it);
- ``project/project-id``, ``project/numeric-project-id``;
- ``instance/service-accounts/`` (``default/`` and the email), ``.../<default|email>/email``,
  ``.../aliases``, ``.../scopes``, ``.../token`` (``access_token``, ``expires_in``,
  ``token_type``), and the directory with ``?recursive=true`` as JSON (google-auth reads it);
- ``universe/universe-domain``: ``googleapis.com``;
- ``instance/zone`` (``projects/<number>/zones/<region>-a`` [U] unverified: the zone letter);
- anything else: 404, as the real server answers an unknown key.

- ``.../<default|email>/identity?audience=...`` (``format=standard|full``): an identity token,
  a JWT with Google's claims for the service account (``iss`` ``https://accounts.google.com``,
  ``aud``, ``azp``, ``sub``, ``iat``, ``exp`` one hour on; ``format=full`` adds ``email``,
  ``email_verified`` and ``google.compute_engine``); no audience: 400, as Compute Engine answers.

The token is ``ya29.aip-local.<hash of the job>``: the local services (the API, the Cloud
Storage emulator) accept any bearer token, so a trainer's own calls to them work with it; Google
refuses it, so a call that still reaches Google fails instead of acting with anyone's rights.
An identity token is signed RS256 by a key the service makes when it starts (:func:`identity_key`,
its ``kid`` the key's hash), not by Google: the local services accept it as any bearer token, and
a verifier holding Google's certificates refuses it, as Google refuses the access token.
Not served: instance attributes, custom metadata.
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from airflow_aip.config import OPTIONS
from airflow_aip.local.loopback import LoopbackServer

ROOT = "/computeMetadata/v1/"
TOKEN_SECONDS = 3599
# What Compute Engine lists for a VM's default service account with the cloud-platform scope.
SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)


@dataclass(frozen=True)
class TrainerIdentity:
    """Who a job's trainer is: its project (ID and number) and the service account it runs as."""

    project_id: str
    project_number: str
    service_account: str
    region: str = OPTIONS["region"].default

    @property
    def token(self) -> str:
        """An access token stable for the job: one the local services accept and Google refuses."""
        digest = hashlib.sha256(f"{self.project_id}/{self.service_account}".encode()).hexdigest()
        return f"ya29.aip-local.{digest[:32]}"


@functools.cache
def identity_key() -> Any:
    """The RSA key identity tokens are signed with: made once per service process (its public half,
    ``identity_key().public_key()``, verifies them)."""
    from cryptography.hazmat.primitives.asymmetric import rsa

    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _unique_id(account: str) -> str:
    """A service account's numeric unique ID, as Google's ``sub``: 21 digits, stable for the account."""
    return str(int(hashlib.sha256(account.encode()).hexdigest(), 16))[:21]


def identity_token(identity: TrainerIdentity, audience: str, full: bool) -> str:
    """A Google-shaped identity token for the job's service account and ``audience``."""
    from google.auth import crypt, jwt

    now = int(time.time())
    unique = _unique_id(identity.service_account)
    claims: dict[str, Any] = {
        "aud": audience,
        "azp": unique,
        "exp": now + TOKEN_SECONDS + 1,
        "iat": now,
        "iss": "https://accounts.google.com",
        "sub": unique,
    }
    if full:
        claims["email"] = identity.service_account
        claims["email_verified"] = True
        claims["google"] = {
            "compute_engine": {
                "project_id": identity.project_id,
                "project_number": int(number) if (number := identity.project_number).isdigit() else number,
                "zone": f"{identity.region}-a",
            }
        }
    from cryptography.hazmat.primitives import serialization

    key = identity_key()
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    kid = hashlib.sha256(public).hexdigest()[:40]
    token: bytes = jwt.encode(crypt.RSASigner.from_string(pem, kid), claims)
    return token.decode()


def _tree(identity: TrainerIdentity) -> dict[str, Any]:
    """The metadata keys served, as a tree: a dict is a directory, a tuple a list of lines."""
    account = {
        "aliases": ("default",),
        "email": identity.service_account,
        "scopes": SCOPES,
    }
    return {
        "project": {
            "numeric-project-id": identity.project_number,
            "project-id": identity.project_id,
        },
        "instance": {
            "service-accounts": {"default": account, identity.service_account: account},
            "zone": f"projects/{identity.project_number}/zones/{identity.region}-a",
        },
        "universe": {"universe-domain": "googleapis.com"},
    }


def _as_json(node: Any) -> Any:
    """A key or a directory as ``?recursive=true`` / ``?alt=json`` answers it: keys camelCased."""
    if isinstance(node, tuple):
        return list(node)
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        first, *rest = key.split("-")
        out[first + "".join(p.title() for p in rest)] = _as_json(value)
    return out


def _as_text(node: Any) -> str:
    if isinstance(node, dict):
        return "".join(f"{k}/\n" if isinstance(v, dict) else f"{k}\n" for k, v in node.items())
    if isinstance(node, tuple):
        return "".join(f"{line}\n" for line in node)
    return str(node)


class _Handler(BaseHTTPRequestHandler):
    server: _MetadataHTTPServer
    protocol_version = "HTTP/1.1"
    server_version = "Metadata Server for VM"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: a trainer's every token refresh is no news for the service's log."""

    def _send(self, code: int, body: str, content_type: str = "application/text") -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Metadata-Flavor", "Google")
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_POST(self) -> None:
        """google-auth POSTs for a token bound to an Agent Identity certificate; answered as a GET."""
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.do_GET()

    def do_GET(self) -> None:
        if self.headers.get("X-Forwarded-For") is not None:
            return self._send(403, "Request forbidden: X-Forwarded-For header is not allowed.\n")
        if self.headers.get("Metadata-Flavor") != "Google":
            return self._send(403, 'Missing required header "Metadata-Flavor": "Google"\n')
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        if url.path in ("", "/"):
            return self._send(200, "computeMetadata/\n")
        if not (url.path + "/").startswith(ROOT):
            return self._send(404, "Not Found\n")
        keys = [k for k in url.path[len(ROOT) :].split("/") if k]
        if keys[-1:] == ["token"]:
            return self._token(keys)
        if keys[-1:] == ["identity"]:
            return self._identity(keys, query)
        node: Any = _tree(self.server.identity)
        for key in keys:
            if not isinstance(node, dict) or key not in node:
                return self._send(404, "Not Found\n")
            node = node[key]
        as_json = query.get("alt") == ["json"] or (
            isinstance(node, dict) and query.get("recursive", [""])[0].lower() == "true"
        )
        if as_json:
            return self._send(200, json.dumps(_as_json(node)), "application/json")
        return self._send(200, _as_text(node))

    def _account(self, keys: list[str]) -> bool:
        """Whether ``keys`` name one of the service account's keys (``default`` or its email)."""
        return (
            keys[:2] == ["instance", "service-accounts"]
            and len(keys) == 4
            and keys[2] in ("default", self.server.identity.service_account)
        )

    def _identity(self, keys: list[str], query: dict[str, list[str]]) -> None:
        if not self._account(keys):
            return self._send(404, "Not Found\n")
        audience = (query.get("audience") or [""])[0]
        if not audience:
            return self._send(400, "non-empty audience parameter required\n")
        full = (query.get("format") or ["standard"])[0] == "full"
        return self._send(200, identity_token(self.server.identity, audience, full))

    def _token(self, keys: list[str]) -> None:
        identity = self.server.identity
        if not self._account(keys):
            return self._send(404, "Not Found\n")
        body = {"access_token": identity.token, "expires_in": TOKEN_SECONDS, "token_type": "Bearer"}
        return self._send(200, json.dumps(body), "application/json")


class _MetadataHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, identity: TrainerIdentity) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.identity = identity


class MetadataServer(LoopbackServer):
    """One job's metadata server; its :attr:`host` is the value of ``GCE_METADATA_HOST`` (and
    ``GCE_METADATA_IP``)."""

    def __init__(self, identity: TrainerIdentity) -> None:
        self.identity = identity
        super().__init__(_MetadataHTTPServer(identity))

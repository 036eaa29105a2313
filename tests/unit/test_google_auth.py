"""Requests are signed by google-auth itself, sync and async: refresh on 401, quota project,
impersonation chains and workload identity federation.

The token endpoints are a real HTTP server on 127.0.0.1 (a service-account key's ``token_uri``
and a federation config's ``token_url`` point at it). IAM Credentials' URL is fixed by
google-auth, so its requests are routed to that server by a transport adapter on google-auth's
own requests session: the HTTP boundary. The API itself is an httpx MockTransport over https,
because a token is never sent to a plain-http (emulator) endpoint, which is the point of it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import nullcontext
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from airflow_aip.exceptions import ApiError
from airflow_aip.hooks.credentials import auth_request
from airflow_aip.hooks.http_shared import clear_shared_auth
from airflow_aip.hooks.training import TrainingJobHook

API = "https://ml.example.com/"
IAM_HOST = "https://iamcredentials.googleapis.com/"
POOL = "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/pool"
RESOURCE_MANAGER_HOST = "https://cloudresourcemanager.googleapis.com/"


class TokenServer:
    """OAuth token, STS and IAM generateAccessToken endpoints; records every request."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0)).decode()
                form = {k: v[0] for k, v in parse_qs(raw).items()}
                body = form or (json.loads(raw) if raw.startswith("{") else {})
                outer.requests.append((self.path, body))
                count = len(outer.requests)
                if self.path == "/token":
                    answer: dict[str, Any] = {"access_token": f"sa-{count}", "expires_in": 3600}
                elif self.path == "/sts":
                    answer = {
                        "access_token": f"sts-{count}",
                        "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
                        "token_type": "Bearer",
                        "expires_in": 3600,
                    }
                else:  # IAM Credentials generateAccessToken
                    expiry = datetime.now(timezone.utc) + timedelta(hours=1)
                    answer = {
                        "accessToken": f"imp-{count}",
                        "expireTime": expiry.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    }
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # Resource Manager: a project number's project id
                outer.requests.append((self.path, {}))
                data = json.dumps({"projectNumber": "1", "projectId": "pool-proj"}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def paths(self) -> list[str]:
        return [path for path, _ in self.requests]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class ToTokenServer(requests.adapters.HTTPAdapter):
    """Sends requests for a Google host (IAM Credentials, Resource Manager) to the token server."""

    def __init__(self, base: str, host: str) -> None:
        super().__init__()
        self.base = base
        self.host = host

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        request.url = self.base + "/" + str(request.url).removeprefix(self.host)
        return super().send(request, **kwargs)


@pytest.fixture
def tokens() -> Iterator[TokenServer]:
    server = TokenServer()
    session = auth_request().session
    for host in (IAM_HOST, RESOURCE_MANAGER_HOST):
        session.mount(host, ToTokenServer(server.url, host))
    clear_shared_auth()
    yield server
    for host in (IAM_HOST, RESOURCE_MANAGER_HOST):
        session.adapters.pop(host, None)
    clear_shared_auth()
    server.stop()


@pytest.fixture(scope="module")
def private_key() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return pem.decode()


def keyfile(tokens: TokenServer, private_key: str) -> dict[str, Any]:
    return {
        "type": "service_account",
        "project_id": "key-proj",
        "private_key_id": "k1",
        "private_key": private_key,
        "client_email": "sa@key-proj.iam.gserviceaccount.com",
        "client_id": "1",
        "token_uri": tokens.url + "/token",
    }


class Api:
    """The ml API over https at the HTTP boundary: answers a script, then 200; records headers."""

    def __init__(self, statuses: list[int] | None = None) -> None:
        self.statuses = list(statuses or [])
        self.headers: list[httpx.Headers] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.headers.append(request.headers)
        status = self.statuses.pop(0) if self.statuses else 200
        if status != 200:
            return httpx.Response(
                status, json={"error": {"code": status, "message": "Request had invalid credentials."}}
            )
        return httpx.Response(200, json={"jobId": "j1", "state": "RUNNING"})

    def authorizations(self) -> list[str | None]:
        return [h.get("authorization") for h in self.headers]


def hook_with(
    monkeypatch: pytest.MonkeyPatch, api: Api, extra: dict[str, Any], **kwargs: Any
) -> TrainingJobHook:
    conn = json.dumps({"conn_type": "google_cloud_platform", "extra": extra})
    monkeypatch.setenv("AIRFLOW_CONN_AIP_AUTH", conn)
    hook = TrainingJobHook("aip_auth", api_endpoint=API, retry_max_wait=0.001, **kwargs)
    sync = httpx.Client(transport=httpx.MockTransport(api.handler))
    hook._sync_client = lambda: sync  # type: ignore[method-assign]
    async_client = httpx.AsyncClient(transport=httpx.MockTransport(api.handler))
    hook._client_slot = lambda: nullcontext(async_client)  # type: ignore[method-assign]
    return hook


# -- 401: refresh once, send once more ------------------------------------------------------------


def test_sync_401_refreshes_the_token_and_retries_once(
    monkeypatch: pytest.MonkeyPatch, tokens: TokenServer, private_key: str
) -> None:
    api = Api([401])
    hook = hook_with(monkeypatch, api, {"keyfile_dict": keyfile(tokens, private_key)})
    assert hook.get_job("j1", "p")["state"] == "RUNNING"
    assert api.authorizations() == ["Bearer sa-1", "Bearer sa-2"]
    assert tokens.paths() == ["/token", "/token"]


async def test_async_401_refreshes_the_token_and_retries_once(
    monkeypatch: pytest.MonkeyPatch, tokens: TokenServer, private_key: str
) -> None:
    api = Api([401])
    hook = hook_with(monkeypatch, api, {"keyfile_dict": keyfile(tokens, private_key)})
    assert (await hook.aget_job("j1", "p"))["state"] == "RUNNING"
    assert api.authorizations() == ["Bearer sa-1", "Bearer sa-2"]
    assert tokens.paths() == ["/token", "/token"]


def test_a_second_401_is_an_error_not_a_loop(
    monkeypatch: pytest.MonkeyPatch, tokens: TokenServer, private_key: str
) -> None:
    api = Api([401, 401, 401])
    hook = hook_with(monkeypatch, api, {"keyfile_dict": keyfile(tokens, private_key)})
    with pytest.raises(ApiError) as err:
        hook.get_job("j1", "p")
    assert err.value.status == 401
    assert len(api.headers) == 2  # one refresh, then the error: 401 is not retried by the policy


# -- quota project ------------------------------------------------------------------------------


async def test_every_request_carries_the_quota_project(
    monkeypatch: pytest.MonkeyPatch, tokens: TokenServer, private_key: str
) -> None:
    extra = {"keyfile_dict": keyfile(tokens, private_key), "quota_project_id": "billing-proj"}
    api = Api()
    hook = hook_with(monkeypatch, api, extra)
    hook.get_job("j1", "p")
    hook.cancel_job("j1", "p")
    await hook.aget_job("j1", "p")
    assert len(api.headers) == 3
    assert [h.get("x-goog-user-project") for h in api.headers] == ["billing-proj"] * 3
    assert all(h.get("authorization") == "Bearer sa-1" for h in api.headers)  # one token, reused


# -- impersonation ------------------------------------------------------------------------------


async def test_impersonation_chain_acts_as_its_last_account(
    monkeypatch: pytest.MonkeyPatch, tokens: TokenServer, private_key: str
) -> None:
    from google.auth import impersonated_credentials

    chain = ["mid@p1.iam.gserviceaccount.com", "target@p2.iam.gserviceaccount.com"]
    api = Api()
    extra = {
        "keyfile_dict": keyfile(tokens, private_key),
        "impersonation_chain": "other@p3.iam.gserviceaccount.com",
    }
    hook = hook_with(monkeypatch, api, {**extra, "project": ""}, impersonation_chain=chain)  # the task's wins
    credentials, _ = hook.credentials_and_project
    assert isinstance(credentials, impersonated_credentials.Credentials)
    assert hook.project_id == "p2"  # the impersonated account's project
    hook.get_job("j1")
    await hook.aget_job("j1")
    generate = [(path, body) for path, body in tokens.requests if "generateAccessToken" in path]
    assert len(generate) == 1
    path, body = generate[0]
    assert path == "/v1/projects/-/serviceAccounts/target@p2.iam.gserviceaccount.com:generateAccessToken"
    assert body["delegates"] == ["projects/-/serviceAccounts/mid@p1.iam.gserviceaccount.com"]
    assert tokens.paths()[0] == "/token"  # the source key's token came first
    assert api.authorizations() == ["Bearer imp-2", "Bearer imp-2"]


def test_impersonation_from_the_connection(
    monkeypatch: pytest.MonkeyPatch, tokens: TokenServer, private_key: str
) -> None:
    from google.auth import impersonated_credentials

    extra = {
        "keyfile_dict": keyfile(tokens, private_key),
        "impersonation_chain": "t@p9.iam.gserviceaccount.com",
    }
    hook = hook_with(monkeypatch, Api(), extra)
    credentials, project = hook.credentials_and_project
    assert isinstance(credentials, impersonated_credentials.Credentials)
    assert project == "p9"


# -- workload identity federation ---------------------------------------------------------------


@pytest.mark.parametrize("as_file", [False, True], ids=["json", "file"])
async def test_workload_identity_federation(
    monkeypatch: pytest.MonkeyPatch, tokens: TokenServer, tmp_path: Path, as_file: bool
) -> None:
    from google.auth import identity_pool

    subject = tmp_path / "subject.jwt"
    subject.write_text("the-oidc-token")
    config = {
        "type": "external_account",
        "audience": POOL + "/providers/gh",
        "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
        "token_url": tokens.url + "/sts",
        "credential_source": {"file": str(subject)},
    }
    value: Any = config
    if as_file:
        path = tmp_path / "wif.json"
        path.write_text(json.dumps(config))
        value = str(path)
    api = Api()
    hook = hook_with(monkeypatch, api, {"credential_config_file": value})
    assert isinstance(hook.credentials_and_project[0], identity_pool.Credentials)
    assert hook.project_id == "pool-proj"  # google-auth asked Resource Manager for the pool's project
    await hook.aget_job("j1")
    hook.get_job("j1")
    assert tokens.paths() == ["/sts", "/v1/projects/1"]
    assert tokens.requests[0][1]["subject_token"] == "the-oidc-token"
    assert api.authorizations() == ["Bearer sts-1", "Bearer sts-1"]


def test_anonymous_connection_sends_no_token(monkeypatch: pytest.MonkeyPatch, tokens: TokenServer) -> None:
    api = Api()
    hook = hook_with(monkeypatch, api, {"is_anonymous": "true", "project": "p"})
    hook.get_job("j1")
    assert api.authorizations() == [None]
    assert tokens.requests == []

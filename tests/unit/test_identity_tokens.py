"""Identity tokens from a job's metadata server, fetched by google-auth as a trainer fetches them.

``google.oauth2.id_token.fetch_id_token`` in a fresh Python with a replica's metadata variables
asks ``.../service-accounts/default/identity?audience=...&format=full`` (through
``compute_engine.IDTokenCredentials``); the token it gets verifies against the service's
identity key, with Google's claims for the job's service account.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from google.auth import jwt

from airflow_aip.local.metadata_server import MetadataServer, TrainerIdentity, identity_key

IDENTITY = TrainerIdentity("proj-a", "123456789012", "trainer@proj-a.iam.gserviceaccount.com", "europe-west4")
AUDIENCE = "https://my-service-abc-ew.a.run.app"


def test_google_auth_fetches_an_identity_token_for_the_jobs_service_account(tmp_path: Path) -> None:
    code = (
        "import google.auth.transport.requests as r, google.oauth2.id_token as i\n"
        f"print(i.fetch_id_token(r.Request(), {AUDIENCE!r}))\n"
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GCE_", "GOOGLE_", "AIP_LOCAL"))}
    with MetadataServer(IDENTITY) as server:
        env = {**base, "GCE_METADATA_HOST": server.host, "GCE_METADATA_IP": server.host}
        env["CLOUDSDK_CONFIG"] = str(tmp_path)
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 0, done.stderr
    token = done.stdout.strip().splitlines()[-1]
    public = (
        identity_key()
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    claims = jwt.decode(token, certs=public.decode(), audience=AUDIENCE)
    assert claims["iss"] == "https://accounts.google.com"
    assert claims["email"] == IDENTITY.service_account
    assert claims["email_verified"] is True
    assert claims["google"]["compute_engine"]["project_id"] == "proj-a"
    assert claims["exp"] - claims["iat"] == 3600


def test_an_identity_token_needs_an_audience_and_the_standard_format_names_no_email() -> None:
    flavor = {"Metadata-Flavor": "Google"}
    identity = "/computeMetadata/v1/instance/service-accounts/default/identity"
    with MetadataServer(IDENTITY) as server:
        request = urllib.request.Request(f"http://{server.host}{identity}", headers=flavor)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=5)
        assert (refused.value.code, refused.value.read()) == (400, b"non-empty audience parameter required\n")
        request = urllib.request.Request(f"http://{server.host}{identity}?audience=x", headers=flavor)
        with urllib.request.urlopen(request, timeout=5) as answer:
            claims = jwt.decode(answer.read().decode(), verify=False)
    assert claims["aud"] == "x"
    assert "email" not in claims
    assert json.dumps(claims).count(IDENTITY.service_account) == 0

"""A trainer's own Google I/O on the local service, read by Google's own libraries in a child Python.

google-auth (Application Default Credentials) against a job's metadata server, and Google's
Vertex AI SDK with the replica's ``sitecustomize``: each in a fresh interpreter with only the
variables a replica gets, as a trainer would meet them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_aip.local.executor.plans import execution_plan
from airflow_aip.local.executor.trainer_io import SITE_DIR, TrainerIO
from airflow_aip.local.metadata_server import MetadataServer, TrainerIdentity
from tests.fixtures.job_records import ML_V1_RECORD
from tests.fixtures.tools import need_module

IDENTITY = TrainerIdentity("proj-a", "123456789012", "trainer@proj-a.iam.gserviceaccount.com", "europe-west4")


@pytest.fixture
def metadata() -> Iterator[MetadataServer]:
    with MetadataServer(IDENTITY) as server:
        yield server


def _child(code: str, env: dict[str, str]) -> dict[str, object]:
    """What ``code`` (which prints one JSON line last) prints in a fresh Python with ``env`` only."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GCE_", "GOOGLE_", "AIP_LOCAL"))}
    base.pop("PYTHONPATH", None)
    done = subprocess.run(
        [sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _get(server: MetadataServer, path: str, **headers: str) -> tuple[int, str, str | None]:
    request = urllib.request.Request(f"http://{server.host}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, answer.read().decode(), answer.headers.get("Metadata-Flavor")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), exc.headers.get("Metadata-Flavor")


def test_google_auth_finds_the_jobs_project_service_account_and_token(
    metadata: MetadataServer, tmp_path: Path
) -> None:
    code = (
        "import json, google.auth, google.auth.transport.requests as r\n"
        "c, p = google.auth.default()\n"
        "c.refresh(r.Request())\n"
        "print(json.dumps({'type': type(c).__module__, 'project': p, "
        "'email': c.service_account_email, 'token': c.token, 'valid': c.valid}))\n"
    )
    env = {
        "GCE_METADATA_HOST": metadata.host,
        "GCE_METADATA_IP": metadata.host,
        "CLOUDSDK_CONFIG": str(tmp_path),
    }
    got = _child(code, env)
    assert got == {
        "type": "google.auth.compute_engine.credentials",
        "project": "proj-a",
        "email": IDENTITY.service_account,
        "token": IDENTITY.token,
        "valid": True,
    }


def test_the_metadata_server_keeps_compute_engines_header_rules(metadata: MetadataServer) -> None:
    assert _get(metadata, "/computeMetadata/v1/project/project-id")[0] == 403
    flavor = {"Metadata-Flavor": "Google"}
    assert (
        _get(metadata, "/computeMetadata/v1/project/project-id", **flavor, **{"X-Forwarded-For": "1.2.3.4"})[
            0
        ]
        == 403
    )
    assert _get(metadata, "/computeMetadata/v1/project/numeric-project-id", **flavor) == (
        200,
        "123456789012",
        "Google",
    )
    assert _get(metadata, "/computeMetadata/v1/instance/nothing-here", **flavor)[0] == 404
    status, body, _ = _get(
        metadata, "/computeMetadata/v1/instance/service-accounts/default/?recursive=true", **flavor
    )
    assert (status, json.loads(body)["email"]) == (200, IDENTITY.service_account)
    status, body, _ = _get(metadata, "/computeMetadata/v1/instance/service-accounts/default/token", **flavor)
    assert json.loads(body) == {"access_token": IDENTITY.token, "expires_in": 3599, "token_type": "Bearer"}


def test_a_vertex_job_runs_as_its_service_account_or_the_custom_code_service_agent() -> None:
    record: dict[str, Any] = {
        "kind": "customJobs",
        "jobId": "42",
        "location": "us-east1",
        "projectNumber": "123456789012",
        "projectId": "proj-a",
        "resource": {
            "jobSpec": {
                "workerPoolSpecs": [
                    {
                        "replicaCount": "1",
                        "pythonPackageSpec": {
                            "executorImageUri": "us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest",
                            "packageUris": ["gs://b/t.tar.gz"],
                            "pythonModule": "t.task",
                        },
                    }
                ]
            }
        },
    }
    plan = execution_plan("123456789012", record)
    assert (plan.project_id, plan.project_number, plan.region) == ("proj-a", "123456789012", "us-east1")
    assert plan.service_account == "service-123456789012@gcp-sa-aiplatform-cc.iam.gserviceaccount.com"
    record["resource"]["jobSpec"]["serviceAccount"] = "mine@proj-a.iam.gserviceaccount.com"
    assert execution_plan("123456789012", record).service_account == "mine@proj-a.iam.gserviceaccount.com"


def test_the_vertex_sdk_in_a_replica_reaches_the_local_service(tmp_path: Path) -> None:
    need_module("google.cloud.aiplatform")
    plan = execution_plan("proj-a", ML_V1_RECORD)
    with TrainerIO(plan, tmp_path, "http://127.0.0.1:8080/") as trainer_io:
        env = dict(trainer_io.env())
    assert env["PYTHONPATH"] == str(SITE_DIR)
    assert sorted(p.name for p in SITE_DIR.iterdir() if p.suffix == ".py") == [
        "__init__.py",
        "sitecustomize.py",
    ]
    code = (
        "import importlib.util, json\n"
        "assert importlib.util.find_spec('google.cloud.aiplatform')  # a look first, as trainers do\n"
        "from google.cloud import aiplatform\n"
        "from google.cloud.aiplatform import initializer\n"
        "aiplatform.init(location='europe-west4')\n"
        "c = initializer.global_config\n"
        "print(json.dumps({'endpoint': c.get_client_options().api_endpoint, "
        "'transport': c._api_transport, 'project': c.project}))\n"
    )
    got = _child(code, env)
    assert got == {"endpoint": "http://127.0.0.1:8080", "transport": "rest", "project": "proj-a"}

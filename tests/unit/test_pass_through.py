"""Google's other APIs from a trainer: refused by default naming the flag, passed through on purpose.

A replica's own google-auth and requests, in a fresh Python with only a replica's variables, call
``bigquery.googleapis.com`` through the job's proxy. Google is out of reach here, so the pass-through's
upstream is a loopback stand-in (:mod:`tests.fixtures.google_standin`): what it saw is what Google
would have seen.
"""

from __future__ import annotations

import json
import os
import queue
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_aip.local.cli import build_parser
from airflow_aip.local.cli import serve as serve_command
from airflow_aip.local.egress.passthrough import PassThrough
from airflow_aip.local.egress.routes import Way, pass_through_refusal, way_of
from airflow_aip.local.executor.environments import EnvironmentCache
from airflow_aip.local.executor.execution import ExecutionSettings, JobControl, JobExecution
from airflow_aip.local.executor.plans import execution_plan
from airflow_aip.local.executor.trainer_io import TrainerIO
from airflow_aip.local.metadata_server import TrainerIdentity
from airflow_aip.local.store import JobStore
from tests.fixtures.google_standin import DEVELOPER_TOKEN, GoogleStandIn
from tests.fixtures.job_records import ML_V1_RECORD

PLAN = execution_plan("proj-a", ML_V1_RECORD)
JOB_TOKEN = TrainerIdentity(PLAN.project_id, PLAN.project_number, PLAN.service_account).token
CALLS = (
    "import json, requests, google.auth, google.auth.transport.requests as r\n"
    "s = r.AuthorizedSession(google.auth.default()[0])\n"
    "out = {}\n"
    "for name, url in [('bigquery', 'https://bigquery.googleapis.com/bigquery/v2/projects/proj-a/datasets"
    "?maxResults=1'), ('secrets', 'https://secretmanager.googleapis.com/v1/projects/proj-a/secrets')]:\n"
    "    try:\n"
    "        a = s.get(url, timeout=30)\n"
    "        out[name] = [a.status_code, a.json()]\n"
    "    except requests.exceptions.ProxyError as exc:\n"
    "        out[name] = [403, str(exc)]\n"
    "print(json.dumps(out))\n"
)


def _replica(env: dict[str, str]) -> dict[str, list[object]]:
    """What :data:`CALLS` printed in a fresh Python with a replica's variables."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GCE_", "GOOGLE_", "AIP_LOCAL"))}
    base.pop("PYTHONPATH", None)
    done = subprocess.run(
        [sys.executable, "-c", CALLS], env={**base, **env}, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_another_google_host_is_refused_naming_the_flag_that_passes_it(tmp_path: Path) -> None:
    way, why = way_of("bigquery.googleapis.com", 443)
    assert way is Way.REFUSE
    assert "aip-local serve --pass-through-host bigquery.googleapis.com" in why
    assert way_of("bigquery.googleapis.com", 443, frozenset({"bigquery.googleapis.com"}))[0] is Way.PASS
    # Sign-in never names the flag: it cannot be passed; nor does the client proxy (Airflow's side).
    assert "--pass-through-host" not in way_of("oauth2.googleapis.com", 443)[1]
    assert "--pass-through-host" not in way_of("bigquery.googleapis.com", 443, trainer=False)[1]
    refusals: list[tuple[str, str]] = []
    with TrainerIO(PLAN, tmp_path, on_refusal=lambda host, why: refusals.append((host, why))) as trainer_io:
        got = _replica(dict(trainer_io.env()))
    assert got["bigquery"][0] == 403
    assert "--pass-through-host bigquery.googleapis.com" in str(got["bigquery"][1])
    # (google-auth may also look up a trust boundary at iamcredentials.googleapis.com: refused too.)
    assert {"bigquery.googleapis.com", "secretmanager.googleapis.com"} <= {host for host, _ in refusals}


def test_a_passed_host_gets_the_developers_credentials_never_the_jobs_token(
    tmp_path: Path, google_standin: GoogleStandIn, developer_adc: Path
) -> None:
    passing = PassThrough(
        frozenset({"bigquery.googleapis.com"}), upstream=lambda host: (google_standin.url, google_standin.tls)
    )
    told: list[tuple[str, str]] = []
    refused: list[str] = []
    with TrainerIO(
        PLAN,
        tmp_path,
        on_refusal=lambda host, why: refused.append(host),
        passing=passing,
        on_pass=lambda host, request: told.append((host, request)),
    ) as trainer_io:
        got = _replica(dict(trainer_io.env()))
    assert got["bigquery"] == [
        200,
        {"ok": True, "path": "/bigquery/v2/projects/proj-a/datasets?maxResults=1"},
    ]
    [seen] = google_standin.seen
    assert seen.headers["authorization"] == f"Bearer {DEVELOPER_TOKEN}"
    assert JOB_TOKEN not in json.dumps(seen.headers)
    assert seen.headers["host"] == "bigquery.googleapis.com"
    assert told == [
        ("bigquery.googleapis.com", "GET bigquery.googleapis.com/bigquery/v2/projects/proj-a/datasets")
    ]
    # A host not named stays refused.
    assert got["secrets"][0] == 403
    assert "secretmanager.googleapis.com" in refused
    assert "bigquery.googleapis.com" not in refused


@pytest.mark.parametrize(
    ("host", "rule"),
    [
        ("bigquery.googleapis.com", None),
        ("example.org", "only Google API hosts"),
        ("googleapis.com.example.org", "only Google API hosts"),
        ("storage.googleapis.com", "answered on this machine"),
        ("us-central1-aiplatform.googleapis.com", "answered on this machine"),
        ("oauth2.googleapis.com", "answered on this machine"),
    ],
)
def test_only_google_api_hosts_not_served_here_can_be_passed(host: str, rule: str | None) -> None:
    refused = pass_through_refusal(host)
    assert refused is None if rule is None else (rule in (refused or "") and host in (refused or ""))


def test_serve_refuses_a_pass_through_flag_naming_another_host(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["serve", "--pass-through-host", "api.example.org"])
    assert serve_command(args) == 2
    said = capsys.readouterr().err
    assert "--pass-through-host api.example.org: only Google API hosts (*.googleapis.com)" in said


def test_serve_refuses_a_pass_through_without_the_developers_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "none.json"))
    args = build_parser().parse_args(["serve", "--pass-through-host", "bigquery.googleapis.com"])
    assert serve_command(args) == 2
    assert "--pass-through-host needs your Application Default Credentials" in capsys.readouterr().err


def test_each_passed_request_is_named_in_the_jobs_log(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    execution = JobExecution(
        store, EnvironmentCache(tmp_path / "envs"), ExecutionSettings(None), "p", "j1", JobControl()
    )
    execution._passed(
        "bigquery.googleapis.com", "GET bigquery.googleapis.com/bigquery/v2/projects/p/datasets"
    )
    [entry] = store.read_log("p", "j1")
    assert entry["message"] == (
        "Passed to Google with the developer's credentials (not the job's service account): "
        "GET bigquery.googleapis.com/bigquery/v2/projects/p/datasets"
    )


def test_a_grpc_client_of_a_passed_host_is_told_in_the_log_it_is_not_passed(
    tmp_path: Path, google_standin: GoogleStandIn, developer_adc: Path
) -> None:
    passing = PassThrough(
        frozenset({"pubsub.googleapis.com"}), upstream=lambda host: (google_standin.url, google_standin.tls)
    )
    told = queue.Queue[tuple[str, str]]()
    with TrainerIO(PLAN, tmp_path, passing=passing, on_pass=lambda *said: told.put(said)) as trainer_io:
        env = dict(trainer_io.env())
        host, port = env["https_proxy"].removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as raw:
            raw.sendall(b"CONNECT pubsub.googleapis.com:443 HTTP/1.1\r\n\r\n")
            assert raw.recv(1024).startswith(b"HTTP/1.1 200")
            grpc_like = ssl.create_default_context(cafile=env["SSL_CERT_FILE"])
            grpc_like.set_alpn_protocols(["h2"])  # what a gRPC client offers, and nothing else
            with grpc_like.wrap_socket(raw, server_hostname="pubsub.googleapis.com") as tls:
                assert tls.selected_alpn_protocol() == "h2"
                assert told.get(timeout=10) == (
                    "pubsub.googleapis.com",
                    "not passed: gRPC (HTTP/2) is not passed through; use the client's REST",
                )
    assert google_standin.seen == []

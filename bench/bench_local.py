"""The local training service: how fast a job starts, and what parallel trials buy.

1. Submit -> RUNNING with a warm package cache, against the same with a cold cache (a new
   package version each time, so pip builds and installs it). The service is the real
   ``aip-local serve`` process; the clock runs from just before ``jobs.create`` to the first
   ``jobs.get`` that answers RUNNING (polled every 10 ms).
2. Wall time of a 4-trial tuning job (each trial holds ~1 s) with maxParallelTrials=2, against
   maxParallelTrials=1, from the job's own startTime and endTime.
3. The same two on the Vertex AI routes (``customJobs``, ``hyperparameterTuningJobs`` with
   parallelTrialCount=2), beside the ml v1 figures: one executor underneath, so they should match.
   A Vertex job's environment is its image's runtime (the isolated runtime: sklearn-cpu.1-6's
   Python 3.10 and scikit-learn 1.6, then the package, by uv); cold, against the host runtime
   (``--runtime host``: pip into a venv over the service's own packages), the old default.
4. At a poller's scale (:mod:`bench.local_scale`, no jobs run): ``jobs.list`` by 100 IDs and
   ``entries.list`` of 250 jobs with cursors in a 5,000-job project, against the old full scans;
   ``python -m bench.local_scale`` measures this section alone.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from airflow_aip.local.clock import parse_rfc3339
from airflow_aip.local.storage.gcs import FakeGcsServer
from bench import local_scale
from bench.common import Figure, Series
from tests.fixtures.local_service import LocalService, StagedTrainer, stage_trainer

PROJECT = "bench-project"
TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}
VERTEX_PARENT = f"v1/projects/{PROJECT}/locations/us-central1"
VERTEX_TERMINAL = {"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED"}
IMAGE = "us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest"


def _submit(url: str, training_input: dict[str, Any]) -> tuple[str, float]:
    job_id = f"bench_{uuid.uuid4().hex[:12]}"
    started = time.perf_counter()
    response = httpx.post(
        f"{url}v1/projects/{PROJECT}/jobs",
        json={"jobId": job_id, "trainingInput": training_input},
        timeout=30,
    )
    response.raise_for_status()
    return job_id, started


def _wait(url: str, job_id: str, states: set[str], interval: float, timeout: float = 300) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job: dict[str, Any] = httpx.get(f"{url}v1/projects/{PROJECT}/jobs/{job_id}", timeout=30).json()
        if job["state"] in states:
            return job
        if job["state"] in TERMINAL:
            raise RuntimeError(f"{job_id} ended {job['state']}: {job.get('errorMessage')}")
        time.sleep(interval)
    raise RuntimeError(f"{job_id} did not reach {states} within {timeout}s")


def _time_to_running(url: str, staged: StagedTrainer) -> float:
    job_id, started = _submit(url, staged.training_input("sleep", ["--seconds", "0.5"]))
    _wait(url, job_id, {"RUNNING"}, interval=0.01)
    elapsed = time.perf_counter() - started
    _wait(url, job_id, TERMINAL, interval=0.1)
    return elapsed


def _tuning_wall_time(url: str, staged: StagedTrainer, parallel: int) -> float:
    spec = {
        "goal": "MAXIMIZE",
        "algorithm": "RANDOM_SEARCH",
        "maxTrials": 4,
        "maxParallelTrials": parallel,
        "params": [{"parameterName": "x", "type": "DOUBLE", "minValue": 0, "maxValue": 6}],
    }
    job_id, _ = _submit(url, staged.training_input("tune", ["--hold", "1.0"], hyperparameters=spec))
    job = _wait(url, job_id, TERMINAL, interval=0.1)
    if job["state"] != "SUCCEEDED":
        raise RuntimeError(f"tuning job {job_id} ended {job['state']}: {job.get('errorMessage')}")
    return (parse_rfc3339(job["endTime"]) - parse_rfc3339(job["startTime"])).total_seconds()


def _vertex_pool(staged: StagedTrainer, module: str, args: list[str]) -> dict[str, Any]:
    package = {
        "executorImageUri": IMAGE,
        "packageUris": [staged.package_uri],
        "pythonModule": f"aip_test_trainer.{module}",
        "args": args,
    }
    return {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": "1",
        "pythonPackageSpec": package,
    }


def _vertex_wait(
    url: str, name: str, states: set[str], interval: float, timeout: float = 300
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job: dict[str, Any] = httpx.get(f"{url}v1/{name}", timeout=30).json()
        if job["state"] in states:
            return job
        if job["state"] in VERTEX_TERMINAL:
            raise RuntimeError(f"{name} ended {job['state']}: {job.get('error')}")
        time.sleep(interval)
    raise RuntimeError(f"{name} did not reach {states} within {timeout}s")


def _vertex_time_to_running(url: str, staged: StagedTrainer) -> float:
    body = {
        "displayName": "bench",
        "jobSpec": {"workerPoolSpecs": [_vertex_pool(staged, "sleep", ["--seconds=0.5"])]},
    }
    started = time.perf_counter()
    created = httpx.post(f"{url}{VERTEX_PARENT}/customJobs", json=body, timeout=30).raise_for_status().json()
    _vertex_wait(url, created["name"], {"JOB_STATE_RUNNING"}, interval=0.01)
    elapsed = time.perf_counter() - started
    _vertex_wait(url, created["name"], VERTEX_TERMINAL, interval=0.1)
    return elapsed


def _vertex_tuning_wall_time(url: str, staged: StagedTrainer, parallel: int) -> float:
    body = {
        "displayName": "bench-hpt",
        "maxTrialCount": 4,
        "parallelTrialCount": parallel,
        "studySpec": {
            "metrics": [{"metricId": "training/hptuning/metric", "goal": "MAXIMIZE"}],
            "parameters": [{"parameterId": "x", "doubleValueSpec": {"minValue": 0, "maxValue": 6}}],
            "algorithm": "RANDOM_SEARCH",
        },
        "trialJobSpec": {"workerPoolSpecs": [_vertex_pool(staged, "tune", ["--hold", "1.0"])]},
    }
    created = httpx.post(f"{url}{VERTEX_PARENT}/hyperparameterTuningJobs", json=body, timeout=30)
    name = created.raise_for_status().json()["name"]
    job = _vertex_wait(url, name, {"JOB_STATE_SUCCEEDED"}, interval=0.1)
    return (parse_rfc3339(job["endTime"]) - parse_rfc3339(job["startTime"])).total_seconds()


def run(repeats: int) -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="aip-bench-local-") as tmp:
        root = Path(tmp)
        with FakeGcsServer(root / "gcs") as gcs:
            service = LocalService(root / "data", gcs.url, max_running_jobs=2).start()
            host = LocalService(root / "data-host", gcs.url, extra_args=["--runtime", "host"])
            lean = LocalService(root / "data-lean", gcs.url, module="bench.lean_serve")
            try:
                figures = _measure(service, gcs, root, repeats)
                host.start()
                figures += _runtimes(service.url, host.url, gcs, root, repeats)
                host.stop()
                lean.start()
                figures += _fuller(service.url, lean.url, gcs, root, repeats)
            finally:
                lean.stop()
                host.stop()
                service.stop()
    return figures + local_scale.run(repeats)


def _runtimes(isolated_url: str, host_url: str, gcs: FakeGcsServer, root: Path, repeats: int) -> list[Figure]:
    """Vertex submit -> RUNNING, cold and warm, in the isolated runtime against the host runtime."""
    sdists = root / "runtime-sdists"
    cold = [
        _vertex_time_to_running(isolated_url, stage_trainer(gcs.url, sdists, f"0.4.{i}"))
        for i in range(repeats)
    ]
    host_cold = [
        _vertex_time_to_running(host_url, stage_trainer(gcs.url, sdists, f"0.5.{i}")) for i in range(repeats)
    ]
    warm_package = stage_trainer(gcs.url, sdists, "0.6.0")
    _vertex_time_to_running(isolated_url, warm_package)
    _vertex_time_to_running(host_url, warm_package)
    warm = [_vertex_time_to_running(isolated_url, warm_package) for _ in range(repeats)]
    host_warm = [_vertex_time_to_running(host_url, warm_package) for _ in range(repeats)]
    cold_figure = Figure(
        "local training service",
        "Vertex customJobs: submit -> JOB_STATE_RUNNING, cold (new package), isolated runtime",
        "s",
        Series("isolated: Python 3.10 + scikit-learn 1.6 + the package, by uv", cold),
        Series("host runtime: pip over the service's packages", host_cold),
        goal="cold start under 10 s with uv's cache warm",
        goal_met=Series("cold", cold).median < 10.0,
    )
    cold_figure.notes.append(
        "Cold: a new package version each time, so a new environment is built; uv's cache holds the "
        "wheels after the first build on the machine (a first build ever downloads ~70 MB)."
    )
    warm_figure = Figure(
        "local training service",
        "Vertex customJobs: submit -> JOB_STATE_RUNNING, warm (same package), isolated runtime",
        "s",
        Series("isolated runtime", warm),
        Series("host runtime", host_warm),
        goal="warm start under 1 s",
        goal_met=Series("warm", warm).median < 1.0,
    )
    return [cold_figure, warm_figure]


def _fuller(full_url: str, lean_url: str, gcs: FakeGcsServer, root: Path, repeats: int) -> list[Figure]:
    """Vertex submit -> RUNNING on issue 37's fuller environments, against the framework-only
    ones they replaced (:mod:`bench.lean_serve`), both through the service's API in this run."""
    sdists = root / "fuller-sdists"

    def fresh(url: str, first: int) -> list[float]:
        packages = [stage_trainer(gcs.url, sdists, f"0.7.{first + i}") for i in range(repeats)]
        return [_vertex_time_to_running(url, package) for package in packages]

    warm_package = stage_trainer(gcs.url, sdists, "0.7.0")
    for url in (full_url, lean_url):
        _vertex_time_to_running(url, warm_package)  # the image layer, and this package's environment
    measured = {
        "cold (new package)": (fresh(full_url, 10), fresh(lean_url, 20), 10.0),
        "warm (same package)": (
            [_vertex_time_to_running(full_url, warm_package) for _ in range(repeats)],
            [_vertex_time_to_running(lean_url, warm_package) for _ in range(repeats)],
            1.0,
        ),
    }
    figures = [
        Figure(
            "local training service",
            f"Vertex customJobs: submit -> JOB_STATE_RUNNING, {label}, sklearn-cpu.1-6's fuller layer",
            "s",
            Series("fuller: framework + Google and data libraries", full),
            Series("framework only (the environment before issue 37)", lean),
            goal=f"under {limit:g} s",
            goal_met=Series("full", full).median < limit,
        )
        for label, (full, lean, limit) in measured.items()
    ]
    figures[0].notes.append(
        "Both services are the real `aip-local serve` on one fake-gcs-server; the baseline's image "
        "layer holds only scikit-learn 1.6 (bench/lean_serve.py), so each of its jobs installs the "
        "trainer's declared google-cloud-storage and cloudml-hypertune itself, as before issue 37."
    )
    return figures


def _measure(service: LocalService, gcs: FakeGcsServer, root: Path, repeats: int) -> list[Figure]:
    url = service.url
    warm_package = stage_trainer(gcs.url, root / "sdists")
    _time_to_running(url, warm_package)  # fills the cache for this package
    cold, warm = [], []
    for i in range(repeats):
        fresh = stage_trainer(gcs.url, root / "sdists", version=f"0.3.{i}")
        cold.append(_time_to_running(url, fresh))
        warm.append(_time_to_running(url, warm_package))
    serial = [_tuning_wall_time(url, warm_package, 1) for _ in range(repeats)]
    parallel = [_tuning_wall_time(url, warm_package, 2) for _ in range(repeats)]
    start = Figure(
        "local training service",
        "submit -> RUNNING, warm package cache",
        "s",
        Series("warm cache", warm),
        Series("cold cache (new package: environment built)", cold),
        goal="warm start under 1 s",
        goal_met=Series("warm", warm).median < 1.0,
    )
    tuning = Figure(
        "local training service",
        "4-trial tuning job wall time, maxParallelTrials=2",
        "s",
        Series("maxParallelTrials=2", parallel),
        Series("maxParallelTrials=1", serial),
        goal="parallel=2 at most 0.75x of parallel=1",
    )
    tuning.goal_met = tuning.ratio is not None and tuning.ratio <= 0.75
    tuning.notes.append("Each trial holds ~1 s; trials are separate processes on a 2-core machine.")
    vertex_warm = [_vertex_time_to_running(url, warm_package) for _ in range(repeats)]
    vertex_parallel = [_vertex_tuning_wall_time(url, warm_package, 2) for _ in range(repeats)]
    vertex_start = Figure(
        "local training service",
        "Vertex customJobs: submit -> JOB_STATE_RUNNING, warm package cache",
        "s",
        Series("Vertex customJobs", vertex_warm),
        Series("ml v1 jobs (warm)", warm),
        goal="warm start under 1 s, as ml v1",
        goal_met=Series("warm", vertex_warm).median < 1.0,
    )
    vertex_tuning = Figure(
        "local training service",
        "Vertex 4-trial hyperparameterTuningJob wall time, parallelTrialCount=2",
        "s",
        Series("Vertex parallelTrialCount=2", vertex_parallel),
        Series("ml v1 maxParallelTrials=2", parallel),
        goal="within 1.25x of ml v1 (one executor underneath)",
    )
    vertex_tuning.goal_met = vertex_tuning.ratio is not None and vertex_tuning.ratio <= 1.25
    return [start, tuning, vertex_start, vertex_tuning]

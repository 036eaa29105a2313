"""The isolated runtime's own cost: what a trial adds to its trainer, and a job's environment.

1. Per-trial overhead. A Vertex AI tuning job (one trial at a time, so no trial waits for a
   core) runs ``aip_test_trainer.tune --report``, which imports cloudml-hypertune and
   google-cloud-storage and writes one object, as the example trainer does. Each trial's
   ``startTime -> endTime`` is set against the same trainer run directly by the same Python in
   the same job environment (the service's own environment variables, a fresh ``AIP_MODEL_DIR``):
   the difference is what the service adds (the process, the private ``/tmp/hypertune`` mount
   namespace, ``/gcs/``, reading the metrics, the trials' loop).
2. The trainer's imports in the image's layer, byte-compiled (as it is now built) against the
   same imports compiled from source each time (the layer as it was before; reproduced with an
   empty ``PYTHONPYCACHEPREFIX`` under ``PYTHONDONTWRITEBYTECODE``, which the service's
   processes inherit in many CI and container images).
3. A job's environment (PREPARING), warm and cold, on the fuller environments (sklearn-cpu.1-6:
   its framework and the Google and data libraries it ships), against the framework-only
   environment the runtime built before (scikit-learn alone), in this run: each on an image
   layer of its own in a fresh image cache (built first, untimed), then a new package (cold: a
   hard-linked copy of the layer and the package installed by uv) or the same one (warm).
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from airflow_aip.jobs.vertex.containers import runtime_of
from airflow_aip.local.clock import parse_rfc3339
from airflow_aip.local.executor.environments import EnvironmentCache
from airflow_aip.local.storage.gcs import FakeGcsServer
from bench.common import Figure, Series
from tests.fixtures.local_service import LocalService, build_trainer_sdist, stage_trainer

TOPIC = "local runtime speed"
PARENT = "v1/projects/bench-project/locations/us-central1"
IMAGE = "us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest"
IMPORTS = "import google.cloud.storage, hypertune, sklearn.linear_model, pandas, joblib"


def _tuning_job(url: str, package_uri: str, bucket: str, trials: int) -> dict[str, Any]:
    pool = {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": "1",
        "pythonPackageSpec": {
            "executorImageUri": IMAGE,
            "packageUris": [package_uri],
            "pythonModule": "aip_test_trainer.tune",
            "args": ["--steps=1", "--report"],
        },
    }
    body = {
        "displayName": "bench-trial-overhead",
        "maxTrialCount": trials,
        "parallelTrialCount": 1,
        "studySpec": {
            "metrics": [{"metricId": "training/hptuning/metric", "goal": "MAXIMIZE"}],
            "parameters": [{"parameterId": "x", "doubleValueSpec": {"minValue": 0, "maxValue": 6}}],
            "algorithm": "RANDOM_SEARCH",
        },
        "trialJobSpec": {
            "workerPoolSpecs": [pool],
            "baseOutputDirectory": {"outputUriPrefix": f"gs://{bucket}/hpt"},
        },
    }
    name = httpx.post(f"{url}{PARENT}/hyperparameterTuningJobs", json=body, timeout=30)
    name = name.raise_for_status().json()["name"]
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        job: dict[str, Any] = httpx.get(f"{url}v1/{name}", timeout=30).json()
        if job["state"] == "JOB_STATE_SUCCEEDED":
            return job
        if job["state"] in ("JOB_STATE_FAILED", "JOB_STATE_CANCELLED"):
            raise RuntimeError(f"{name} ended {job['state']}: {job.get('error')}")
        time.sleep(0.2)
    raise RuntimeError(f"{name} did not end")


def _job_python(data_dir: Path, sdist: str) -> Path:
    for ready in data_dir.glob("envs/*/ready.json"):
        if sdist in json.loads(ready.read_text()).get("packages", []):
            return ready.parent / "bin" / "python"
    raise RuntimeError(f"no environment holds {sdist}")


def _direct(python: Path, gcs_url: str, bucket: str, work: Path) -> float:
    """The trial's trainer, run directly: its wall time."""
    work.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(
        STORAGE_EMULATOR_HOST=gcs_url,
        AIP_MODEL_DIR=f"gs://{bucket}/direct/{uuid.uuid4().hex[:8]}/",
        CLOUD_ML_HP_METRIC_FILE=str(work / "output.metrics"),
        CLOUD_ML_TRIAL_ID="1",
        PYTHONUNBUFFERED="1",
    )
    argv = [str(python), "-m", "aip_test_trainer.tune", "--steps=1", "--report", "--x=1.5"]
    started = time.perf_counter()
    subprocess.run(argv, cwd=work, env=env, check=True, capture_output=True)
    return time.perf_counter() - started


def _imports(python: Path, compiled: bool, work: Path) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if not compiled:  # nothing found compiled, nothing kept: each run compiles from source
        env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(dir=work)
    started = time.perf_counter()
    subprocess.run([str(python), "-W", "ignore", "-c", IMPORTS], env=env, check=True, capture_output=True)
    return time.perf_counter() - started


def _trials(root: Path, repeats: int) -> list[Figure]:
    trials = max(3, repeats)
    with FakeGcsServer(root / "gcs") as gcs:
        service = LocalService(root / "data", gcs.url, max_running_jobs=1).start()
        try:
            staged = stage_trainer(gcs.url, root / "sdists", "0.7.0")
            _tuning_job(service.url, staged.package_uri, staged.bucket, 1)  # builds the environment
            job = _tuning_job(service.url, staged.package_uri, staged.bucket, trials)
            python = _job_python(service.data_dir, "aip_test_trainer-0.7.0.tar.gz")
            direct = [_direct(python, gcs.url, staged.bucket, root / "direct") for _ in range(trials)]
            compiled = [_imports(python, True, root) for _ in range(repeats)]
            source = [_imports(python, False, root) for _ in range(repeats)]
        finally:
            service.stop()
    walls = [
        (parse_rfc3339(t["endTime"]) - parse_rfc3339(t["startTime"])).total_seconds() for t in job["trials"]
    ]
    overhead = statistics.median(walls) - statistics.median(direct)
    trial = Figure(
        TOPIC,
        "a tuning trial (startTime -> endTime), one at a time",
        "s",
        Series("trial", walls),
        Series("its trainer run directly, same Python and environment", direct),
        goal="adds well under 1 s to its trainer",
        goal_met=overhead < 0.5,
    )
    trial.notes.append(
        f"Per-trial overhead: {overhead:.2f} s (medians). The trainer imports cloudml-hypertune and "
        "google-cloud-storage and writes one object to the local Cloud Storage."
    )
    imports = Figure(
        TOPIC,
        "a trainer's imports in the image layer (google-cloud-storage, hypertune, scikit-learn, pandas)",
        "s",
        Series("byte-compiled layer", compiled),
        Series("compiled from source each time (the layer before)", source),
        goal="at most 0.5x of the layer before",
    )
    imports.goal_met = imports.ratio is not None and imports.ratio <= 0.5
    return [trial, imports]


def _environments(root: Path, repeats: int) -> list[Figure]:
    full = runtime_of(IMAGE)
    lean = dataclasses.replace(full, requirements=(f"scikit-learn=={full.version}.*",))
    sdists = root / "env-sdists"
    figures: dict[str, dict[str, list[float]]] = {}
    for label, runtime in (("full", full), ("lean", lean)):
        cache = EnvironmentCache(root / f"envs-{label}", image_cache=root / f"images-{label}")

        def prepare(sdist: Path, cache: EnvironmentCache = cache, runtime: Any = runtime) -> float:
            started = time.perf_counter()
            cache.prepare([sdist], lambda _s, _l: None, lambda: False, runtime)
            return time.perf_counter() - started

        first = build_trainer_sdist(sdists / label, "0.8.0")
        prepare(first)  # the image layer, built once (untimed)
        fresh = [build_trainer_sdist(sdists / label, f"0.8.{i + 1}") for i in range(repeats)]
        cold = [prepare(sdist) for sdist in fresh]
        warm = [prepare(first) for _ in range(repeats)]
        figures[label] = {"cold": cold, "warm": warm}
    cold_fig = Figure(
        TOPIC,
        "a job's environment, cold (new package; image layer kept), sklearn-cpu.1-6's fuller one",
        "s",
        Series("fuller: framework + Google and data libraries, byte-compiled", figures["full"]["cold"]),
        Series("framework only (the environment before)", figures["lean"]["cold"]),
        goal="cold start under 10 s",
        goal_met=Series("cold", figures["full"]["cold"]).median < 10.0,
    )
    warm_fig = Figure(
        TOPIC,
        "a job's environment, warm (same package), sklearn-cpu.1-6's fuller one",
        "s",
        Series("fuller", figures["full"]["warm"]),
        Series("framework only (the environment before)", figures["lean"]["warm"]),
        goal="under 1 s in PREPARING",
        goal_met=Series("warm", figures["full"]["warm"]).median < 1.0,
    )
    cold_fig.notes.append(
        "Environments measured in-process (EnvironmentCache.prepare, what PREPARING runs after the "
        "package's download); each layer on a fresh image cache, built first from uv's cache, untimed. "
        "Both layers are byte-compiled now: the framework-only one stands for the earlier environment's "
        "contents, not its missing bytecode. On it, the test trainer's declared dependencies "
        "(cloudml-hypertune, google-cloud-storage) are installed per job, as they were before."
    )
    return [cold_fig, warm_fig]


def run(repeats: int) -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="aip-bench-runtime-") as tmp:
        root = Path(tmp)
        return _trials(root, repeats) + _environments(root, repeats)

"""A process replica's environment is its image's, Vertex AI's and its pool's: nothing of this machine's
unless passed on purpose (``aip-local serve --pass-env``), and exactly its pool's GPUs (none here).

A service of this module's own, started with variables in its environment that a trainer must not
see, and with ``--pass-env`` and ``AIP_LOCAL_PASS_ENV`` naming others (one of them unset).
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_aip.local.executor.accelerators import GpuLedger
from airflow_aip.local.executor.containers import ContainerEngine
from airflow_aip.local.executor.host_env import SYSTEM_PATH
from airflow_aip.local.executor.plans import ExecutionPlan, PoolPlan
from airflow_aip.local.executor.runner import Attempt, AttemptSpec
from airflow_aip.local.storage.gcs import FakeGcsServer
from tests.fixtures.local_service import LocalService, StagedTrainer, log_entries, wait_for_job
from tests.fixtures.vertex import LOCATION, VERTEX_TERMINAL, aiplatform, worker_pool
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.integration

# What a process replica may see, each for a reason: its image's, Vertex AI's, the pool's own
# (AIP_TEST_ENV), the GPUs, and the local runtime's own (metadata server, proxy, CA bundles, the SDK's
# redirection, the emulator, the private /tmp).
_IMAGE = {"PATH", "LANG", "TZ", "HOME"}
_VERTEX = {
    "CLUSTER_SPEC",
    "KUBERNETES_PORT",
    "CLOUD_ML_JOB_ID",
    "CLOUD_ML_PROJECT_ID",
    "CLOUD_ML_REGION",
    "AIP_MODEL_DIR",
    "AIP_CHECKPOINT_DIR",
    "AIP_TENSORBOARD_LOG_DIR",
    "PYTHONUNBUFFERED",
    "AIP_TEST_ENV",
    "CUDA_VISIBLE_DEVICES",
}
_LOCAL_RUNTIME = {
    "GCE_METADATA_HOST",
    "GCE_METADATA_IP",
    "NO_GCE_CHECK",
    "CLOUDSDK_CONFIG",
    "PYTHONPATH",
    "AIP_LOCAL_AIPLATFORM_ENDPOINT",
    "AIP_LOCAL_PROJECT_ID",
    "https_proxy",
    "HTTPS_PROXY",
    "no_proxy",
    "NO_PROXY",
    "CURL_CA_BUNDLE",
    "REQUESTS_CA_BUNDLE",
    "SSL_CERT_FILE",
    "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
    "STORAGE_EMULATOR_HOST",
    "TMPDIR",
    "CLOUD_ML_HP_METRIC_FILE",  # only where no mount namespace can be made
    "PWD",  # the replica's own directory, exported by the sh that mounts /gcs/ and /tmp/hypertune
}


@pytest.fixture(scope="module")
def service(fake_gcs: FakeGcsServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalService]:
    with pytest.MonkeyPatch.context() as env:  # the service's environment, as a developer's shell has it
        env.setenv("AIP_TEST_LEAK", "a developer's secret")
        env.setenv("WANDB_API_KEY", "not on Vertex AI")
        env.setenv("AIP_TEST_PASSED", "passed on purpose")
        env.setenv("AIP_TEST_PASSED_TOO", "by the variable")
        env.delenv("AIP_TEST_UNSET", raising=False)
        env.setenv("AIP_LOCAL_PASS_ENV", "AIP_TEST_PASSED_TOO")
        flags = ["--pass-env", "AIP_TEST_PASSED", "--pass-env", "AIP_TEST_UNSET"]
        data = tmp_path_factory.mktemp("aip-local-env") / "data"
        started = LocalService(data, fake_gcs.url, extra_args=flags).start()
    try:
        yield started
    finally:
        started.stop()


def _run(service: LocalService, body: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    project = f"proj-{uuid.uuid4().hex[:10]}"
    jobs = aiplatform(service.url).projects().locations().customJobs()
    created = jobs.create(parent=f"projects/{project}/locations/{LOCATION}", body=body).execute()
    job: dict[str, Any] = wait_for_job(jobs, created["name"], VERTEX_TERMINAL)
    return project, created["name"].rsplit("/", 1)[1], job


def test_a_process_replica_sees_no_variable_of_this_machine_but_those_passed(
    service: LocalService, staged_trainer: StagedTrainer
) -> None:
    base = f"gs://{staged_trainer.bucket}/env/{uuid.uuid4().hex[:8]}"
    pool = worker_pool(
        staged_trainer, "succeed", [f"--job-dir={base}"], env=[{"name": "AIP_TEST_ENV", "value": "$(HOME)"}]
    )
    spec = {"workerPoolSpecs": [pool], "baseOutputDirectory": {"outputUriPrefix": base}}
    project, job_id, job = _run(service, {"displayName": "env", "jobSpec": spec})
    assert job["state"] == "JOB_STATE_SUCCEEDED", job.get("error")
    environ: dict[str, str] = staged_trainer.read_json(base + "/report.json")["environ"]
    report = staged_trainer.read_json(base + "/report.json")
    passed = {"AIP_TEST_PASSED": "passed on purpose", "AIP_TEST_PASSED_TOO": "by the variable"}
    assert {k: environ.get(k) for k in passed} == passed
    unexpected = set(environ) - _IMAGE - _VERTEX - _LOCAL_RUNTIME - set(passed)
    assert unexpected == set(), "a process replica got variables of this machine"
    # As its image would: the runtime's Python first, then the system's; an empty home of its own.
    assert environ["PATH"] == f"{Path(report['executable']).parent}:{SYSTEM_PATH}"
    assert (environ["LANG"], environ["TZ"], environ["HOME"]) == ("C.UTF-8", "UTC", report["cwd"])
    assert environ["AIP_TEST_ENV"] == report["cwd"]  # the pool's $(HOME) is the replica's, not the host's
    assert environ["CUDA_VISIBLE_DEVICES"] == "-1"  # a CPU pool sees no GPU, whatever the machine has
    texts = [e["textPayload"] for e in log_entries(service.url, project, job_id)]
    said = [t for t in texts if "--pass-env" in t]
    assert said == [
        "Passed to the replicas from this machine's environment on purpose (--pass-env): "
        "AIP_TEST_PASSED_TOO, AIP_TEST_PASSED; not set on this machine, so not passed: AIP_TEST_UNSET"
    ]


def test_a_distributed_job_counts_its_nodes_and_gives_each_its_own_rank(
    service: LocalService, staged_trainer: StagedTrainer
) -> None:
    base = f"gs://{staged_trainer.bucket}/dist/{uuid.uuid4().hex[:8]}"
    primary = worker_pool(staged_trainer, "succeed", [f"--job-dir={base}"])
    workers = {**worker_pool(staged_trainer, "succeed", [f"--job-dir={base}"]), "replicaCount": "2"}
    server = worker_pool(staged_trainer, "sleep", [])  # a parameter server: not a node of the world
    _, _, job = _run(
        service, {"displayName": "dist", "jobSpec": {"workerPoolSpecs": [primary, workers, server]}}
    )
    assert job["state"] == "JOB_STATE_SUCCEEDED", job.get("error")
    reports = [staged_trainer.read_json(f"{base}/{name}") for name in ("report.json", "report-worker-0.json")]
    reports.append(staged_trainer.read_json(f"{base}/report-worker-1.json"))
    assert [(r["RANK"], r["WORLD_SIZE"]) for r in reports] == [("0", "3"), ("1", "3"), ("2", "3")]
    assert all(json.loads(r["TF_CONFIG"])["cluster"]["ps"] for r in reports)
    assert {r["environ"]["KUBERNETES_PORT"] for r in reports} == {"tcp://127.0.0.1:9"}


_SLEEP = ("-n", "1", "-r", "1", "import time; time.sleep(30)")  # python -m timeit: a replica that waits


def _environ(pid: int) -> dict[str, str]:
    """The replica's environment once it runs its own program: until its exec, a forked child
    still holds the service's (every replica's has CLUSTER_SPEC)."""

    def started() -> dict[str, str] | None:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
        env = dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)
        return env if "CLUSTER_SPEC" in env else None

    found: dict[str, str] = wait_until(started, 30, f"process {pid}'s exec", every=0.05)
    return found


def test_each_gpu_replica_sees_gpus_of_its_own_and_a_cpu_pool_none(tmp_path: Path) -> None:
    """A real attempt on a machine of three GPUs, as nvidia-smi would list them (:class:`GpuLedger`
    is where the service's discovery ends): this machine has none to prove it with."""
    gpu = "1 x NVIDIA_TESLA_T4"
    pools = (
        PoolPlan("workerpool0", "chief", "workerpool0-", 1, "timeit", _SLEEP, accelerators=gpu),
        PoolPlan("workerpool1", "worker", "workerpool1-", 2, "timeit", _SLEEP, accelerators=gpu),
        PoolPlan("workerpool2", "ps", "workerpool2-", 1, "timeit", _SLEEP),
    )
    plan = ExecutionPlan("j", "1", (), pools, {})
    ledger = GpuLedger((0, 1, 2))
    attempt = Attempt(AttemptSpec(plan, Path(sys.executable), tmp_path, None, gpus=ledger), lambda *a: None)
    try:
        seen = {name: _environ(p.pid).get("CUDA_VISIBLE_DEVICES") for name, p in attempt.processes.items()}
    finally:
        attempt.stop()
    assert seen == {"workerpool0-0": "0", "workerpool1-0": "1", "workerpool1-1": "2", "workerpool2-0": "-1"}
    assert ledger.lease(3) == (0, 1, 2)  # the stopped attempt gave its GPUs back


def test_a_container_replica_gets_the_passed_names_but_not_the_image_variables_of_a_process(
    tmp_path: Path,
) -> None:
    """The engine's CLI is ``true`` here: what matters is the ``run`` it is given (values by name).
    A process pool beside it keeps the job on the host's network (no network of its own to make)."""
    pool = PoolPlan("workerpool0", "chief", "workerpool0-", 1, "", ("report",), image_uri="r/img:1")
    server = PoolPlan("workerpool2", "ps", "workerpool2-", 1, "timeit", _SLEEP)
    spec = AttemptSpec(
        ExecutionPlan("j", "1", (), (pool, server), {}),
        Path(sys.executable),
        tmp_path,
        None,
        engine=ContainerEngine("/bin/true", "k"),
        host_env={"AIP_TEST_PASSED": "x"},
    )
    attempt = Attempt(spec, lambda *a: None)
    attempt.stop()
    argv = attempt.processes["workerpool0-0"].argv
    names = {argv[i + 1] for i, arg in enumerate(argv) if arg == "--env"}
    assert {"AIP_TEST_PASSED", "CLUSTER_SPEC", "KUBERNETES_PORT"} <= names
    assert not {"PATH", "HOME", "LANG", "TZ", "CUDA_VISIBLE_DEVICES"} & names


def test_containers_and_processes_lease_from_one_ledger_and_a_container_gets_its_host_indices(
    tmp_path: Path,
) -> None:
    """One rule for both kinds of replica: on a machine of three GPUs (the ledger, where discovery
    ends), two container replicas and a process replica each get a GPU of their own; the containers
    theirs as devices by host index. The engine's CLI is a script that says docker has the nvidia
    runtime (where the service's engine check ends) and does nothing else: its ``run`` is inspected."""
    docker = tmp_path / "bin" / "docker"
    docker.parent.mkdir()
    docker.write_text('#!/bin/sh\n[ "$1" = info ] && echo "io.containerd.runc.v2 nvidia runc"\nexit 0\n')
    docker.chmod(0o755)
    gpu = "1 x NVIDIA_TESLA_T4"
    pools = (
        PoolPlan(
            "workerpool0", "chief", "workerpool0-", 2, "", ("report",), image_uri="r/i:1", accelerators=gpu
        ),
        PoolPlan("workerpool1", "worker", "workerpool1-", 1, "timeit", _SLEEP, accelerators=gpu),
        PoolPlan("workerpool2", "ps", "workerpool2-", 1, "", ("report",), image_uri="r/i:1"),
    )
    ledger = GpuLedger((0, 1, 2))
    spec = AttemptSpec(
        ExecutionPlan("j", "1", (), pools, {}),
        Path(sys.executable),
        tmp_path / "work",
        None,
        engine=ContainerEngine(str(docker), "k"),
        gpus=ledger,
    )
    attempt = Attempt(spec, lambda *a: None)
    try:
        process = _environ(attempt.processes["workerpool1-0"].pid)
    finally:
        attempt.stop()

    def gpus_of(name: str) -> list[str]:
        argv = attempt.processes[name].argv
        return [argv[i + 1] for i, arg in enumerate(argv) if arg == "--gpus"]

    assert [gpus_of(f"workerpool0-{i}") for i in (0, 1)] == [['"device=0"'], ['"device=1"']]
    assert process["CUDA_VISIBLE_DEVICES"] == "2"
    assert gpus_of("workerpool2-0") == []  # a CPU pool's container gets no device
    assert ledger.lease(3) == (0, 1, 2)  # every lease, the containers' too, was given back

"""Custom containers on the local service: real images on this machine's podman (or docker), as on Vertex.

Each test submits through a client nobody here wrote (Google's Vertex AI SDK, or the discovery
clients of aiplatform v1 and ml v1) to a real ``aip-local serve``, whose replicas run in the
trainer image of tests/trainers/container. What a replica saw comes back through Cloud Storage;
what the engine holds is read from the engine itself, by the labels the service puts on its
containers. Every test ends with none of its containers left.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airflow_aip.local.executor.accelerators import CDI_SPECS
from airflow_aip.local.executor.containers import ContainerEngine
from airflow_aip.local.executor.gcs_mount import mount_unavailable
from airflow_aip.local.store import project_number
from tests.fixtures.containers import containers_of, push, roles_training_input, untag
from tests.fixtures.local_service import (
    LocalService,
    Restarts,
    StagedTrainer,
    log_entries,
    wait_for_job,
    wait_for_state,
)
from tests.fixtures.vertex import LOCATION, VERTEX_TERMINAL, aiplatform, sdk_with_objects, vertex_sdk

pytestmark = pytest.mark.integration
MACHINE = {"machineType": "n1-standard-4"}


@pytest.fixture
def project() -> str:
    return f"ctr-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def out(staged_trainer: StagedTrainer) -> str:
    return f"gs://{staged_trainer.bucket}/containers/{uuid.uuid4().hex[:8]}/"


@dataclass(frozen=True)
class ContainerTest:
    """What a container test works with: the session's service and engine, the trainer images by
    role, the staged trainer (its bucket), the test's own project and output folder."""

    service: LocalService
    engine: ContainerEngine
    images: Mapping[str, str]
    trainer: StagedTrainer
    project: str
    out: str


@pytest.fixture
def ctr(
    local_service: LocalService,
    container_engine: ContainerEngine,
    trainer_images: Mapping[str, str],
    staged_trainer: StagedTrainer,
    project: str,
    out: str,
) -> ContainerTest:
    return ContainerTest(local_service, container_engine, trainer_images, staged_trainer, project, out)


@pytest.fixture
def none_left(local_service: LocalService, container_engine: ContainerEngine, project: str) -> Iterator[None]:
    """After the test: no container of the session's service is left for this test's project."""
    yield
    number = project_number(project)  # a Vertex job is stored (and labelled) under the project number
    left = [n for n in containers_of(container_engine, local_service.data_dir) if f"-{number}-" in n]
    assert left == []


def _label(job_name: str) -> str:
    """The ``aip-local.job`` label of a Vertex job: ``<project number>/<job id>``."""
    parts = job_name.split("/")
    return f"{parts[1]}/{parts[-1]}"


def _pool(image: str, mode: str, count: int = 1, args: tuple[str, ...] = ()) -> dict[str, Any]:
    spec = {"imageUri": image, "args": [mode, *args]}
    return {"machineSpec": MACHINE, "replicaCount": str(count), "containerSpec": spec}


def _custom_jobs(url: str) -> Any:
    return aiplatform(url).projects().locations().customJobs()


def _create(url: str, project: str, pools: list[dict[str, Any]], base: str = "") -> dict[str, Any]:
    body: dict[str, Any] = {"displayName": "containers", "jobSpec": {"workerPoolSpecs": pools}}
    if base:
        body["jobSpec"]["baseOutputDirectory"] = {"outputUriPrefix": base}
    parent = f"projects/{project}/locations/{LOCATION}"
    job: dict[str, Any] = _custom_jobs(url).create(parent=parent, body=body).execute()
    return job


@pytest.mark.usefixtures("none_left")
def test_sdk_custom_job_runs_the_container_with_vertex_environment(
    ctr: ContainerTest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = {"image_uri": ctr.images["master"], "args": ["report", "--x=3"]}
    pools = [{"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1, "container_spec": spec}]
    with vertex_sdk(ctr.service.url, ctr.project, ctr.trainer.bucket, monkeypatch) as sdk:
        job = sdk.CustomJob(display_name="in-a-container", worker_pool_specs=pools, base_output_dir=ctr.out)
        job.run(sync=True)
        assert job.state.name == "JOB_STATE_SUCCEEDED"
    seen = ctr.trainer.read_json(f"{ctr.out}model/report.json")
    assert seen["AIP_MODEL_DIR"] == f"{ctr.out}model/"
    assert seen["CLOUD_ML_JOB_ID"] == job.resource_name.rsplit("/", 1)[-1]
    # A single-replica job: CLUSTER_SPEC, but neither TF_CONFIG nor PyTorch's rendezvous (as on Vertex AI).
    assert (seen["RANK"], seen["WORLD_SIZE"], seen["AIP_TEST_IMAGE_ROLE"]) == (None, None, "master")
    assert '"workerpool0"' in seen["CLUSTER_SPEC"]
    assert seen["TF_CONFIG"] is None
    # The job's metadata server, at the gateway of the replica's own network (relayed to loopback).
    assert re.fullmatch(r"\d+\.\d+\.\d+\.1:\d+", seen["GCE_METADATA_HOST"]), seen["GCE_METADATA_HOST"]
    if mount_unavailable() is None:
        assert seen["via"] == "/gcs"


@pytest.mark.usefixtures("none_left")
def test_sdk_custom_container_training_job_trains_and_returns_its_model(
    ctr: ContainerTest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``CustomContainerTrainingJob.run()``: a trainingPipeline whose CustomJob runs the image, then
    the model under ``{base}/model/`` uploaded (the image's own report lands beside it)."""
    from google.cloud.aiplatform import training_jobs

    monkeypatch.setattr(training_jobs, "_JOB_WAIT_TIME", 0.2)
    monkeypatch.setattr(training_jobs, "_LOG_WAIT_TIME", 0.2)
    serving = "us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-6:latest"
    objects = {"model/model.joblib": b"model bytes"}
    with sdk_with_objects(
        ctr.service.url, ctr.trainer, monkeypatch, "ctr-pipeline", objects, ctr.project
    ) as (sdk, base):
        job = sdk.CustomContainerTrainingJob(
            display_name="iris-in-a-container",
            container_uri=ctr.images["master"],
            model_serving_container_image_uri=serving,
        )
        model = job.run(args=["report"], base_output_dir=base, replica_count=1, machine_type="n1-standard-4")
        assert job.state.name == "PIPELINE_STATE_SUCCEEDED"
        assert isinstance(model, sdk.Model)
        assert (model.version_id, model.uri) == ("1", f"{base}model/")
        backing = sdk.CustomJob.get(job.gca_resource.training_task_metadata["backingCustomJob"])
    seen = ctr.trainer.read_json(f"{base}model/report.json")
    assert seen["CLOUD_ML_JOB_ID"] == backing.resource_name.rsplit("/", 1)[-1]
    assert seen["AIP_TEST_IMAGE_ROLE"] == "master"


@pytest.mark.usefixtures("none_left")
def test_sdk_tuning_job_reads_hypertune_from_the_containers_own_tmp(
    ctr: ContainerTest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from google.cloud.aiplatform import hyperparameter_tuning as hpt

    spec = {"image_uri": ctr.images["master"], "args": ["report"]}
    pools = [{"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1, "container_spec": spec}]
    with vertex_sdk(ctr.service.url, ctr.project, ctr.trainer.bucket, monkeypatch) as sdk:
        trial_job = sdk.CustomJob(display_name="trial", worker_pool_specs=pools, base_output_dir=ctr.out)
        tuning = sdk.HyperparameterTuningJob(
            display_name="tune-in-a-container",
            custom_job=trial_job,
            metric_spec={"accuracy": "maximize"},
            parameter_spec={"x": hpt.DiscreteParameterSpec(values=[2, 3], scale="linear")},
            max_trial_count=2,
            parallel_trial_count=1,
            search_algorithm="grid",
        )
        tuning.run(sync=True)
        assert tuning.state.name == "JOB_STATE_SUCCEEDED"
        finals = sorted(t.final_measurement.metrics[0].value for t in tuning.trials)
    assert finals == [0.5, 0.75]  # x / 4, as each trial's container reported it


@pytest.mark.usefixtures("none_left")
def test_replicas_rendezvous_over_master_addr_and_port(
    ctr: ContainerTest,
) -> None:
    image = ctr.images["master"]
    pools = [_pool(image, "rendezvous"), _pool(image, "rendezvous", count=2)]
    job = _create(ctr.service.url, ctr.project, pools, ctr.out)
    done = wait_for_job(_custom_jobs(ctr.service.url), job["name"], VERTEX_TERMINAL)
    assert done["state"] == "JOB_STATE_SUCCEEDED", done.get("error")
    met = ctr.trainer.read_json(f"{ctr.out}model/rendezvous.json")
    # Each replica is a host of its own, named as in CLUSTER_SPEC, and holds port 2222 itself.
    assert met["heard"] == ["1 workerpool1-0", "2 workerpool1-1"]
    assert met["hostname"] == "workerpool0-0"
    assert (met["WORLD_SIZE"], met["MASTER_ADDR"], met["MASTER_PORT"]) == ("3", "workerpool0-0", "2222")
    assert json.loads(met["CLUSTER_SPEC"])["cluster"] == {
        "workerpool0": ["workerpool0-0:2222"],
        "workerpool1": ["workerpool1-0:2222", "workerpool1-1:2222"],
    }
    # The image's own PYTHONPATH is kept, after the Vertex AI SDK's redirection.
    assert met["PYTHONPATH"] == "/opt/aip-local/trainer_site:/opt/image-lib"


@pytest.mark.usefixtures("none_left")
def test_cancel_stops_and_removes_the_containers(
    ctr: ContainerTest,
) -> None:
    job = _create(ctr.service.url, ctr.project, [_pool(ctr.images["master"], "sleep")], ctr.out)
    ctr.trainer.wait_for_json(f"{ctr.out}model/sleeping-workerpool0-0.json")
    label = _label(job["name"])
    assert len(containers_of(ctr.engine, ctr.service.data_dir, label)) == 1

    _custom_jobs(ctr.service.url).cancel(name=job["name"], body={}).execute()
    done = wait_for_job(_custom_jobs(ctr.service.url), job["name"], VERTEX_TERMINAL)

    assert done["state"] == "JOB_STATE_CANCELLED"
    assert containers_of(ctr.engine, ctr.service.data_dir, label) == []


@pytest.mark.usefixtures("none_left")
def test_an_image_in_a_local_registry_is_pulled_then_run(
    ctr: ContainerTest,
    local_registry: str,
) -> None:
    image = push(ctr.engine, ctr.images["master"], local_registry, f"{ctr.project}/trainer:1")
    try:
        job = _create(ctr.service.url, ctr.project, [_pool(image, "report")], ctr.out)
        done = wait_for_job(_custom_jobs(ctr.service.url), job["name"], VERTEX_TERMINAL)
        assert done["state"] == "JOB_STATE_SUCCEEDED", done.get("error")
        assert ctr.trainer.read_json(f"{ctr.out}model/report.json")["AIP_TEST_IMAGE_ROLE"] == "master"
    finally:
        untag(ctr.engine, image)


@pytest.mark.usefixtures("none_left")
def test_a_failing_container_fails_the_job_in_vertex_words(
    local_service: LocalService, trainer_images: Mapping[str, str], project: str
) -> None:
    job = _create(local_service.url, project, [_pool(trainer_images["master"], "fail")])
    done = wait_for_job(_custom_jobs(local_service.url), job["name"], VERTEX_TERMINAL)
    assert done["state"] == "JOB_STATE_FAILED"
    message = done["error"]["message"]
    assert message.startswith("The replica workerpool0-0 exited with a non-zero status of 1.")
    assert "ValueError: the trainer failed on purpose" in message  # the container's traceback


@pytest.mark.usefixtures("none_left")
def test_an_image_that_cannot_be_pulled_fails_the_job(local_service: LocalService, project: str) -> None:
    image = f"localhost:9/{project}/missing:1"  # nothing listens on port 9
    job = _create(local_service.url, project, [_pool(image, "report")])
    done = wait_for_job(_custom_jobs(local_service.url), job["name"], VERTEX_TERMINAL)
    assert done["state"] == "JOB_STATE_FAILED"
    assert done["error"]["message"].startswith(f"Unable to pull the container image {image}: ")


def test_ml_v1_roles_run_their_own_image_or_the_masters(
    ctr: ContainerTest,
) -> None:
    ti = {**roles_training_input(ctr.images, ctr.out), "region": "us-central1"}
    ml = ctr.service.ml()
    ml.projects().jobs().create(
        parent=f"projects/{ctr.project}", body={"jobId": "roles", "trainingInput": ti}
    ).execute()
    done = wait_for_state(ml, f"projects/{ctr.project}/jobs/roles", {"SUCCEEDED", "FAILED", "CANCELLED"})
    assert done["state"] == "SUCCEEDED", done.get("errorMessage")
    images = {
        task: ctr.trainer.read_json(f"{ctr.out}role-{task}.json")["AIP_TEST_IMAGE_ROLE"]
        for task in ("master-0", "worker-0", "ps-0")
    }
    assert images == {"master-0": "master", "worker-0": "master", "ps-0": "ps"}
    assert containers_of(ctr.engine, ctr.service.data_dir, f"{ctr.project}/roles") == []


def test_a_killed_services_containers_are_removed_at_restart(
    restarts: Restarts,
    container_engine: ContainerEngine,
    trainer_images: Mapping[str, str],
    staged_trainer: StagedTrainer,
    fake_gcs: Any,
    project: str,
    out: str,
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    first = restarts.start(data_dir, fake_gcs.url)
    job = _create(first.url, project, [_pool(trainer_images["master"], "sleep")], out)
    staged_trainer.wait_for_json(f"{out}model/sleeping-workerpool0-0.json")

    first.crash()
    assert len(containers_of(container_engine, data_dir)) == 1  # SIGKILL stops no container
    second = restarts.start(data_dir, fake_gcs.url)

    assert containers_of(container_engine, data_dir) == []
    failed = _custom_jobs(second.url).get(name=job["name"]).execute()
    assert failed["state"] == "JOB_STATE_FAILED"


def test_without_an_engine_a_container_job_is_a_400_naming_the_field(
    restarts: Restarts, fake_gcs: Any, project: str, tmp_path: Path
) -> None:
    from googleapiclient.errors import HttpError

    service = restarts.start(tmp_path / "data", fake_gcs.url, extra_args=["--container-engine", "none"])
    with pytest.raises(HttpError) as refused:
        _create(service.url, project, [_pool("localhost/any:1", "report")])
    assert refused.value.resp.status == 400
    assert "jobSpec.workerPoolSpecs[0].containerSpec" in str(refused.value)
    assert "none was found" in str(refused.value)


@pytest.mark.usefixtures("none_left")
def test_sdk_from_local_script_runs_in_a_custom_image(
    ctr: ContainerTest,
    fake_gcs: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The SDK makes a containerSpec of ``sh -c "pip install --upgrade pip && pip3 install --user
    /gcs/<staged package> && python3 -m <module>"``: pip through the job's proxy, /gcs/ and all."""
    script = tmp_path / "train.py"
    script.write_text(
        "import json, os, sys\n"
        "path = '/gcs/' + os.environ['AIP_MODEL_DIR'][len('gs://'):]\n"
        "os.makedirs(path, exist_ok=True)\n"
        "json.dump({'argv': sys.argv[1:]}, open(path + 'script.json', 'w'))\n"
    )
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", fake_gcs.url)  # where the SDK stages the script
    with vertex_sdk(ctr.service.url, ctr.project, ctr.trainer.bucket, monkeypatch) as sdk:
        job = sdk.CustomJob.from_local_script(
            display_name="from-a-script",
            script_path=str(script),
            container_uri=ctr.images["master"],
            args=["--epochs=1"],
            base_output_dir=ctr.out,
        )
        job.run(sync=True)
        assert job.state.name == "JOB_STATE_SUCCEEDED", job.error
    assert ctr.trainer.read_json(f"{ctr.out}model/script.json") == {"argv": ["--epochs=1"]}


@pytest.mark.usefixtures("none_left")
def test_a_replica_asking_for_a_gpu_runs_on_the_cpu_and_its_log_says_why(
    local_service: LocalService, trainer_images: Mapping[str, str], project: str, out: str
) -> None:
    """No GPU on this machine, so no NVIDIA CDI spec for podman: the log says so once for the replica."""
    if any(spec.exists() for spec in CDI_SPECS):
        pytest.skip("this machine has an NVIDIA CDI spec: podman passes its GPUs")
    pool = _pool(trainer_images["master"], "report")
    pool["machineSpec"] = {
        "machineType": "n1-standard-4",
        "acceleratorType": "NVIDIA_TESLA_T4",
        "acceleratorCount": 1,
    }
    job = _create(local_service.url, project, [pool], out)
    done = wait_for_job(_custom_jobs(local_service.url), job["name"], VERTEX_TERMINAL)
    assert done["state"] == "JOB_STATE_SUCCEEDED", done.get("error")
    number, job_id = _label(job["name"]).split("/")
    lines = [str(e["textPayload"]) for e in log_entries(local_service.url, number, job_id)]
    said = [line for line in lines if line.startswith("workerpool0-0 asks for 1 x NVIDIA_TESLA_T4")]
    assert said == [
        "workerpool0-0 asks for 1 x NVIDIA_TESLA_T4 and will run on the CPU: no GPU can be passed: podman "
        "has no NVIDIA CDI spec (/etc/cdi/nvidia.yaml or /var/run/cdi/nvidia.yaml; nvidia-ctk writes it)"
    ]

"""The local service's gRPC face, through Google's own gapic clients (sync and async).

The clients are google-cloud-aiplatform's ``JobServiceClient``, ``JobServiceAsyncClient``,
``ModelServiceClient`` and ``PipelineServiceClient``, on a channel in clear to the service's gRPC
port: what is checked is the face (the same handlers as REST, Google's status codes and details,
the fault plan), not the routing (tests/integration/test_google_clients_env.py runs the clients
with only ``aip-local env``'s variables).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import grpc
import pytest
from google.api_core import exceptions as google_errors

from airflow_aip.local.store import project_number
from tests.fixtures.local_service import LocalService, StagedTrainer, own_service, storage_client
from tests.fixtures.vertex import LOCATION, WORKER_POOL, aiplatform, worker_pool
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.integration

grpc_service = own_service("grpc_service", ["--fault-admin", "--model-upload-seconds", "0"])


def _jobs(service: LocalService) -> Any:
    from google.cloud.aiplatform_v1 import JobServiceClient
    from google.cloud.aiplatform_v1.services.job_service.transports.grpc import JobServiceGrpcTransport

    return JobServiceClient(transport=JobServiceGrpcTransport(channel=service.grpc_channel()))


def _parent(project: str) -> str:
    return f"projects/{project}/locations/{LOCATION}"


def _sleeping_job(trainer: StagedTrainer, name: str) -> dict[str, Any]:
    pool = worker_pool(trainer, "sleep", ["--seconds=600"])
    return {"display_name": name, "job_spec": {"worker_pool_specs": [_snake(pool)]}}


def _snake(pool: dict[str, Any]) -> dict[str, Any]:
    spec = pool["pythonPackageSpec"]
    return {
        "machine_spec": {"machine_type": pool["machineSpec"]["machineType"]},
        "replica_count": int(pool["replicaCount"]),
        "python_package_spec": {
            "executor_image_uri": spec["executorImageUri"],
            "package_uris": spec["packageUris"],
            "python_module": spec["pythonModule"],
            "args": spec.get("args", []),
        },
    }


def _wait_state(read: Any, name: str, state: str) -> Any:
    return wait_until(lambda: (job := read(name=name)).state.name == state and job, 120, f"{name} {state}")


def test_a_custom_job_is_created_read_listed_cancelled_and_deleted_over_grpc(
    grpc_service: LocalService, staged_trainer: StagedTrainer
) -> None:
    client = _jobs(grpc_service)
    project = f"grpc-{uuid.uuid4().hex[:8]}"  # any project: as REST, the service takes it

    job = client.create_custom_job(parent=_parent(project), custom_job=_sleeping_job(staged_trainer, "g1"))

    assert job.name.startswith(f"projects/{project_number(project)}/locations/{LOCATION}/customJobs/")
    assert job.state.name in ("JOB_STATE_QUEUED", "JOB_STATE_PENDING")
    assert job.job_spec.worker_pool_specs[0].python_package_spec.python_module == "aip_test_trainer.sleep"
    rest = aiplatform(grpc_service.url).projects().locations().customJobs().get(name=job.name).execute()
    assert rest["displayName"] == "g1"  # one store behind both faces
    listed = client.list_custom_jobs(request={"parent": _parent(project), "filter": 'display_name="g1"'})
    assert [found.name for found in listed] == [job.name]
    _wait_state(client.get_custom_job, job.name, "JOB_STATE_RUNNING")
    client.cancel_custom_job(name=job.name)
    assert _wait_state(client.get_custom_job, job.name, "JOB_STATE_CANCELLED").error.code == 1
    client.delete_custom_job(name=job.name).result(timeout=30)
    with pytest.raises(google_errors.NotFound, match="does not exist"):
        client.get_custom_job(name=job.name)


def test_the_async_client_reads_and_refuses_as_the_sync_one(grpc_service: LocalService) -> None:
    from google.cloud.aiplatform_v1 import JobServiceAsyncClient
    from google.cloud.aiplatform_v1.services.job_service.transports.grpc_asyncio import (
        JobServiceGrpcAsyncIOTransport,
    )

    project = f"grpc-async-{uuid.uuid4().hex[:8]}"
    bad_pool = {**_snake({**WORKER_POOL}), "machine_spec": {"machine_type": "n1-standard-3"}}

    async def scenario() -> tuple[Any, Any, list[Any], Any]:
        channel = grpc.aio.insecure_channel(grpc_service.grpc_endpoint)
        client = JobServiceAsyncClient(transport=JobServiceGrpcAsyncIOTransport(channel=channel))
        try:
            bad = {"display_name": "bad", "job_spec": {"worker_pool_specs": [bad_pool]}}
            with pytest.raises(google_errors.InvalidArgument) as refused:
                await client.create_custom_job(request={"parent": _parent(project), "custom_job": bad})
            good = {"display_name": "a1", "job_spec": {"worker_pool_specs": [_snake(WORKER_POOL)]}}
            job = await client.create_custom_job(request={"parent": _parent(project), "custom_job": good})
            read = await client.get_custom_job(name=job.name)
            listed = [found async for found in await client.list_custom_jobs(parent=_parent(project))]
            return refused.value, read, listed, job
        finally:
            await channel.close()

    refused, read, listed, job = asyncio.run(scenario())

    assert "machine_spec.machine_type" in refused.message
    violations = [v for detail in refused.details for v in getattr(detail, "field_violations", [])]
    assert violations[0].field == "jobSpec.workerPoolSpecs[0].machineSpec.machineType"
    assert read.name == job.name
    assert [found.name for found in listed] == [job.name]


def test_a_method_not_served_is_unimplemented_and_names_itself(grpc_service: LocalService) -> None:
    client = _jobs(grpc_service)

    with pytest.raises(google_errors.MethodNotImplemented, match=r"JobService/ListNasJobs"):
        client.list_nas_jobs(parent=_parent("p"))


def test_a_disabled_api_and_an_unserved_operation_answer_as_rest_does(grpc_service: LocalService) -> None:
    from google.api_core import operations_v1

    client = _jobs(grpc_service)
    project = f"grpc-disabled-{uuid.uuid4().hex[:8]}"
    operations = operations_v1.OperationsClient(grpc_service.grpc_channel())
    grpc_service.admin("_permissions", {"disabledApis": ["aiplatform.googleapis.com"]}, "POST")
    try:
        with pytest.raises(google_errors.PermissionDenied) as disabled:
            client.list_custom_jobs(parent=_parent(project), retry=None)
    finally:
        grpc_service.admin("_permissions", {"disabledApis": []}, "POST")
    with pytest.raises(google_errors.MethodNotImplemented, match=r"customJobs\.operations\.get"):
        operations.get_operation(f"{_parent(project)}/customJobs/123/operations/456")

    (info,) = [detail for detail in disabled.value.details if hasattr(detail, "reason")]
    assert info.reason == "SERVICE_DISABLED"
    assert info.metadata["service"] == "aiplatform.googleapis.com"


def test_bad_bytes_and_oversized_messages_are_refused_and_the_service_goes_on(
    grpc_service: LocalService,
) -> None:
    channel = grpc_service.grpc_channel()
    create = channel.unary_unary("/google.cloud.aiplatform.v1.JobService/CreateCustomJob")

    with pytest.raises(grpc.RpcError) as malformed:
        create(b"\x0a\xff\xff\xff\x0f")  # field 1, a length beyond the message: truncated
    with pytest.raises(grpc.RpcError) as oversized:
        create(b"\x0a" + b"\xff\xff\x7f" + b"x" * (2 << 20))

    assert malformed.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "CreateCustomJobRequest" in malformed.value.details()
    assert oversized.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert list(_jobs(grpc_service).list_custom_jobs(parent=_parent(f"alive-{uuid.uuid4().hex[:6]}"))) == []


def test_rest_faults_apply_to_grpc_calls(grpc_service: LocalService) -> None:
    client = _jobs(grpc_service)
    project = f"grpc-faults-{uuid.uuid4().hex[:8]}"
    body = {"display_name": "f1", "job_spec": {"worker_pool_specs": [_snake(WORKER_POOL)]}}
    created_before = grpc_service.admin("_stats")["created"]

    grpc_service.admin("_faults", {"method": "customJobs.create", "when": "after", "kind": 429}, "POST")
    with pytest.raises(google_errors.ResourceExhausted, match="Injected fault"):
        client.create_custom_job(parent=_parent(project), custom_job=body, retry=None)
    grpc_service.admin("_faults", {"method": "customJobs.list", "kind": 503}, "POST")
    with pytest.raises(google_errors.ServiceUnavailable):
        client.list_custom_jobs(parent=_parent(project), retry=None)
    grpc_service.admin("_faults", {"method": "customJobs.list", "kind": "drop"}, "POST")
    with pytest.raises(google_errors.ServiceUnavailable):
        client.list_custom_jobs(parent=_parent(project), retry=None)

    # The 429 came after the create was applied: the job exists, as it would on Google.
    assert [job.display_name for job in client.list_custom_jobs(parent=_parent(project))] == ["f1"]
    stats = grpc_service.admin("_stats")
    assert stats["created"] == created_before + 1
    assert grpc_service.admin(f"_stats?project={project}")["requests"]["customJobs.list"] == 3


def test_a_client_gone_before_the_answer_leaves_a_whole_job_or_none(grpc_service: LocalService) -> None:
    client = _jobs(grpc_service)
    project = f"grpc-gone-{uuid.uuid4().hex[:8]}"
    body = {"display_name": "gone", "job_spec": {"worker_pool_specs": [_snake(WORKER_POOL)]}}
    # The create is applied, then its answer is held; the client stops waiting first.
    grpc_service.admin(
        "_faults", {"method": "customJobs.create", "when": "after", "kind": "delay", "seconds": 5}, "POST"
    )

    with pytest.raises(google_errors.DeadlineExceeded):
        client.create_custom_job(
            request={"parent": _parent(project), "custom_job": body}, timeout=0.5, retry=None
        )

    (job,) = client.list_custom_jobs(parent=_parent(project))
    assert (
        client.get_custom_job(name=job.name).job_spec.worker_pool_specs[0].machine_spec.machine_type
        == "n1-standard-4"
    )


def test_the_model_registry_uploads_and_reads_over_grpc(grpc_service: LocalService, fake_gcs: Any) -> None:
    from google.cloud.aiplatform_v1 import ModelServiceClient
    from google.cloud.aiplatform_v1.services.model_service.transports.grpc import ModelServiceGrpcTransport

    bucket = storage_client(fake_gcs.url).create_bucket(f"aip-grpc-models-{uuid.uuid4().hex[:8]}")
    bucket.blob("m/model.joblib").upload_from_string(b"model bytes")
    client = ModelServiceClient(transport=ModelServiceGrpcTransport(channel=grpc_service.grpc_channel()))
    project = f"grpc-models-{uuid.uuid4().hex[:8]}"
    model = {
        "display_name": "m",
        "artifact_uri": f"gs://{bucket.name}/m/",
        "container_spec": {"image_uri": "us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-6:latest"},
    }

    request = {"parent": _parent(project), "model": model, "model_id": "grpc-m"}
    uploaded = client.upload_model(request=request).result(timeout=30)
    merged = client.merge_version_aliases(name=f"{uploaded.model}@1", version_aliases=["champion"])
    versions = list(client.list_model_versions(name=uploaded.model))

    assert uploaded.model.endswith("/models/grpc-m")
    assert set(merged.version_aliases) == {"default", "champion"}
    assert [version.version_id for version in versions] == ["1"]
    assert client.get_model(name=uploaded.model).display_name == "m"


def test_training_pipelines_answer_over_grpc(grpc_service: LocalService) -> None:
    from google.cloud.aiplatform_v1 import PipelineServiceClient
    from google.cloud.aiplatform_v1.services.pipeline_service.transports.grpc import (
        PipelineServiceGrpcTransport,
    )

    client = PipelineServiceClient(
        transport=PipelineServiceGrpcTransport(channel=grpc_service.grpc_channel())
    )
    project = f"grpc-pipelines-{uuid.uuid4().hex[:8]}"

    assert list(client.list_training_pipelines(parent=_parent(project))) == []
    with pytest.raises(google_errors.NotFound):
        client.get_training_pipeline(name=f"{_parent(project)}/trainingPipelines/123")

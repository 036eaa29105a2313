"""A trainer's own gapic (gRPC) clients reach the local service from inside its job.

On Vertex a trainer may call Vertex AI itself (read its own job, list its project's) with the
low-level ``aiplatform_v1`` clients, which speak gRPC to ``{region}-aiplatform.googleapis.com``.
Locally the job's proxy ends TLS for that name under the service's root (which the job's roots
file holds) and hands the HTTP/2 bytes to the service's gRPC face. The service runs with
``--runtime host`` here: its own Python, which has google-cloud-aiplatform (the test trainer's
environment does not). In soak: a service of its own and a job (about 30 s); ``make test`` proves
the same route for REST (test_local_trainer_io_sdk.py) and the gRPC face itself
(test_local_grpc_face.py).
"""

from __future__ import annotations

import uuid

import pytest

from tests.fixtures.local_service import LocalService, StagedTrainer, own_service, wait_for_job
from tests.fixtures.vertex import LOCATION, aiplatform, worker_pool

pytestmark = [pytest.mark.integration, pytest.mark.soak]

host_runtime = own_service("host_runtime", ["--runtime", "host"])


def test_a_trainer_s_gapic_client_reads_its_own_job_through_the_job_s_proxy(
    host_runtime: LocalService, staged_trainer: StagedTrainer
) -> None:
    project = f"trainer-grpc-{uuid.uuid4().hex[:8]}"
    base = f"gs://{staged_trainer.bucket}/trainer-grpc/{uuid.uuid4().hex[:8]}"
    jobs = aiplatform(host_runtime.url).projects().locations().customJobs()
    body = {
        "displayName": "vertex-probe",
        "jobSpec": {"workerPoolSpecs": [worker_pool(staged_trainer, "vertex_probe", [f"--job-dir={base}"])]},
    }
    job = jobs.create(parent=f"projects/{project}/locations/{LOCATION}", body=body).execute()

    ended = wait_for_job(jobs, job["name"], {"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED"}, timeout=300)

    report = staged_trainer.read_json(f"{base}/vertex.json")
    assert ended["state"] == "JOB_STATE_SUCCEEDED", ended.get("error")
    assert report.get("name") == job["name"], report
    assert report["state"] == "JOB_STATE_RUNNING"  # its own job, read while it runs
    assert report["listed"] == [job["name"]]

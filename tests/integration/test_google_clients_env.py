"""Google's own clients reach the local service with nothing but ``aip-local env``'s variables.

Each client runs in a process of its own (gRPC reads its proxy and roots once per process) whose
environment is ``PATH``, ``HOME`` and ``aip-local env --data-dir``'s lines: the gapic clients are
built as the Google provider's hooks build them, on ``us-central1-aiplatform.googleapis.com:443``,
and Google's SDK with no ``api_endpoint`` and no ``api_transport`` (gRPC). ``make test`` runs the
sync gapic client once; the SDK's runs (each polls every 5 s, as it does on Google) are in soak.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from airflow_aip.local.store import project_number
from tests.fixtures.google_env import run_client
from tests.fixtures.local_service import LocalService, StagedTrainer, storage_client

pytestmark = pytest.mark.integration


def test_a_gapic_client_creates_reads_lists_cancels_and_deletes_with_only_the_environment(
    local_service: LocalService, staged_trainer: StagedTrainer, tmp_path: Path
) -> None:
    project = f"env-{uuid.uuid4().hex[:8]}"

    done = run_client(local_service, tmp_path, "gapic", project, staged_trainer.package_uri)

    assert done["name"].startswith(f"projects/{project_number(project)}/locations/us-central1/customJobs/")
    assert done["read"] == "env-gapic"
    assert done["listed"] == [done["name"]]
    assert done["cancelled"] == "JOB_STATE_CANCELLED"
    assert done["gone"] is True


@pytest.mark.soak
def test_the_async_gapic_client_does_the_same(
    local_service: LocalService, staged_trainer: StagedTrainer, tmp_path: Path
) -> None:
    project = f"env-async-{uuid.uuid4().hex[:8]}"

    done = run_client(local_service, tmp_path, "gapic_async", project, staged_trainer.package_uri)

    assert done["listed"] == [done["name"]]
    assert done["cancelled"] == "JOB_STATE_CANCELLED"


@pytest.mark.soak
def test_the_sdk_runs_a_custom_job_on_its_default_transport(
    local_service: LocalService, staged_trainer: StagedTrainer, tmp_path: Path
) -> None:
    done = run_client(
        local_service, tmp_path, "sdk_custom_job", staged_trainer.bucket, staged_trainer.package_uri
    )

    assert done["state"] == "JOB_STATE_SUCCEEDED"
    assert done["project"] == "local-project"  # from the key file ADC found
    assert done["name"].startswith(f"projects/{project_number('local-project')}/")


@pytest.mark.soak
def test_the_sdk_runs_a_tuning_job_on_its_default_transport(
    local_service: LocalService, staged_trainer: StagedTrainer, tmp_path: Path
) -> None:
    done = run_client(
        local_service, tmp_path, "sdk_tuning_job", staged_trainer.bucket, staged_trainer.package_uri
    )

    assert done == {"state": "JOB_STATE_SUCCEEDED", "trials": 2}


@pytest.mark.soak
def test_the_sdk_runs_a_package_training_pipeline_on_its_default_transport(
    local_service: LocalService, staged_trainer: StagedTrainer, tmp_path: Path
) -> None:
    done = run_client(
        local_service, tmp_path, "sdk_package_training", staged_trainer.bucket, staged_trainer.package_uri
    )

    assert done == {"state": "PIPELINE_STATE_SUCCEEDED", "model": None}  # no serving image: no model


@pytest.mark.soak
def test_the_sdk_uploads_a_model_on_its_default_transport(
    local_service: LocalService, staged_trainer: StagedTrainer, tmp_path: Path
) -> None:
    folder = f"env-model/{uuid.uuid4().hex[:8]}/"
    storage_client(staged_trainer.gcs_url).bucket(staged_trainer.bucket).blob(
        folder + "model.joblib"
    ).upload_from_string(b"model bytes")

    done = run_client(local_service, tmp_path, "sdk_model_upload", f"gs://{staged_trainer.bucket}/{folder}")

    assert done["version"] == "1"
    assert "default" in done["aliases"]

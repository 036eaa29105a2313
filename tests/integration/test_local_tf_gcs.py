"""TensorFlow's ``gs://`` on the local service reaches the Cloud Storage emulator, never Google.

A real ``tf-cpu.2-15`` job (TensorFlow installed as that image ships it), submitted through
Google's Vertex AI SDK. TensorFlow's file system has Google's endpoints built in and reads no
emulator variable; the job's HTTPS proxy and CA bundle are what route it. Soak: the image's
environment is a ~500 MB download the first time on a machine (then cached per machine), and
this machine has no Python 3.10, so the service allows the mismatch.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fixtures.local_service import LocalService, StagedTrainer, own_service
from tests.fixtures.tools import need_module
from tests.fixtures.vertex import vertex_sdk

pytestmark = [pytest.mark.integration, pytest.mark.soak]
need_module("google.cloud.aiplatform")

TF_IMAGE = "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-15.py310:latest"
tf_service = own_service("tf_service", ["--allow-python-mismatch"])


@pytest.fixture
def tf_sdk(
    tf_service: LocalService, staged_trainer: StagedTrainer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Any]:
    project = f"tf-{uuid.uuid4().hex[:8]}"
    with vertex_sdk(tf_service.url, project, staged_trainer.bucket, monkeypatch) as client:
        yield client


def test_tensorflow_gs_paths_reach_the_emulator(tf_sdk: Any, staged_trainer: StagedTrainer) -> None:
    base = f"gs://{staged_trainer.bucket}/tf/{uuid.uuid4().hex[:8]}"
    job = tf_sdk.CustomJob(
        display_name="tf-gcs",
        worker_pool_specs=[
            {
                "machine_spec": {"machine_type": "n1-standard-4"},
                "replica_count": 1,
                "python_package_spec": {
                    "executor_image_uri": TF_IMAGE,
                    "package_uris": [staged_trainer.package_uri],
                    "python_module": "aip_test_trainer.tf_gcs_probe",
                    "args": [f"--job-dir={base}"],
                },
            }
        ],
        base_output_dir=base,
    )
    job.run(sync=True)
    report = staged_trainer.read_json(f"{base}/tf_gcs.json")
    assert report["version"].startswith("2.15.")
    assert report["listed"] == ["written.txt"]
    assert report["read"] == "written by tf.io.gfile"
    assert staged_trainer.read_text(f"{base}/tf/written.txt") == "written by tf.io.gfile"

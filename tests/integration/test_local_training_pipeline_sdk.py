"""Google's SDK training classes on the local service: ``CustomPythonPackageTrainingJob(...).run()``
and ``CustomTrainingJob(...).run()`` (a script the SDK packages).

``.run()`` creates a TrainingPipeline, polls it until it succeeds and returns the ``Model`` it
uploaded (None without a serving container). The pipeline's CustomJob runs on the service's
executor like any other; the model directory ``{base_output_dir}/model/`` holds a
``model.joblib`` placed there before the run, as a trainer would write it to ``AIP_MODEL_DIR``.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.fixtures.local_service import storage_client
from tests.fixtures.tools import need_module
from tests.fixtures.vertex import IMAGE, wait_for_sdk_state

pytestmark = pytest.mark.integration
aiplatform = need_module("google.cloud.aiplatform")
SKLEARN = "us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-6:latest"


def _job(world: SimpleNamespace, **serving: Any) -> Any:
    return world.sdk.CustomPythonPackageTrainingJob(
        display_name="iris-train",
        python_package_gcs_uri=world.trainer.package_uri,
        python_module_name="aip_test_trainer.succeed",
        container_uri=IMAGE,
        **serving,
    )


def test_run_trains_and_returns_the_uploaded_model(world: SimpleNamespace) -> None:
    job = _job(world, model_serving_container_image_uri=SKLEARN)

    model = job.run(
        base_output_dir=world.base,
        machine_type="n1-standard-4",
        replica_count=1,
        args=[f"--job-dir={world.base}"],
        model_display_name="iris",
        model_labels={"team": "fraud"},
    )

    assert job.state.name == "PIPELINE_STATE_SUCCEEDED"
    assert isinstance(model, world.sdk.Model)
    assert (model.display_name, model.version_id, model.uri) == ("iris", "1", f"{world.base}model/")
    assert model.labels == {"team": "fraud"}
    backing = job.gca_resource.training_task_metadata["backingCustomJob"]
    custom_job = world.sdk.CustomJob.get(backing)
    assert custom_job.state.name == "JOB_STATE_SUCCEEDED"
    report = storage_client(world.trainer.gcs_url).bucket(world.trainer.bucket)
    assert report.blob(f"{world.base.split('/', 3)[3]}report.json").exists()  # the trainer ran


def test_run_without_a_serving_container_succeeds_with_no_model(world: SimpleNamespace) -> None:
    job = _job(world)

    model = job.run(
        base_output_dir=world.base,
        machine_type="n1-standard-4",
        replica_count=1,
        args=[f"--job-dir={world.base}"],
    )

    assert model is None
    assert job.state.name == "PIPELINE_STATE_SUCCEEDED"


def test_a_failed_import_fails_the_pipeline_with_its_reason(world: SimpleNamespace) -> None:
    empty = world.base.rstrip("/") + "-empty/"
    job = _job(world, model_serving_container_image_uri=SKLEARN)

    with pytest.raises(RuntimeError, match=r"exactly one of: \[model.joblib, model.pkl\]"):
        job.run(
            base_output_dir=empty, machine_type="n1-standard-4", replica_count=1, args=[f"--job-dir={empty}"]
        )
    assert job.state.name == "PIPELINE_STATE_FAILED"


def test_a_script_training_job_runs_the_script_it_packaged(world: SimpleNamespace, tmp_path: Path) -> None:
    script = tmp_path / "task.py"
    script.write_text("import os\nprint('trained; model dir', os.environ['AIP_MODEL_DIR'])\n")
    job = world.sdk.CustomTrainingJob(
        display_name="script-train",
        script_path=str(script),
        container_uri=IMAGE,
        model_serving_container_image_uri=SKLEARN,
    )

    model = job.run(base_output_dir=world.base, machine_type="n1-standard-4", replica_count=1)

    assert job.state.name == "PIPELINE_STATE_SUCCEEDED"
    assert model.uri == f"{world.base}model/"


def test_a_model_id_taken_by_then_fails_the_pipeline_naming_it(world: SimpleNamespace) -> None:
    model_id = f"taken-{uuid.uuid4().hex[:6]}"
    world.sdk.Model.upload(
        display_name="first",
        artifact_uri=f"{world.base}model/",
        serving_container_image_uri=SKLEARN,
        model_id=model_id,
    )
    job = _job(world, model_serving_container_image_uri=SKLEARN)

    with pytest.raises(RuntimeError, match=f"Model with ID {model_id} already exists"):
        job.run(
            base_output_dir=world.base,
            machine_type="n1-standard-4",
            replica_count=1,
            args=[f"--job-dir={world.base}"],
            model_id=model_id,
        )
    assert job.state.name == "PIPELINE_STATE_FAILED"


def test_list_finds_a_pipeline_and_delete_removes_it(world: SimpleNamespace) -> None:
    from google.api_core import exceptions

    job = _job(world)
    job.run(
        base_output_dir=world.base,
        machine_type="n1-standard-4",
        replica_count=1,
        args=[f"--job-dir={world.base}"],
    )
    other = _job(world)
    other.run(
        base_output_dir=world.base,
        machine_type="n1-standard-4",
        replica_count=1,
        args=[f"--job-dir={world.base}"],
    )
    kind = world.sdk.CustomPythonPackageTrainingJob

    listed = kind.list(filter='display_name="iris-train"', order_by="create_time desc")
    assert [j.resource_name for j in listed] == [other.resource_name, job.resource_name]
    assert kind.list(filter='display_name="iris?train"') == []  # only "*" is a wildcard

    job.delete()

    assert [j.resource_name for j in kind.list()] == [other.resource_name]
    with pytest.raises(exceptions.NotFound):
        kind.get(job.resource_name)


def test_a_running_pipeline_cannot_be_deleted(world: SimpleNamespace, tmp_path: Path) -> None:
    from google.api_core import exceptions

    script = tmp_path / "task.py"
    script.write_text("import time\ntime.sleep(300)\n")
    job = world.sdk.CustomTrainingJob(display_name="sleepy", script_path=str(script), container_uri=IMAGE)
    job.submit(base_output_dir=world.base, machine_type="n1-standard-4", replica_count=1)
    # Only once RUNNING: a cancel while the package environment builds may leave it broken in the cache.
    wait_for_sdk_state(job, {"PIPELINE_STATE_RUNNING"}, timeout=120)
    try:
        # FAILED_PRECONDITION is HTTP 400: the SDK's REST transport raises it as BadRequest.
        with pytest.raises(
            exceptions.BadRequest, match="is in state PIPELINE_STATE_RUNNING and cannot be deleted"
        ):
            job.delete()
    finally:
        job.cancel()

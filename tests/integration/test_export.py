"""ExportArtifactsOperator against the local training service and fake-gcs-server.

The storage side (copy, manifest, reruns, bad input) is the same on both backends: these run on
ml v1 jobs. Export of Vertex AI jobs (``{base}/{trial}/model/``): test_vertex_operators.py.
"""

from __future__ import annotations

import json
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_aip.exceptions import AipError, ValidationError
from airflow_aip.operators import ExportArtifactsOperator
from tests.fixtures.local_service import LocalService, StagedTrainer, storage_client, wait_for_state

pytestmark = pytest.mark.integration
PROJECT = "export-project"


def _context() -> Any:
    ti = SimpleNamespace(dag_id="d", task_id="export", run_id="manual__1", try_number=1)
    return {"ti": ti}


def _finished_job(service: LocalService, trainer: StagedTrainer, module: str = "succeed") -> dict[str, Any]:
    job_id = f"export_{module}_{uuid.uuid4().hex[:8]}"
    body = {"jobId": job_id, "trainingInput": trainer.training_input(module)}
    ml = service.ml()
    ml.projects().jobs().create(parent=f"projects/{PROJECT}", body=body).execute()
    return wait_for_state(ml, f"projects/{PROJECT}/jobs/{job_id}", {"SUCCEEDED", "FAILED", "CANCELLED"})


def _export(job_id: str, destination: str, **kwargs: Any) -> dict[str, Any]:
    op = ExportArtifactsOperator(
        task_id="export",
        project_id=PROJECT,
        job_id=job_id,
        destination_uri=destination,
        backend="ai_platform",
        **kwargs,
    )
    result: dict[str, Any] = op.execute(_context())
    return result


def test_export_copies_then_a_rerun_rewrites_nothing(
    local_env: LocalService, staged_trainer: StagedTrainer
) -> None:
    job = _finished_job(local_env, staged_trainer)
    assert job["state"] == "SUCCEEDED"
    destination = f"gs://{staged_trainer.bucket}/models/{uuid.uuid4().hex[:6]}"
    first = _export(job["jobId"], destination)
    assert first["exported"] is True
    assert first["objects"] >= 1
    assert first["copied_bytes"] == first["bytes"] > 0
    bucket = storage_client(staged_trainer.gcs_url).bucket(staged_trainer.bucket)
    manifest_name = first["manifest_uri"].split("/", 3)[3]
    manifest = json.loads(bucket.blob(manifest_name).download_as_bytes())
    assert manifest["job_id"] == job["jobId"]
    assert manifest["source_uri"] == job["trainingInput"]["jobDir"]
    assert {o["name"] for o in manifest["objects"]} >= {"report.json"}
    assert manifest["packages"][0]["uri"] == staged_trainer.package_uri
    assert manifest["packages"][0]["md5_hash"]
    assert manifest["airflow"] == {"dag_id": "d", "task_id": "export", "run_id": "manual__1", "try_number": 1}
    generation = bucket.get_blob(manifest_name).generation

    again = _export(job["jobId"], destination)
    assert again["copied_bytes"] == 0
    assert again["destination"] == first["destination"]
    assert bucket.get_blob(manifest_name).generation == generation


def test_a_model_with_nested_manifests_is_exported_whole(
    local_env: LocalService, staged_trainer: StagedTrainer
) -> None:
    """Only the root ``manifest.json`` is the export's own; one deeper down is part of the model."""
    job = _finished_job(local_env, staged_trainer)
    bucket = storage_client(staged_trainer.gcs_url).bucket(staged_trainer.bucket)
    source = job["trainingInput"]["jobDir"].split("/", 3)[3].rstrip("/")
    model_files = {
        "saved_model/manifest.json": b'{"format": "keras"}',
        "tokenizer/vocab/manifest.json": b'{"tokens": 3}',
        "saved_model/weights.bin": b"\x00\x01",
    }
    for name, data in model_files.items():
        bucket.blob(f"{source}/{name}").upload_from_string(data)
    bucket.blob(f"{source}/manifest.json").upload_from_string(b'{"stale": "a previous export"}')
    in_source = {b.name[len(source) + 1 :] for b in bucket.list_blobs(prefix=source + "/")}
    destination = f"gs://{staged_trainer.bucket}/models/{uuid.uuid4().hex[:6]}"

    result = _export(job["jobId"], destination)

    dest_prefix = result["destination"].split("/", 3)[3].rstrip("/")
    exported = {b.name[len(dest_prefix) + 1 :] for b in bucket.list_blobs(prefix=dest_prefix + "/")}
    assert exported == in_source  # everything, nested manifests included; the root one is ours
    for name, data in model_files.items():
        assert bucket.blob(f"{dest_prefix}/{name}").download_as_bytes() == data
    manifest = json.loads(bucket.blob(f"{dest_prefix}/manifest.json").download_as_bytes())
    assert manifest["job_id"] == job["jobId"]
    assert {o["name"] for o in manifest["objects"]} == in_source - {"manifest.json"}
    assert result["objects"] == len(in_source) - 1


def test_missing_source_is_a_clear_error_and_writes_nothing(
    local_env: LocalService, staged_trainer: StagedTrainer
) -> None:
    job = _finished_job(local_env, staged_trainer)
    destination = f"gs://{staged_trainer.bucket}/models/{uuid.uuid4().hex[:6]}"
    with pytest.raises(AipError, match="Nothing to export: no object below"):
        _export(job["jobId"], destination, source_subdir="no_such_dir")
    bucket = storage_client(staged_trainer.gcs_url).bucket(staged_trainer.bucket)
    assert not list(bucket.list_blobs(prefix=destination.split("/", 3)[3]))


def test_failed_job_is_refused(local_env: LocalService, staged_trainer: StagedTrainer) -> None:
    job = _finished_job(local_env, staged_trainer, "fail")
    assert job["state"] == "FAILED"
    with pytest.raises(ValidationError, match=f"job {job['jobId']} is FAILED"):
        _export(job["jobId"], f"gs://{staged_trainer.bucket}/models/x")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"destination_uri": "s3://bucket/models"}, "destination_uri"),
        ({"destination_uri": "gs://UPPER/models"}, "destination_uri"),
        ({"champion_manifest_uri": "gs://bucket-ok"}, "champion_manifest_uri"),
        ({"job_id": "1starts_with_digit"}, "job_id"),
    ],
)
def test_bad_input_fails_before_any_request(kwargs: dict[str, Any], field: str) -> None:
    _refused_before_any_request(field, **kwargs)


def test_impersonation_chain_reaches_both_hooks() -> None:
    op = ExportArtifactsOperator(
        task_id="export", job_id="j", destination_uri="gs://b/m", impersonation_chain=["a@p.iam", "b@p.iam"]
    )
    assert "impersonation_chain" in op.template_fields
    assert op.hook.impersonation_chain == op.storage.impersonation_chain
    assert op.storage.impersonation_chain is not None
    assert list(op.storage.impersonation_chain) == ["a@p.iam", "b@p.iam"]


@pytest.mark.parametrize("field", ["source_subdir", "metrics_file"])
def test_escaping_paths_fail_before_any_request(field: str) -> None:
    _refused_before_any_request(field, **{field: "../elsewhere"})


def _refused_before_any_request(field: str, **kwargs: Any) -> None:
    """An export of ``kwargs`` over a good job and destination fails on ``field``; the endpoint
    is one nothing answers on (port 9), so it fails before any request."""
    args = {"job_id": "some_job", "destination_uri": "gs://bucket-ok/models", **kwargs}
    op = ExportArtifactsOperator(
        task_id="export",
        project_id=PROJECT,
        api_endpoint="http://127.0.0.1:9/",
        backend="ai_platform",
        **args,
    )
    with pytest.raises(ValidationError, match=field):
        op.execute(_context())

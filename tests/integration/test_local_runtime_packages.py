"""A runtime that holds what Google's holds: an AI Platform-era trainer runs on both backends.

The trainer here declares no dependency at all, as Google's own samples do, and imports what
Google's runtimes ship (``google.cloud.storage``, pandas, NumPy, SciPy, scikit-learn,
cloudml-hypertune). It succeeds on the Vertex AI face through Google's SDK, with the versions
the image's published list pins, and on the ml v1 face through the googleapiclient. A trainer
importing what no Google runtime ships still fails, as on Google; an image past its end of
availability is refused at create, naming the field.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from airflow_aip.packaging import build_sdist
from tests.fixtures.local_service import (
    LocalService,
    StagedTrainer,
    ml_client,
    storage_client,
    wait_for_state,
)
from tests.fixtures.vertex import IMAGE

pytestmark = pytest.mark.integration

# Imports what AI Platform's runtimes and the sklearn image ship, declares none of it, and writes
# what it found to Cloud Storage through google-cloud-storage (STORAGE_EMULATOR_HOST, set by the
# service for the trainer).
AI_PLATFORM_TRAINER = """\
import json, sys, warnings
from importlib import metadata

with warnings.catch_warnings(record=True) as caught:  # what Python would print at import
    warnings.simplefilter("always")
    import hypertune
    import numpy
    import pandas
    import scipy
    import sklearn
    from google.cloud import storage
    import google.auth.transport.grpc
future = sorted({str(w.message)[:80] for w in caught if issubclass(w.category, FutureWarning)})

out = sys.argv[sys.argv.index("--report") + 1]
bucket, _, name = out[len("gs://"):].partition("/")
names = ("google-cloud-storage", "pandas", "numpy", "scipy", "scikit-learn", "google-auth", "google-api-core")
versions = {d: metadata.version(d) for d in names}
frame = pandas.DataFrame({"x": numpy.arange(3)})
report = {"versions": versions, "sum": int(frame["x"].sum()), "python": "%d.%d" % sys.version_info[:2]}
report["future_warnings"] = future
storage.Client().bucket(bucket).blob(name).upload_from_string(json.dumps(report))
hypertune.HyperTune().report_hyperparameter_tuning_metric(hyperparameter_metric_tag="sum", metric_value=3)
print("wrote", out)
"""
# No Google runtime ships `emoji`.
FOREIGN_TRAINER = "import emoji\n\nprint(emoji.emojize(':thumbs_up:'))\n"


def _package(tmp: Path, trainer: StagedTrainer, name: str, source: str) -> str:
    """A one-module package ``<name>.task`` declaring no dependency, staged on the emulator."""
    root = tmp / name
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text("")
    (root / name / "task.py").write_text(source)
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
        f'[project]\nname = "{name}"\nversion = "0.1.0"\ndependencies = []\n\n'
        f'[tool.setuptools]\npackages = ["{name}"]\n'
    )
    built = build_sdist(root / name, tmp / f"{name}-dist")
    blob = f"probes/{uuid.uuid4().hex[:8]}/{built.path.name}"
    storage_client(trainer.gcs_url).bucket(trainer.bucket).blob(blob).upload_from_filename(str(built.path))
    return f"gs://{trainer.bucket}/{blob}"


def _custom_job(sdk: Any, package_uri: str, module: str, args: list[str], image: str = IMAGE) -> Any:
    pool = {
        "machine_spec": {"machine_type": "n1-standard-4"},
        "replica_count": 1,
        "python_package_spec": {
            "executor_image_uri": image,
            "package_uris": [package_uri],
            "python_module": module,
            "args": args,
        },
    }
    return sdk.CustomJob(display_name="ai-platform-era", worker_pool_specs=[pool])


def test_an_undeclared_google_cloud_storage_import_succeeds_on_vertex_with_the_images_versions(
    sdk: Any, staged_trainer: StagedTrainer, tmp_path: Path
) -> None:
    package = _package(tmp_path, staged_trainer, "aipera", AI_PLATFORM_TRAINER)
    report = f"gs://{staged_trainer.bucket}/reports/{uuid.uuid4().hex[:8]}.json"
    job = _custom_job(sdk, package, "aipera.task", ["--report", report])
    job.run(sync=True)
    assert job.state.name == "JOB_STATE_SUCCEEDED"
    found = staged_trainer.read_json(report)
    assert found["sum"] == 3
    # sklearn-cpu.1-6's "Included dependencies", as Google lists them.
    assert found["versions"] == {
        "google-cloud-storage": "2.19.0",
        "pandas": "2.2.3",
        "numpy": "1.26.4",
        "scipy": "1.15.2",
        "scikit-learn": "1.6.1",
        # not listed: the releases of the image's time (image_packages.py), which warn of nothing
        "google-auth": "2.38.0",
        "google-api-core": "2.24.1",
    }
    assert found["future_warnings"] == []  # issue 52: 4 WARNING lines a trial the image never prints


def test_an_undeclared_google_cloud_storage_import_succeeds_on_ml_v1(
    local_service: LocalService, staged_trainer: StagedTrainer, tmp_path: Path
) -> None:
    package = _package(tmp_path, staged_trainer, "aiperaml", AI_PLATFORM_TRAINER)
    report = f"gs://{staged_trainer.bucket}/reports/{uuid.uuid4().hex[:8]}.json"
    body = staged_trainer.training_input("unused", ["--report", report])
    body.update(packageUris=[package], pythonModule="aiperaml.task")
    ml = ml_client(local_service.url)
    job_id = f"ai_platform_era_{uuid.uuid4().hex[:8]}"
    ml.projects().jobs().create(parent="projects/p", body={"jobId": job_id, "trainingInput": body}).execute()
    job = wait_for_state(ml, f"projects/p/jobs/{job_id}", {"SUCCEEDED", "FAILED", "CANCELLED"})
    assert job["state"] == "SUCCEEDED", job.get("errorMessage")
    found = staged_trainer.read_json(report)
    assert found["sum"] == 3
    reported = {"google-cloud-storage", "pandas", "numpy", "scipy", "scikit-learn", "google-auth"}
    assert set(found["versions"]) == {*reported, "google-api-core"}


def test_an_import_no_google_runtime_ships_still_fails(
    sdk: Any, staged_trainer: StagedTrainer, tmp_path: Path
) -> None:
    package = _package(tmp_path, staged_trainer, "foreign", FOREIGN_TRAINER)
    job = _custom_job(sdk, package, "foreign.task", [])
    with pytest.raises(RuntimeError, match="workerpool0-0 exited with a non-zero status of 1"):
        job.run(sync=True)
    assert "ModuleNotFoundError: No module named 'emoji'" in job.error.message


def test_an_image_past_its_end_of_availability_is_refused_at_create(
    sdk: Any, staged_trainer: StagedTrainer
) -> None:
    from google.api_core.exceptions import BadRequest

    retired = "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-8:latest"
    job = _custom_job(sdk, staged_trainer.package_uri, "aip_test_trainer.succeed", [], image=retired)
    with pytest.raises(BadRequest) as refused:
        job.run(sync=True)
    message = str(refused.value)
    assert refused.value.code == 400
    fields = (
        "workerPoolSpecs[0].pythonPackageSpec.executorImageUri",
        "worker_pool_specs[0].python_package_spec",
    )
    assert any(field in message for field in fields)
    assert "tf-cpu.2-8 is past its end of availability" in message

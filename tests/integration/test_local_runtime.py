"""A trainer's runtime on the local service is the container's: driven by Google's Vertex AI SDK.

Each job runs in an environment of its ``executorImageUri``'s Python and framework plus its own
declared packages, never the service's; Cloud Storage is mounted at ``/gcs/``; a tuning job's
``scheduling.timeout`` is each trial's.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_aip.local.executor.gcs_mount import mount_unavailable
from airflow_aip.local.executor.interpreters import find_python
from airflow_aip.packaging import build_sdist
from tests.fixtures.local_service import StagedTrainer, storage_client
from tests.fixtures.tools import GCS_MOUNT, GCS_MOUNT_INSTALL, missing
from tests.fixtures.vertex import IMAGE, sdk_pools

pytestmark = pytest.mark.integration


def _upload(trainer: StagedTrainer, name: str, data: bytes | str) -> str:
    storage_client(trainer.gcs_url).bucket(trainer.bucket).blob(name).upload_from_string(data)
    return f"gs://{trainer.bucket}/{name}"


def _probe_package(tmp: Path, trainer: StagedTrainer, *, declares_yaml: bool) -> str:
    """A one-module trainer importing PyYAML, which the sklearn image does not ship."""
    name = f"yaml-probe-{'declared' if declares_yaml else 'undeclared'}"
    root = tmp / name
    (root / "yamlprobe").mkdir(parents=True)
    (root / "yamlprobe" / "__init__.py").write_text("")
    (root / "yamlprobe" / "task.py").write_text("import yaml\n\nprint('PyYAML', yaml.__version__)\n")
    dependencies = '["pyyaml"]' if declares_yaml else "[]"
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
        f'[project]\nname = "{name}"\nversion = "0.1.0"\ndependencies = {dependencies}\n\n'
        '[tool.setuptools]\npackages = ["yamlprobe"]\n'
    )
    built = build_sdist(root / "yamlprobe", tmp / f"{name}-dist")
    return _upload(trainer, f"probes/{uuid.uuid4().hex[:8]}/{built.path.name}", built.path.read_bytes())


def _yaml_job(sdk: Any, package_uri: str) -> Any:
    pool = {
        "machine_spec": {"machine_type": "n1-standard-4"},
        "replica_count": 1,
        "python_package_spec": {
            "executor_image_uri": IMAGE,
            "package_uris": [package_uri],
            "python_module": "yamlprobe.task",
        },
    }
    return sdk.CustomJob(display_name="yaml-probe", worker_pool_specs=[pool])


def test_an_undeclared_import_fails_as_on_vertex_and_declaring_it_succeeds(
    sdk: Any, staged_trainer: StagedTrainer, tmp_path: Path
) -> None:
    undeclared = _yaml_job(sdk, _probe_package(tmp_path, staged_trainer, declares_yaml=False))
    with pytest.raises(RuntimeError, match="workerpool0-0 exited with a non-zero status of 1"):
        undeclared.run(sync=True)
    assert undeclared.state.name == "JOB_STATE_FAILED"
    assert "ModuleNotFoundError: No module named 'yaml'" in undeclared.error.message
    declared = _yaml_job(sdk, _probe_package(tmp_path, staged_trainer, declares_yaml=True))
    declared.run(sync=True)
    assert declared.state.name == "JOB_STATE_SUCCEEDED"


def test_a_trainer_gets_the_images_python_only_its_packages_and_gcs_mounted(
    sdk: Any, staged_trainer: StagedTrainer
) -> None:
    if reason := mount_unavailable():
        missing(GCS_MOUNT, GCS_MOUNT_INSTALL, reason)
    prefix = f"runtime/{uuid.uuid4().hex[:8]}"
    _upload(staged_trainer, f"{prefix}/in.txt", "read through /gcs/")
    gcs = f"/gcs/{staged_trainer.bucket}/{prefix}"
    args = [f"--read={gcs}/in.txt", f"--write={gcs}/out/report.json"]
    job = sdk.CustomJob(
        display_name="probe", worker_pool_specs=sdk_pools(staged_trainer, "runtime_probe", args)
    )
    job.run(sync=True)
    assert job.state.name == "JOB_STATE_SUCCEEDED"
    report = staged_trainer.read_json(f"gs://{staged_trainer.bucket}/{prefix}/out/report.json")
    assert report["read"] == "read through /gcs/"
    # sklearn-cpu.1-6 is a Python 3.10 image; the log says so where this machine has no 3.10.
    if find_python("3.10") is not None:
        assert report["python"] == "3.10"
    assert report["visible"] == {
        "airflow": False,
        "airflow_aip": False,
        "fastapi": False,
        "optuna": False,
        "google.cloud.storage": True,
        "hypertune": True,
    }
    assert report["variables"] == {"GOOGLE_CLOUD_PROJECT": None, "AIP_JOB_NAME": None}


def _timed_tuning(sdk: Any, trainer: StagedTrainer, hold: int, timeout: int, x: Any, trials: int) -> Any:
    """A one-at-a-time tuning job whose trials hold ``hold`` s under a ``timeout`` s trial timeout."""
    trial_job = sdk.CustomJob(
        display_name="timed-trial",
        worker_pool_specs=sdk_pools(trainer, "tune", ["--metric-tag=score", f"--hold={hold}"]),
    )
    trial_job.job_spec.scheduling.timeout = timedelta(seconds=timeout)
    return sdk.HyperparameterTuningJob(
        display_name="timed-trials",
        custom_job=trial_job,
        metric_spec={"score": "maximize"},
        parameter_spec={"x": x},
        max_trial_count=trials,
        parallel_trial_count=1,
    )


def test_a_tuning_jobs_timeout_is_each_trials(sdk: Any, staged_trainer: StagedTrainer) -> None:
    """Three 3 s trials one after another under a 5 s timeout: 9 s in all, and every trial succeeds."""
    from google.cloud.aiplatform import hyperparameter_tuning as hpt

    x = hpt.DiscreteParameterSpec(values=[1, 2, 4], scale="linear")
    tuning = _timed_tuning(sdk, staged_trainer, hold=3, timeout=5, x=x, trials=3)
    tuning.run(sync=True)
    assert tuning.state.name == "JOB_STATE_SUCCEEDED"
    assert [t.state.name for t in tuning.trials] == ["SUCCEEDED"] * 3
    assert {t.parameters[0].value for t in tuning.trials} <= {1.0, 2.0, 4.0}


def test_a_trial_over_its_timeout_fails_and_the_job_says_why(sdk: Any, staged_trainer: StagedTrainer) -> None:
    from google.cloud.aiplatform import hyperparameter_tuning as hpt

    x = hpt.DoubleParameterSpec(min=1, max=5, scale="linear")
    tuning = _timed_tuning(sdk, staged_trainer, hold=30, timeout=1, x=x, trials=1)
    with pytest.raises(RuntimeError, match=r"trialJobSpec.scheduling.timeout \(1s\)"):
        tuning.run(sync=True)
    assert [t.state.name for t in tuning.trials] == ["INFEASIBLE"]

"""apache-airflow-providers-google's Vertex AI training operators against the local service.

What docs/vertex-migration.md claims for users of that provider, checked: its
``CreateCustomPythonPackageTrainingJobOperator`` and ``CreateHyperparameterTuningJobOperator``
build google-cloud-aiplatform's own job classes, whose clients come from ``aiplatform.init``'s
process-wide ``api_endpoint`` and ``api_transport``; with those pointing at the local service (REST)
and an anonymous connection (``is_anonymous``), they run here unchanged. Its Get/List/Delete
operators build gapic clients on ``{region}-aiplatform.googleapis.com:443`` themselves, so they
cannot; that is read from the provider's source, not tested.

The provider is not a dependency of this project (1.8 GB with its dependencies): ``make test-soak``
runs this module alone in the provider's own environment (``make google-env``, ``.venv-google``),
and every other run leaves it out. Without the provider it skips, and under CI it fails.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fixtures.local_service import LocalService, StagedTrainer
from tests.fixtures.tools import need_module
from tests.fixtures.vertex import IMAGE, LOCATION, sdk_pools

pytestmark = [pytest.mark.integration, pytest.mark.soak]
# Only `make test-soak` runs this module, in the provider's own environment (`make google-env`).
GOOGLE_ENV = "make google-env (.venv-google: the provider and this package, 1.8 GB)"
custom_job = need_module("airflow.providers.google.cloud.operators.vertex_ai.custom_job", GOOGLE_ENV)
tuning_job = need_module(
    "airflow.providers.google.cloud.operators.vertex_ai.hyperparameter_tuning_job", GOOGLE_ENV
)


class _TaskInstance:
    """What the operators touch of ``context["ti"]``: XCom pushes, kept."""

    def __init__(self) -> None:
        self.pushed: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


@pytest.fixture
def provider(local_service: LocalService, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The provider's default connection anonymous, and the SDK pointed at the service exactly as
    docs/google-vertex-operators.md says (nothing else of the SDK's configuration set)."""
    monkeypatch.setenv(
        "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT",
        '{"conn_type": "google_cloud_platform", "extra": {"is_anonymous": true}}',
    )
    monkeypatch.setenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM", local_service.url)
    from google.cloud import aiplatform
    from google.cloud.aiplatform import initializer, jobs, training_jobs

    for module in (jobs, training_jobs):  # the SDK's 5 s polls, shortened
        monkeypatch.setattr(module, "_JOB_WAIT_TIME", 0.2)
    # The process-wide configuration as a fresh process has it (aiplatform.init is bound to this
    # object), and as it was after the test.
    state = vars(initializer.global_config)
    saved = dict(state)
    state.clear()
    state.update(vars(initializer._Config()))
    try:
        if endpoint := os.environ.get("CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM"):  # the guide's snippet
            aiplatform.init(api_endpoint=endpoint.rstrip("/"), api_transport="rest")
        yield f"provider-{uuid.uuid4().hex[:8]}"
    finally:
        state.clear()
        state.update(saved)


def _context() -> dict[str, Any]:
    ti = _TaskInstance()
    return {"ti": ti, "task_instance": ti}


def test_the_python_package_training_operator_runs_its_pipeline_here(
    provider: str, staged_trainer: StagedTrainer
) -> None:
    base = f"gs://{staged_trainer.bucket}/provider/{uuid.uuid4().hex[:8]}/"
    operator = custom_job.CreateCustomPythonPackageTrainingJobOperator(
        task_id="train",
        project_id=provider,
        region=LOCATION,
        display_name="provider-train",
        python_package_gcs_uri=staged_trainer.package_uri,
        python_module_name="aip_test_trainer.succeed",
        container_uri=IMAGE,
        base_output_dir=base,
        args=[f"--job-dir={base}"],
        staging_bucket=f"gs://{staged_trainer.bucket}",
        replica_count=1,
        machine_type="n1-standard-4",
    )
    context = _context()

    assert operator.execute(context) is None  # no serving container: no model

    pushed = context["ti"].pushed
    assert pushed["training_id"].isdigit()
    assert pushed["custom_job_id"].isdigit()
    assert staged_trainer.read_json(base + "report.json")["AIP_MODEL_DIR"] == base + "model/"


def test_the_tuning_operator_runs_its_trials_here(provider: str, staged_trainer: StagedTrainer) -> None:
    from google.cloud.aiplatform import hyperparameter_tuning as hpt

    operator = tuning_job.CreateHyperparameterTuningJobOperator(
        task_id="tune",
        project_id=provider,
        region=LOCATION,
        display_name="provider-tune",
        worker_pool_specs=sdk_pools(staged_trainer, "tune", ["--metric-tag=score"]),
        metric_spec={"score": "maximize"},
        parameter_spec={"x": hpt.DoubleParameterSpec(min=1, max=5, scale="linear")},
        max_trial_count=2,
        parallel_trial_count=1,
        staging_bucket=f"gs://{staged_trainer.bucket}",
    )

    job = operator.execute(_context())

    assert job["state"] in ("JOB_STATE_SUCCEEDED", 4)
    assert len(job["trials"]) == 2

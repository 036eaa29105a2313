"""Google's own Vertex AI SDK (google-cloud-aiplatform, REST transport) against the local service.

Nobody here wrote that client: if it creates, polls, parses, lists and cancels our jobs, Google's
other clients will too. It is pointed at plain http on loopback with ``api_endpoint="http://..."``
(its REST transport keeps a scheme it is given) and anonymous credentials.

The SDK polls a job every ``aiplatform.jobs._JOB_WAIT_TIME`` (5 s) in ``run(sync=True)``; the
tests shorten that module setting so they do not sleep, nothing else of the SDK is touched.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.fixtures.local_service import StagedTrainer
from tests.fixtures.tools import need_module
from tests.fixtures.vertex import VERTEX_TERMINAL, sdk_pools, wait_for_sdk_state

pytestmark = pytest.mark.integration
aiplatform = need_module("google.cloud.aiplatform")


def test_sdk_runs_a_custom_job_to_success(sdk: Any, staged_trainer: StagedTrainer) -> None:
    base = f"gs://{staged_trainer.bucket}/sdk/{uuid.uuid4().hex[:8]}"
    job = sdk.CustomJob(
        display_name="sdk-ok",
        worker_pool_specs=sdk_pools(staged_trainer, "succeed", [f"--job-dir={base}"]),
        base_output_dir=base,
        labels={"suite": "sdk"},
    )
    job.run(sync=True)
    assert job.state.name == "JOB_STATE_SUCCEEDED"
    assert job.resource_name.split("/")[-1].isdigit()
    assert job.end_time >= job.start_time
    assert staged_trainer.read_json(base + "/report.json")["AIP_MODEL_DIR"] == base + "/model/"


def test_sdk_sees_a_failing_job_fail(sdk: Any, staged_trainer: StagedTrainer) -> None:
    job = sdk.CustomJob(display_name="sdk-bad", worker_pool_specs=sdk_pools(staged_trainer, "fail", []))
    with pytest.raises(RuntimeError, match="workerpool0-0 exited with a non-zero status of 3"):
        job.run(sync=True)
    assert job.state.name == "JOB_STATE_FAILED"
    assert job.error.code == 3


def test_sdk_cancels_and_lists_by_label(sdk: Any, staged_trainer: StagedTrainer) -> None:
    label = uuid.uuid4().hex[:8]
    job = sdk.CustomJob(
        display_name="sdk-sleep",
        worker_pool_specs=sdk_pools(staged_trainer, "sleep", []),
        labels={"run": label},
    )
    job.submit()
    other = sdk.CustomJob(
        display_name="sdk-other", worker_pool_specs=sdk_pools(staged_trainer, "fail", []), labels={"run": "x"}
    )
    other.submit()
    listed = sdk.CustomJob.list(filter=f'labels.run="{label}"')
    assert [j.resource_name for j in listed] == [job.resource_name]
    job.cancel()
    wait_for_sdk_state(job, VERTEX_TERMINAL, timeout=60)
    assert job.state.name == "JOB_STATE_CANCELLED"
    assert job.error.code == 1


def test_sdk_runs_a_tuning_job_with_trials(sdk: Any, staged_trainer: StagedTrainer) -> None:
    from google.cloud.aiplatform import hyperparameter_tuning as hpt

    base = f"gs://{staged_trainer.bucket}/sdk-hpt/{uuid.uuid4().hex[:8]}"
    trial_job = sdk.CustomJob(
        display_name="sdk-trial",
        worker_pool_specs=sdk_pools(staged_trainer, "tune", ["--metric-tag=score"]),
        base_output_dir=base,
    )
    tuning = sdk.HyperparameterTuningJob(
        display_name="sdk-hpt",
        custom_job=trial_job,
        metric_spec={"score": "maximize"},
        parameter_spec={
            "x": hpt.DoubleParameterSpec(min=1, max=5, scale="linear"),
            "kind": hpt.CategoricalParameterSpec(values=["good", "bad"]),
        },
        max_trial_count=4,
        parallel_trial_count=2,
    )
    tuning.run(sync=True)
    assert tuning.state.name == "JOB_STATE_SUCCEEDED"
    trials = tuning.trials
    assert len(trials) == 4
    assert {t.state.name for t in trials} == {"SUCCEEDED"}
    for trial in trials:
        assert {p.parameter_id for p in trial.parameters} == {"x", "kind"}
        assert trial.final_measurement.metrics[0].metric_id == "score"
        assert trial.final_measurement.step_count == 300

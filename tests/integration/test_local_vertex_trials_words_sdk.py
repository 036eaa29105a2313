"""Trials and errors as Vertex AI has them, seen through Google's own SDK (google-cloud-aiplatform).

Trials: each trial's ``CLOUD_ML_JOB_ID`` is its own CustomJob's (``Trial.customJob``), a trainer
that writes ``/tmp/hypertune/output.metrics`` itself is read, replica by replica, and the rules
for failed and cancelled trials. Words: 400s as Google writes them, a failed job's message with
only its traceback and a link to its logs, and 501 UNIMPLEMENTED for a method we do not serve.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from airflow_aip.local.executor.private_tmp import private_tmp_unavailable
from tests.fixtures.local_service import LocalService, StagedTrainer
from tests.fixtures.tools import MOUNT_NAMESPACE, MOUNT_NAMESPACE_INSTALL, missing, need_module
from tests.fixtures.vertex import IMAGE, LOCATION, VERTEX_TERMINAL, sdk_pools, wait_for_sdk_state
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.integration
aiplatform = need_module("google.cloud.aiplatform")


@pytest.fixture
def private_tmp() -> None:
    """The test needs each replica's private /tmp (a mount namespace)."""
    if reason := private_tmp_unavailable():
        missing(MOUNT_NAMESPACE, MOUNT_NAMESPACE_INSTALL, reason)


def _tuning(sdk: Any, trainer: StagedTrainer, args: list[str], **counts: int) -> tuple[Any, str]:
    from google.cloud.aiplatform import hyperparameter_tuning as hpt

    base = f"gs://{trainer.bucket}/trials/{uuid.uuid4().hex[:8]}"
    trial_job = sdk.CustomJob(
        display_name="trial",
        worker_pool_specs=sdk_pools(trainer, "direct_metric", args),
        base_output_dir=base,
    )
    tuning = sdk.HyperparameterTuningJob(
        display_name="hpt",
        custom_job=trial_job,
        metric_spec={"score": "maximize"},
        parameter_spec={"x": hpt.DiscreteParameterSpec(values=[1, 2, 3, 4], scale="linear")},
        search_algorithm="grid",
        **counts,
    )
    return tuning, base


@pytest.mark.usefixtures("private_tmp")
def test_trials_have_their_own_job_id_and_a_private_default_metric_file(
    sdk: Any, staged_trainer: StagedTrainer
) -> None:
    args = ["--metric-tag=score", "--hold=1.5", "--report"]
    tuning, base = _tuning(sdk, staged_trainer, args, max_trial_count=4, parallel_trial_count=4)
    tuning.run(sync=True)

    assert tuning.state.name == "JOB_STATE_SUCCEEDED"
    tuning_id = tuning.resource_name.rsplit("/", 1)[1]
    seen_ids = set()
    for trial in tuning.trials:
        assert trial.state.name == "SUCCEEDED"
        x = trial.parameters[0].value
        # Its own file, though four trials wrote /tmp/hypertune/output.metrics at once.
        assert trial.final_measurement.metrics[0].value == -((x - 3) ** 2)
        assert trial.final_measurement.step_count == 7
        report = staged_trainer.read_json(f"{base}/{trial.id}/model/report.json")
        own_id = trial.custom_job.rsplit("/", 1)[1]
        assert report["CLOUD_ML_JOB_ID"] == own_id != tuning_id
        assert report["CLOUD_ML_TRIAL_ID"] == trial.id
        assert report["CLOUD_ML_HP_METRIC_FILE"] is None  # the default path is the one that works
        assert report["TMPDIR"] == report["tempdir"]
        seen_ids.add(own_id)
        assert sdk.CustomJob.get(trial.custom_job).state.name == "JOB_STATE_SUCCEEDED"
    assert len(seen_ids) == 4


def test_a_failing_first_trial_fails_the_job_when_max_failed_is_unset(
    sdk: Any, staged_trainer: StagedTrainer
) -> None:
    args = ["--metric-tag=score", "--fail-trial=1"]
    tuning, _ = _tuning(sdk, staged_trainer, args, max_trial_count=4, parallel_trial_count=1)
    with pytest.raises(RuntimeError, match="The first trial failed"):
        tuning.run(sync=True)

    assert tuning.state.name == "JOB_STATE_FAILED"
    assert [t.state.name for t in tuning.trials] == ["INFEASIBLE"]  # no second trial was tried
    assert "ValueError: trial 1 refuses to train" in tuning.error.message


def test_a_later_failure_does_not_end_the_job_when_max_failed_is_unset(
    sdk: Any, staged_trainer: StagedTrainer
) -> None:
    args = ["--metric-tag=score", "--fail-trial=2"]
    tuning, _ = _tuning(sdk, staged_trainer, args, max_trial_count=4, parallel_trial_count=1)
    tuning.run(sync=True)

    assert tuning.state.name == "JOB_STATE_SUCCEEDED"
    assert [t.state.name for t in tuning.trials] == ["SUCCEEDED", "INFEASIBLE", "SUCCEEDED", "SUCCEEDED"]


def test_trials_cancelled_with_their_job_have_no_final_measurement(
    sdk: Any, staged_trainer: StagedTrainer
) -> None:
    args = ["--metric-tag=score", "--hold=60"]
    tuning, _ = _tuning(sdk, staged_trainer, args, max_trial_count=2, parallel_trial_count=2)
    tuning.run(sync=False)
    tuning.wait_for_resource_creation()

    def reported() -> bool:
        trials = tuning._get_gca_resource(tuning.resource_name).trials  # a fresh read
        return len(trials) == 2 and all(t.measurements for t in trials)

    wait_until(reported, timeout=120, what="two trials that have reported")
    tuning.cancel()
    assert wait_for_sdk_state(tuning, VERTEX_TERMINAL, timeout=60) == "JOB_STATE_CANCELLED"

    for trial in tuning.trials:
        assert trial.state.name == "INFEASIBLE"
        assert trial.measurements  # what it reported is kept...
        assert not trial.final_measurement.metrics  # ...but it never reached a final measurement
        custom_job = sdk.CustomJob.get(trial.custom_job)
        assert custom_job.state.name == "JOB_STATE_CANCELLED"
        assert custom_job.error.code == 1


def test_a_failed_jobs_message_has_its_traceback_and_a_link_to_its_logs(
    sdk: Any, staged_trainer: StagedTrainer, local_service: LocalService
) -> None:
    job = sdk.CustomJob(
        display_name="words-fail",
        worker_pool_specs=sdk_pools(staged_trainer, "direct_metric", ["--fail-trial=always"]),
    )
    with pytest.raises(RuntimeError):
        job.run(sync=True)

    message = job.error.message
    job_id = job.resource_name.rsplit("/", 1)[1]
    assert message.startswith(
        "The replica workerpool0-0 exited with a non-zero status of 1. Termination reason: Error. \n"
        "Traceback (most recent call last):\n"
    )
    assert "ValueError: trial None refuses to train\n\n" in message
    assert "a warning the message must not carry" not in message  # stderr stays in the log
    link = message.split("To find out more about why your job exited please check the logs: ", 1)[1]
    assert link.startswith(f"{local_service.url.rstrip('/')}/logs/viewer?project=")
    assert f"resource=ml_job%2Fjob_id%2F{job_id}&advancedFilter=" in link
    page = httpx.get(link, follow_redirects=True)
    assert page.status_code == 200
    assert "a warning the message must not carry" in page.text  # the job's page shows its log


def test_a_400_is_in_googles_words(
    sdk: Any, staged_trainer: StagedTrainer, local_service: LocalService
) -> None:
    from google.api_core import exceptions

    job = sdk.CustomJob(
        display_name="words-400",
        worker_pool_specs=sdk_pools(staged_trainer, "succeed", [], machine="n1-standrad-4"),
    )
    with pytest.raises(exceptions.BadRequest) as caught:  # REST: by the HTTP status, as from Google
        job.submit()
    assert (  # the SDK puts "POST <url>: " before Google's message
        ": List of found errors:\t1.Field: job_spec.worker_pool_specs[0].machine_spec.machine_type; Message: "
        in caught.value.message
    )

    parent = f"v1/projects/p/locations/{LOCATION}/customJobs"
    body = {"displayName": "x", "jobSpec": {"workerPoolSpecs": _camel_pool(staged_trainer)}}
    error = httpx.post(f"{local_service.url.rstrip('/')}/{parent}", json=body).json()["error"]
    assert (error["code"], error["status"]) == (400, "INVALID_ARGUMENT")
    assert error["details"][0]["@type"] == "type.googleapis.com/google.rpc.BadRequest"


def _camel_pool(trainer: StagedTrainer) -> list[dict[str, Any]]:
    package = {"executorImageUri": IMAGE, "packageUris": [trainer.package_uri], "pythonModule": "m"}
    return [
        {"machineSpec": {"machineType": "n1-standrad-4"}, "replicaCount": "1", "pythonPackageSpec": package}
    ]


def test_a_method_we_do_not_serve_is_unimplemented(sdk: Any, local_service: LocalService) -> None:
    from google.api_core import exceptions

    with pytest.raises(exceptions.MethodNotImplemented, match="Operation is not implemented"):
        sdk.TabularDataset.list()

    base = local_service.url.rstrip("/")
    answer = httpx.get(f"{base}/v1/projects/p/locations/{LOCATION}/customJobs/1/operations/2")
    assert answer.status_code == 501
    error = answer.json()["error"]
    assert (error["code"], error["status"]) == (501, "UNIMPLEMENTED")
    assert "aiplatform.projects.locations.customJobs.operations.get" in error["message"]
    assert httpx.get(f"{base}/v1/projects/p/locations/{LOCATION}/noSuchThings").status_code == 404

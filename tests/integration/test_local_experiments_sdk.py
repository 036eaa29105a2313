"""Vertex AI Experiments on the local service, driven by Google's SDK as a notebook or a trainer
drives it: ``aiplatform.init(experiment=...)``, ``start_run``, ``log_params``, ``log_metrics``,
``end_run``, then ``get_experiment_df``, on the REST face; and the same handlers on the gRPC
face (Google's gapic ``MetadataServiceClient`` in clear; the SDK on gRPC through ``aip-local
env``'s proxy: test_google_clients_env.py). What a run logged outlives the service.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from google.api_core import exceptions as google_errors

from airflow_aip.local.store import project_number
from tests.fixtures.experiments import experiment_rows, experiment_tracking
from tests.fixtures.google_env import run_client
from tests.fixtures.local_service import LocalService, Restarts, StagedTrainer, own_service
from tests.fixtures.tools import need_module
from tests.fixtures.vertex import LOCATION, sdk_pools, vertex_sdk

pytestmark = pytest.mark.integration
need_module("pandas")  # the SDK's get_experiment_df answers a DataFrame

# A trainer calls Google's SDK: the host runtime runs it on the service's own Python, which has it.
host_service = own_service("host_service", ["--runtime", "host"])


def _log_run(sdk: Any, experiment: str, run: str, params: dict[str, Any], metrics: dict[str, float]) -> None:
    sdk.init(experiment=experiment)
    sdk.start_run(run)
    sdk.log_params(params)
    sdk.log_metrics(metrics)
    sdk.end_run()


def test_runs_logged_with_the_sdk_read_back_as_its_data_frame(
    local_service: LocalService, staged_trainer: StagedTrainer, monkeypatch: pytest.MonkeyPatch
) -> None:
    project, experiment = f"exp-{uuid.uuid4().hex[:8]}", f"exp-{uuid.uuid4().hex[:8]}"
    with (
        vertex_sdk(local_service.url, project, staged_trainer.bucket, monkeypatch) as client,
        experiment_tracking(client) as sdk,
    ):
        _log_run(sdk, experiment, "run-1", {"lr": 0.1, "optimizer": "adam"}, {"accuracy": 0.9})
        _log_run(sdk, experiment, "run-2", {"lr": 0.01}, {"accuracy": 0.8, "loss": 0.4})

        rows = experiment_rows(sdk.get_experiment_df())
        defaults = sdk.Tensorboard.list(filter="is_default=true")
        with pytest.raises(google_errors.Conflict, match=f"contexts/{experiment}-run-1 already exists"):
            sdk.start_run("run-1")

    assert rows["run-1"] == {
        "experiment_name": experiment,
        "run_type": "system.ExperimentRun",
        "state": "COMPLETE",
        "param.lr": 0.1,
        "param.optimizer": "adam",
        "metric.accuracy": 0.9,
    }
    assert rows["run-2"]["metric.loss"] == 0.4
    assert rows["run-2"]["param.lr"] == 0.01
    # init(experiment=...) backs the experiment with the region's default TensorBoard, made once.
    assert [board.resource_name.split("/")[:4] for board in defaults] == [
        ["projects", project_number(project), "locations", LOCATION]
    ]


def test_an_experiment_name_outside_google_s_rule_is_its_400_naming_the_field(
    local_service: LocalService, staged_trainer: StagedTrainer, monkeypatch: pytest.MonkeyPatch
) -> None:
    with (
        vertex_sdk(
            local_service.url, f"exp-{uuid.uuid4().hex[:8]}", staged_trainer.bucket, monkeypatch
        ) as client,
        experiment_tracking(client) as sdk,
        pytest.raises(google_errors.BadRequest) as raised,  # REST's 400 (gRPC's: InvalidArgument)
    ):
        sdk.init(experiment="My_Experiment", experiment_tensorboard=False)

    assert "Field: context_id; Message: must match [a-z0-9][a-z0-9-]{0,127}" in raised.value.message
    assert "'My_Experiment'" in raised.value.message


def test_the_grpc_face_serves_the_same_runs_and_the_same_400(
    local_service: LocalService, staged_trainer: StagedTrainer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from google.cloud.aiplatform_v1 import MetadataServiceClient
    from google.cloud.aiplatform_v1.services.metadata_service.transports.grpc import (
        MetadataServiceGrpcTransport,
    )

    project, experiment = f"exp-{uuid.uuid4().hex[:8]}", f"exp-{uuid.uuid4().hex[:8]}"
    with (
        vertex_sdk(local_service.url, project, staged_trainer.bucket, monkeypatch) as client,
        experiment_tracking(client) as sdk,
    ):
        _log_run(sdk, experiment, "run-1", {"lr": 0.1}, {"accuracy": 0.9})
    gapic = MetadataServiceClient(
        transport=MetadataServiceGrpcTransport(channel=local_service.grpc_channel())
    )
    store = f"projects/{project}/locations/{LOCATION}/metadataStores/default"

    parent = f"{store.replace(project, project_number(project))}/contexts/{experiment}"
    runs = gapic.list_contexts(request={"parent": store, "filter": f'parent_contexts:"{parent}"'})
    run = next(iter(runs))
    with pytest.raises(google_errors.InvalidArgument) as raised:
        gapic.create_context(
            request={
                "parent": store,
                "context": {"schema_title": "system.Experiment"},
                "context_id": "Bad_Name",
            }
        )

    assert run.name.endswith(f"/contexts/{experiment}-run-1")
    assert dict(run.metadata["_metrics"]) == {"accuracy": 0.9}
    assert "Field: context_id; Message: must match" in raised.value.message
    assert [v.field for v in raised.value.details[0].field_violations] == ["contextId"]


def test_what_a_run_logged_outlives_the_service(
    restarts: Restarts,
    fake_gcs: Any,
    staged_trainer: StagedTrainer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data_dir, project = tmp_path / "data", f"exp-{uuid.uuid4().hex[:8]}"
    first = restarts.start(data_dir, fake_gcs.url)
    with (
        vertex_sdk(first.url, project, staged_trainer.bucket, monkeypatch) as client,
        experiment_tracking(client) as sdk,
    ):
        _log_run(sdk, "kept", "run-1", {"lr": 0.1}, {"accuracy": 0.9})
    first.stop()

    second = restarts.start(data_dir, fake_gcs.url)
    with (
        vertex_sdk(second.url, project, staged_trainer.bucket, monkeypatch) as client,
        experiment_tracking(client) as sdk,
    ):
        rows = experiment_rows(sdk.get_experiment_df("kept"))

    assert rows["run-1"]["metric.accuracy"] == 0.9
    assert rows["run-1"]["param.lr"] == 0.1


def test_a_trainer_s_run_in_a_local_job_reads_back_outside_on_rest_and_on_grpc(
    host_service: LocalService, staged_trainer: StagedTrainer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The project `aip-local env`'s key file names: the gRPC read below runs with only that environment.
    experiment, base = (
        f"trainer-{uuid.uuid4().hex[:8]}",
        f"gs://{staged_trainer.bucket}/exp/{uuid.uuid4().hex[:8]}",
    )
    args = [f"--job-dir={base}", f"--experiment={experiment}", "--learning_rate=0.25"]
    with (
        vertex_sdk(host_service.url, "local-project", staged_trainer.bucket, monkeypatch) as client,
        experiment_tracking(client) as sdk,
    ):
        job = sdk.CustomJob(
            display_name="experiment-probe",
            worker_pool_specs=sdk_pools(staged_trainer, "experiment_probe", args),
            base_output_dir=base,
        )
        job.run(sync=True)
        report = staged_trainer.read_json(f"{base}/experiment.json")
        over_rest = experiment_rows(sdk.get_experiment_df(experiment))
    over_grpc = run_client(host_service, tmp_path, "sdk_experiment_df", experiment)["rows"]

    run = f"run-{job.resource_name.rsplit('/', 1)[-1]}"
    assert report == {"run": run}
    assert over_rest[run] == {
        "experiment_name": experiment,
        "run_type": "system.ExperimentRun",
        "state": "COMPLETE",
        "param.learning_rate": 0.25,
        "param.trial": "",
        "metric.accuracy": 0.75,
        "metric.loss": 0.5,
    }
    assert over_grpc == over_rest


def test_the_submit_operator_s_summary_carries_what_each_trial_logged(
    host_service: LocalService,
    fake_gcs: Any,
    staged_trainer: StagedTrainer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """A tuning job's trainer logs each trial to a run named after its own CustomJob; the worker
    reads the runs once the job ended and puts them on the trials in XCom, where the tab reads them."""
    from airflow_aip.operators import SubmitTrainingJobOperator
    from tests.fixtures.operators import FakeTI, task_context

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", fake_gcs.url)
    monkeypatch.setenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM", host_service.url)
    experiment, dag_id = f"tuned-{uuid.uuid4().hex[:8]}", f"aip_experiments_{uuid.uuid4().hex[:8]}"
    training_input = staged_trainer.training_input("experiment_probe", [f"--experiment={experiment}"])
    training_input["hyperparameters"] = {
        "goal": "MAXIMIZE",
        "hyperparameterMetricTag": "accuracy",
        "maxTrials": 2,
        "maxParallelTrials": 2,
        "algorithm": "GRID_SEARCH",
        "params": [{"parameterName": "learning_rate", "type": "DISCRETE", "discreteValues": [0.25, 0.5]}],
    }
    operator = SubmitTrainingJobOperator(
        task_id="tune",
        project_id="local-project",
        job_id_prefix=dag_id,
        training_input=training_input,
        executor_image_uri="us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest",
        poll_interval=0.5,
        deferrable=False,
    )

    when = datetime(2026, 3, 9, 7, 5, 1, tzinfo=timezone.utc)
    summary = operator.execute(task_context(FakeTI(dag_id, "tune"), when))  # type: ignore[arg-type]

    logged = {
        trial["hyperparameters"]["learning_rate"]: trial["experimentRun"] for trial in summary["trials"]
    }
    assert {rate: run["metrics"] for rate, run in logged.items()} == {
        "0.25": {"accuracy": 0.75, "loss": 0.5},
        "0.5": {"accuracy": 0.5, "loss": 1.0},
    }
    assert {run["experiment"] for run in logged.values()} == {experiment}
    trial_jobs = {trial["customJob"].rsplit("/", 1)[-1] for trial in summary["trials"]}
    assert {run["run"].rsplit("-", 1)[-1] for run in logged.values()} == trial_jobs


def test_time_series_and_deletes_stay_google_s_501_on_both_faces(local_service: LocalService) -> None:
    import httpx
    from google.cloud.aiplatform_v1 import TensorboardServiceClient
    from google.cloud.aiplatform_v1.services.tensorboard_service.transports.grpc import (
        TensorboardServiceGrpcTransport,
    )

    base = f"{local_service.url}v1/projects/p/locations/{LOCATION}"
    run = f"{base}/tensorboards/1/experiments/e/runs/r"
    answers = [
        httpx.post(f"{run}/timeSeries", json={"displayName": "loss", "valueType": "SCALAR"}),
        httpx.delete(f"{base}/metadataStores/default/contexts/exp-1"),
    ]
    gapic = TensorboardServiceClient(
        transport=TensorboardServiceGrpcTransport(channel=local_service.grpc_channel())
    )

    assert [(a.status_code, a.json()["error"]["status"]) for a in answers] == [(501, "UNIMPLEMENTED")] * 2
    assert "tensorboards.experiments.runs.timeSeries.create" in answers[0].json()["error"]["message"]
    assert "metadataStores.contexts.delete" in answers[1].json()["error"]["message"]
    with pytest.raises(google_errors.MethodNotImplemented, match="WriteTensorboardRunData"):
        gapic.write_tensorboard_run_data(request={"tensorboard_run": run.split("v1/", 1)[1]})

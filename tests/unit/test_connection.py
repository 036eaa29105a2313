"""The connection's arguments, defined once (hooks/job_reference.py), reach every operator and the sensor.

A DAG's ``default_args`` fill them (Airflow applies default_args to the parameters of an
``__init__`` its metaclass wrapped: :mod:`airflow_aip.operators.connected`), an argument given to
the task wins, ``.partial()`` takes them, and the ``[aip]`` defaults are read when a task is made.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import DAG

from airflow_aip.hooks.job_reference import API_FIELDS
from airflow_aip.operators import (
    BuildTrainerImageOperator,
    BuildTrainerPackageOperator,
    CancelTrainingJobOperator,
    ExportArtifactsOperator,
    RegisterModelOperator,
    RollbackChampionOperator,
    StagePackagesOperator,
    SubmitTrainingJobOperator,
)
from airflow_aip.sensors import TrainingJobSensor
from airflow_aip.triggers.model_operation import ModelOperationTrigger
from airflow_aip.triggers.training import TrainingJobTrigger

DEFAULTS = {
    "gcp_conn_id": "dag_conn",
    "impersonation_chain": ["a@p.iam.gserviceaccount.com"],
    "project_id": "dag-project",
    "region": "europe-west4",
    "backend": "ai_platform",
    "api_endpoint": "http://127.0.0.1:9/",
}

# Each task with only its own required arguments: the connection comes from the DAG.
JOB_TASKS: dict[type[Any], dict[str, Any]] = {
    SubmitTrainingJobOperator: {"training_input": {"region": "us-central1"}},
    CancelTrainingJobOperator: {"job_id": "j"},
    TrainingJobSensor: {"job_id": "j"},
    ExportArtifactsOperator: {"job_id": "j", "destination_uri": "gs://b/models"},
}
REGISTRY_TASKS: dict[type[Any], dict[str, Any]] = {
    RegisterModelOperator: {"manifest_uri": "gs://b/m/manifest.json", "model": "m"},
    RollbackChampionOperator: {"model": "m"},
}
IDENTITY_TASKS: dict[type[Any], dict[str, Any]] = {
    StagePackagesOperator: {"packages": [], "staging_uri": "gs://b/staging"},
    BuildTrainerPackageOperator: {"package_path": "/tmp/trainer"},
    BuildTrainerImageOperator: {"context_path": "/tmp/ctx", "repository": "localhost:5000/t"},
}


def _made(cls: type[Any], arguments: dict[str, Any], **given: Any) -> Any:
    with DAG("connection_defaults", schedule=None, default_args=DEFAULTS):
        return cls(task_id="task", **arguments, **given)


@pytest.mark.parametrize("cls", list(JOB_TASKS))
def test_default_args_reach_every_connection_field_of_a_job_task(cls: type[Any]) -> None:
    task = _made(cls, JOB_TASKS[cls])
    assert {field: getattr(task, field) for field in API_FIELDS} == DEFAULTS
    assert task.job_api.gcp_conn_id == "dag_conn"  # and the API it reaches the job by


@pytest.mark.parametrize("cls", list(REGISTRY_TASKS))
def test_default_args_reach_a_registry_task_whose_backend_stays_vertex(cls: type[Any]) -> None:
    task = _made(cls, REGISTRY_TASKS[cls])
    expected = {**DEFAULTS, "backend": "vertex"}  # the Model Registry is Vertex AI's alone
    assert {field: getattr(task, field) for field in API_FIELDS} == expected


@pytest.mark.parametrize("cls", list(IDENTITY_TASKS))
def test_default_args_reach_the_identity_of_a_packaging_task(cls: type[Any]) -> None:
    task = _made(cls, IDENTITY_TASKS[cls])
    assert task.gcp_conn_id == "dag_conn"
    assert task.impersonation_chain == ["a@p.iam.gserviceaccount.com"]
    assert not hasattr(task, "region")  # it takes no job API's arguments


@pytest.mark.parametrize("cls", [*JOB_TASKS, *REGISTRY_TASKS])
def test_an_argument_given_to_the_task_wins_over_default_args(cls: type[Any]) -> None:
    arguments = {**JOB_TASKS, **REGISTRY_TASKS}[cls]
    task = _made(cls, arguments, gcp_conn_id="own_conn", region="asia-east1", project_id="own")
    assert (task.gcp_conn_id, task.region, task.project_id) == ("own_conn", "asia-east1", "own")


def test_the_connection_fields_stay_templated_where_they_were() -> None:
    cls: type[Any]
    for cls in (
        CancelTrainingJobOperator,
        TrainingJobSensor,
        ExportArtifactsOperator,
        SubmitTrainingJobOperator,
    ):
        assert set(API_FIELDS) <= set(cls.template_fields), cls
    for cls in (RegisterModelOperator, RollbackChampionOperator):
        assert set(cls.template_fields) & set(API_FIELDS) == set(API_FIELDS) - {"backend"}, cls
    for cls in (StagePackagesOperator, BuildTrainerPackageOperator, BuildTrainerImageOperator):
        assert set(cls.template_fields) & set(API_FIELDS) == {"gcp_conn_id", "impersonation_chain"}, cls


def test_aip_defaults_are_read_when_a_task_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__AIP__BACKEND", "ai_platform")
    monkeypatch.setenv("AIRFLOW__AIP__REGION", "europe-west1")
    cancel = CancelTrainingJobOperator(task_id="cancel", job_id="j")
    assert (cancel.backend, cancel.region) == ("ai_platform", "europe-west1")
    submit = SubmitTrainingJobOperator(task_id="submit", training_input={})
    assert (submit.backend, submit.region) == ("ai_platform", None)  # its region is decided at run time
    trigger = TrainingJobTrigger(job_id="j", project_id="p")
    assert (trigger.backend, trigger.region) == ("ai_platform", None)  # as serialized before Vertex AI
    registry = ModelOperationTrigger(operation_name="o", project_id="p", region="us-central1")
    assert registry.backend == "vertex"


def test_partial_takes_the_connection_arguments() -> None:
    with DAG("connection_partial", schedule=None):
        mapped = CancelTrainingJobOperator.partial(
            task_id="cancel", region="europe-west4", gcp_conn_id="c"
        ).expand(job_id=["a", "b"])
    assert mapped.partial_kwargs["region"] == "europe-west4"


def test_the_connection_arguments_are_typed_in_one_signature() -> None:
    package = Path(__file__).resolve().parents[2] / "airflow_aip"
    typed = re.compile(r"impersonation_chain: str \| list\[str\] \| None = None")
    where = [str(path) for path in package.rglob("*.py") if typed.search(path.read_text())]
    assert [Path(path).name for path in where] == ["job_reference.py"]

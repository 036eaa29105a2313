"""The submit operator, the sensor, cancel and the trigger on Vertex AI, the default backend.

They talk to the local service's real aiplatform face in process (its ASGI app through a
synchronous test client; runner threads not started, so a job stays in the state the test puts
it in). ``test_training_operator`` covers the same adapters on ml v1, with the failures no server
produces on demand; this module covers what differs on Vertex AI: server-assigned IDs found by
label, resource names with their location, regional endpoints, and Vertex's states.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from airflow_aip.compat import AirflowFailException, TaskDeferred
from airflow_aip.exceptions import ValidationError
from airflow_aip.hooks.vertex import VertexJobHook
from airflow_aip.jobs.labels import JOB_ID_LABEL
from airflow_aip.links import CONSOLE_URL_XCOM_KEY, JOB_ID_XCOM_KEY
from airflow_aip.local.api import create_app
from airflow_aip.local.service import ServiceConfig, TrainingService
from airflow_aip.local.store import project_number
from airflow_aip.operators import CancelTrainingJobOperator, SubmitTrainingJobOperator
from airflow_aip.sensors import TrainingJobSensor
from airflow_aip.triggers.training import TrainingJobTrigger
from tests.fixtures.operators import FakeTI
from tests.fixtures.submit import JOB_ID, LOCAL, make_context, submit_args
from tests.fixtures.vertex import WORKER_POOL

PARENT = "/v1/projects/proj/locations/us-central1"
ARGS = submit_args(
    "vertex",
    {"runtimeVersion": "2.11", "pythonVersion": "3.7"},
    poll_interval=30,
    deferrable=False,
    wait_for_completion=False,
    stream_logs=False,
)
API: dict[str, Any] = {"api_endpoint": LOCAL, "gcp_conn_id": "aip_missing_conn", "project_id": "proj"}
WAIT: dict[str, Any] = {**API, "stream_logs": False}


class Vertex:
    """The aiplatform face in process; the hooks' synchronous client is its test client."""

    def __init__(self, tmp_path: Path) -> None:
        self.service = TrainingService(ServiceConfig(tmp_path / "data", storage_url=None))
        self.http = TestClient(create_app(self.service))

    def jobs(self) -> list[dict[str, Any]]:
        answer = self.http.get(f"{PARENT}/customJobs")
        assert answer.status_code == 200, answer.text
        return list(answer.json().get("customJobs") or [])

    def create(self, job_id: str) -> str:
        body = {
            "displayName": job_id,
            "labels": {JOB_ID_LABEL: job_id},
            "jobSpec": {"workerPoolSpecs": [WORKER_POOL]},
        }
        answer = self.http.post(f"{PARENT}/customJobs", json=body)
        assert answer.status_code == 200, answer.text
        return str(answer.json()["name"])

    def set_state(self, name: str, state: str, error: str | None = None) -> None:
        def change(job: dict[str, Any]) -> None:
            job.update(state=state)
            if error:
                job.update(errorMessage=error)

        self.service.store.update(project_number("proj"), name.rsplit("/", 1)[-1], change)


@pytest.fixture
def vertex(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Vertex]:
    face = Vertex(tmp_path)
    monkeypatch.setattr(VertexJobHook, "_sync_client", lambda self: face.http)
    monkeypatch.setattr(VertexJobHook, "settle_delays", ())
    yield face
    face.service.stop()


def test_submit_creates_one_job_named_by_our_id_and_a_retry_adopts_it(vertex: Vertex) -> None:
    ti = FakeTI()
    first = SubmitTrainingJobOperator(**ARGS).execute(make_context(ti))
    again = SubmitTrainingJobOperator(**ARGS).execute(make_context(FakeTI()))  # the task's next try
    [job] = vertex.jobs()
    assert job["displayName"] == JOB_ID
    assert job["labels"][JOB_ID_LABEL] == JOB_ID
    assert first["name"] == again["name"] == job["name"]  # Vertex's numeric ID, found by our label
    assert first["backend"] == "vertex"
    assert ti.xcom[JOB_ID_XCOM_KEY] == JOB_ID
    assert ti.xcom[CONSOLE_URL_XCOM_KEY].startswith(LOCAL + "console/projects/")  # the local page


def test_a_retry_after_the_job_failed_creates_the_next_attempt(vertex: Vertex) -> None:
    first = SubmitTrainingJobOperator(**ARGS).execute(make_context())
    vertex.set_state(first["name"], "FAILED", "replica exited 1")
    second = SubmitTrainingJobOperator(**ARGS).execute(make_context())
    assert second["job_id"] == f"{JOB_ID}_r2"
    assert sorted(job["displayName"] for job in vertex.jobs()) == [JOB_ID, f"{JOB_ID}_r2"]


def test_a_deferred_submit_hands_the_trigger_its_region_and_resource_name(vertex: Vertex) -> None:
    op = SubmitTrainingJobOperator(**{**ARGS, "wait_for_completion": True, "deferrable": True})
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(make_context())
    trigger = deferred.value.trigger
    assert isinstance(trigger, TrainingJobTrigger)
    _, kwargs = trigger.serialize()
    assert kwargs["backend"] == "vertex"
    assert kwargs["region"] == "us-central1"
    assert kwargs["job_name"] == vertex.jobs()[0]["name"]
    assert kwargs["job_name"].startswith("projects/")
    assert TrainingJobTrigger(**kwargs).poller_key == trigger.poller_key  # rebuilt, it polls the same


@pytest.mark.parametrize(
    ("state", "outcome"), [("SUCCEEDED", "success"), ("FAILED", "failure"), ("CANCELLED", "failure")]
)
def test_the_sensor_ends_as_the_job_did(vertex: Vertex, state: str, outcome: str) -> None:
    name = vertex.create("trained_20240309_070501")
    vertex.set_state(name, state, "replica exited 1" if state == "FAILED" else None)
    sensor = TrainingJobSensor(task_id="wait", job_id="trained_20240309_070501", **WAIT)
    if outcome == "success":
        assert sensor.execute(make_context())["state"] == "SUCCEEDED"
    else:
        with pytest.raises(AirflowFailException, match=state):
            sensor.execute(make_context())


def test_a_resource_name_s_location_picks_the_endpoint_and_the_task_s_fields_stay_as_written(
    vertex: Vertex,
) -> None:
    name = "projects/proj/locations/europe-west4/customJobs/123"
    sensor = TrainingJobSensor(task_id="wait", job_id=name, region="us-central1", **WAIT)
    assert sensor.job_api.region == "europe-west4"
    assert sensor.job_api_arguments["region"] == "europe-west4"  # what a trigger and a cancel get
    assert sensor.region == "us-central1"  # a template field is never rewritten
    with pytest.raises(ValidationError, match="job_id"):
        TrainingJobSensor(task_id="bad", job_id="projects/proj/customJobs/1", **WAIT).job_api  # noqa: B018


def test_cancel_stops_a_running_job_and_an_ended_one_is_left_alone(vertex: Vertex) -> None:
    running = vertex.create("running_20240309_070501")
    vertex.set_state(running, "RUNNING")
    ended = vertex.create("ended_20240309_070501")
    vertex.set_state(ended, "SUCCEEDED")
    CancelTrainingJobOperator(task_id="cancel", job_id=running, **API).execute(make_context())
    CancelTrainingJobOperator(task_id="cancel", job_id="ended_20240309_070501", **API).execute(make_context())
    states = {job["displayName"]: job["state"] for job in vertex.jobs()}
    assert states["running_20240309_070501"] in ("JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED")
    assert states["ended_20240309_070501"] == "JOB_STATE_SUCCEEDED"

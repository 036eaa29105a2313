"""The API's semantics without running any job: a service whose runner threads are not started.

Requests go through the real ASGI app (FastAPI's TestClient), so paths, status codes and
error bodies are what google-api-python-client sees; jobs simply stay QUEUED.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from airflow_aip.local.service import DataDirBusyError, ServiceConfig, TrainingService
from airflow_aip.local.store import JobStore

JOBS = "/v1/projects/proj/jobs"


def _body(job_id: str, **scheduling: Any) -> dict[str, Any]:
    ti: dict[str, Any] = {
        "region": "us-central1",
        "packageUris": ["gs://bucket/trainer-0.1.tar.gz"],
        "pythonModule": "trainer.task",
    }
    if scheduling:
        ti["scheduling"] = scheduling
    return {"jobId": job_id, "trainingInput": ti}


def test_queued_jobs_know_their_position_and_priority_goes_first(client: TestClient) -> None:
    first = client.post(JOBS, json=_body("first")).json()
    second = client.post(JOBS, json=_body("second")).json()
    urgent = client.post(JOBS, json=_body("urgent", priority=500)).json()

    assert (first["state"], first["jobPosition"]) == ("QUEUED", "1")
    assert second["jobPosition"] == "2"
    assert urgent["jobPosition"] == "1"
    assert client.get(f"{JOBS}/first").json()["jobPosition"] == "2"
    assert client.get(f"{JOBS}/second").json()["jobPosition"] == "3"
    assert first["createTime"].endswith("Z")
    assert first["etag"]


def test_cancel_a_queued_job_then_cancel_again(client: TestClient) -> None:
    client.post(JOBS, json=_body("a"))
    client.post(JOBS, json=_body("b"))

    assert client.post(f"{JOBS}/a:cancel", json={}).json() == {}
    cancelled = client.get(f"{JOBS}/a").json()
    again = client.post(f"{JOBS}/a:cancel")

    assert cancelled["state"] == "CANCELLED"
    assert "jobPosition" not in cancelled
    assert cancelled["endTime"] >= cancelled["createTime"]
    assert client.get(f"{JOBS}/b").json()["jobPosition"] == "1"
    assert again.status_code == 400
    assert again.json()["error"]["status"] == "FAILED_PRECONDITION"


@pytest.mark.parametrize(
    ("method", "path", "body", "code", "status"),
    [
        ("GET", f"{JOBS}/nope", None, 404, "NOT_FOUND"),
        ("POST", f"{JOBS}/nope:cancel", {}, 404, "NOT_FOUND"),
        ("GET", "/v1/projects/proj/models", None, 501, "UNIMPLEMENTED"),  # ml v1 has it; we do not serve it
        ("GET", "/v1/projects/proj/nothing", None, 404, "NOT_FOUND"),  # no API has it
        ("POST", JOBS, {"jobId": "x", "state": "SUCCEEDED"}, 400, "INVALID_ARGUMENT"),
        ("POST", JOBS, {"jobId": "x"}, 400, "INVALID_ARGUMENT"),
        ("POST", JOBS, [1, 2], 400, "INVALID_ARGUMENT"),
        ("POST", "/v1/projects/bad..name/jobs", _body("x"), 400, "INVALID_ARGUMENT"),
        ("GET", f"{JOBS}?pageSize=lots", None, 400, "INVALID_ARGUMENT"),
        ("GET", f"{JOBS}?pageToken=garbage", None, 400, "INVALID_ARGUMENT"),
        ("GET", f"{JOBS}?filter=state%3D", None, 400, "INVALID_ARGUMENT"),
    ],
)
def test_errors_have_googles_shape(
    client: TestClient, method: str, path: str, body: Any, code: int, status: str
) -> None:
    response = client.request(method, path, json=body)
    assert response.status_code == code
    error = response.json()["error"]
    assert (error["code"], error["status"]) == (code, status)
    assert error["message"]


def test_validation_errors_name_the_field(client: TestClient) -> None:
    body = _body("x")
    body["trainingInput"]["scheduling"] = {"maxWaitTime": "60s"}
    error = client.post(JOBS, json=body).json()["error"]
    violation = error["details"][0]["fieldViolations"][0]
    assert violation["field"] == "trainingInput.scheduling.maxWaitTime"
    assert "1800" in violation["description"]
    assert (
        error["message"]
        == f"Field: training_input.scheduling.max_wait_time Error: {violation['description']}"
    )


def test_a_custom_container_without_an_engine_is_a_400_naming_the_field(client: TestClient) -> None:
    body = _body("in_a_container")
    ti = body["trainingInput"]
    del ti["packageUris"], ti["pythonModule"]
    ti["masterConfig"] = {"imageUri": "localhost/trainer:1"}
    error = client.post(JOBS, json=body).json()["error"]
    violation = error["details"][0]["fieldViolations"][0]
    assert violation["field"] == "trainingInput.masterConfig.imageUri"
    assert "none was found" in violation["description"]


def test_duplicate_is_409_and_keeps_the_first(client: TestClient) -> None:
    client.post(JOBS, json=_body("dup"))
    body = _body("dup")
    body["trainingInput"]["pythonModule"] = "other.task"
    response = client.post(JOBS, json=body)
    assert response.status_code == 409
    assert response.json()["error"]["status"] == "ALREADY_EXISTS"
    assert client.get(f"{JOBS}/dup").json()["trainingInput"]["pythonModule"] == "trainer.task"


def test_invalid_json_body(client: TestClient) -> None:
    response = client.post(JOBS, content=b"{not json", headers={"Content-Type": "application/json"})
    assert response.status_code == 400


def test_list_pages_newest_first_and_caps_page_size(client: TestClient) -> None:
    for i in range(5):
        client.post(JOBS, json=_body(f"job_{i}"))
    seen, token = [], ""
    while True:
        page = client.get(JOBS, params={"pageSize": 2, "pageToken": token}).json()
        seen += [j["jobId"] for j in page["jobs"]]
        token = page.get("nextPageToken", "")
        if not token:
            break
    assert seen == [f"job_{i}" for i in (4, 3, 2, 1, 0)]
    assert len(client.get(JOBS, params={"pageSize": 1000}).json()["jobs"]) == 5
    assert client.get("/v1/projects/empty/jobs").json() == {}


def test_log_entries_are_served_like_cloud_logging(client: TestClient) -> None:
    client.post(JOBS, json=_body("logged"))
    request = {"resourceNames": ["projects/proj"], "filter": 'resource.labels.job_id="logged"'}
    entries = client.post("/v2/entries:list", json=request).json()["entries"]
    assert entries[0]["textPayload"] == "Job created; waiting in the queue."
    assert entries[0]["resource"] == {
        "type": "ml_job",
        "labels": {"job_id": "logged", "project_id": "proj", "task_name": "service"},
    }
    assert entries[0]["logName"] == "projects/proj/logs/ml.googleapis.com%2Flogged"
    bad = client.post("/v2/entries:list", json={"resourceNames": ["folders/1"]})
    assert bad.status_code == 400


def test_restart_fails_jobs_that_were_running_and_requeues_queued(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    store = JobStore(data_dir)
    store.create(
        "proj", dict(_body("was_running"), state="RUNNING", createTime="2024-01-01T00:00:00.000000Z")
    )
    store.set_processes("proj", "was_running", [{"pid": 999999, "ticks": 1}])
    store.create("proj", dict(_body("was_queued"), state="QUEUED", createTime="2024-01-01T00:00:01.000000Z"))

    service = TrainingService(ServiceConfig(data_dir, storage_url=None))
    try:
        failed = service.get_job("proj", "was_running")
        queued = service.get_job("proj", "was_queued")
        with pytest.raises(DataDirBusyError):
            TrainingService(ServiceConfig(data_dir, storage_url=None))
    finally:
        service.stop()

    assert failed["state"] == "FAILED"
    assert "stopped while this job was RUNNING" in failed["errorMessage"]
    assert failed["endTime"]
    assert (queued["state"], queued["jobPosition"]) == ("QUEUED", "1")
    assert JobStore(data_dir).records()[0].processes == []


def test_a_job_read_back_and_sent_to_create_again_is_a_clone(client: TestClient) -> None:
    """The ``output`` oneof is output only (ml v1 job_service.proto): ignored in a create, not a 400."""
    first = client.post(JOBS, json=_body("first")).json()
    first["trainingOutput"] = {"completedTrialCount": "3", "trials": [{"trialId": "1"}]}
    clone = {**first, "jobId": "clone"}

    response = client.post(JOBS, json=clone)

    assert response.status_code == 200, response.text
    created = response.json()
    assert (created["jobId"], created["state"]) == ("clone", "QUEUED")
    assert "trainingOutput" not in created
    assert created["trainingInput"] == first["trainingInput"]
    assert created["etag"] != first["etag"]

"""The aiplatform v1 face at the HTTP level, without running a job (runner threads not started).

Requests go through the real ASGI app, so status codes, error envelopes and the proto3 JSON
mapping (enum numbers, int64 as strings or numbers) are what Google's clients see.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from airflow_aip.local.store import project_number

PARENT = "/v1/projects/proj/locations/us-central1"
CUSTOM = f"{PARENT}/customJobs"
TUNING = f"{PARENT}/hyperparameterTuningJobs"
IMAGE = "europe-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-4.py310:latest"


def _pool(**package: Any) -> dict[str, Any]:
    spec = {"executorImageUri": IMAGE, "packageUris": ["gs://bucket/t-0.1.tar.gz"], "pythonModule": "t.task"}
    return {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": 1,
        "pythonPackageSpec": spec | package,
    }


def _custom(**extra: Any) -> dict[str, Any]:
    return {"displayName": "job", "jobSpec": {"workerPoolSpecs": [_pool()]}, **extra}


def _tuning(parameters: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "displayName": "hpt",
        "maxTrialCount": "4",
        "parallelTrialCount": 2,
        "studySpec": {"metrics": [{"metricId": "acc", "goal": "MAXIMIZE"}], "parameters": parameters},
        "trialJobSpec": {"workerPoolSpecs": [_pool()]},
    }


def _violation(response: Any) -> tuple[int, str, str]:
    error = response.json()["error"]
    field = error["details"][0]["fieldViolations"][0]["field"] if "details" in error else ""
    return response.status_code, error["status"], field


def test_proto3_json_in_canonical_json_out(client: TestClient) -> None:
    pool = _pool()
    pool["machineSpec"] = {"machineType": "a2-highgpu-1g", "acceleratorType": 8, "acceleratorCount": 1}
    # NVIDIA_TESLA_A100 is 8, not its index; A100s attach to a2-highgpu-* only
    pool["replicaCount"] = "1"
    body = _custom(jobSpec={"workerPoolSpecs": [pool], "scheduling": {"timeout": "7200s", "strategy": 4}})
    created = client.post(CUSTOM, params={"alt": "json", "$.xgafv": "2"}, json=body).json()
    spec = created["jobSpec"]
    assert spec["workerPoolSpecs"][0]["machineSpec"]["acceleratorType"] == "NVIDIA_TESLA_A100"
    assert spec["workerPoolSpecs"][0]["replicaCount"] == "1"
    assert spec["scheduling"] == {"timeout": "7200s", "strategy": "SPOT"}
    assert created["state"] == "JOB_STATE_QUEUED"
    assert created["createTime"].endswith("Z")
    as_numbers = client.get(f"/v1/{created['name']}", params={"$alt": "json;enum-encoding=int"}).json()
    assert as_numbers["state"] == 1
    assert as_numbers["jobSpec"]["scheduling"]["strategy"] == 4
    assert client.get(CUSTOM, params={"alt": "proto"}).status_code == 400


def test_names_carry_the_project_number_and_paths_take_either(client: TestClient) -> None:
    created = client.post(CUSTOM, json=_custom()).json()
    number = project_number("proj")
    job_id = created["name"].rsplit("/", 1)[1]
    assert created["name"] == f"projects/{number}/locations/us-central1/customJobs/{job_id}"
    by_number = client.get(f"/v1/projects/{number}/locations/us-central1/customJobs/{job_id}")
    assert by_number.json()["name"] == created["name"]
    assert client.get(f"{CUSTOM}/{job_id}").json()["name"] == created["name"]
    for wrong in (f"{TUNING}/{job_id}", f"/v1/projects/proj/locations/europe-west4/customJobs/{job_id}"):
        missing = client.get(wrong)
        assert missing.status_code == 404
        assert missing.json()["error"]["status"] == "NOT_FOUND"
    assert client.get(f"/v1/projects/proj/jobs/{job_id}").status_code == 404  # not an ml v1 job


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (_custom(colour="blue"), "colour"),
        ({"jobSpec": {"workerPoolSpecs": [_pool()]}}, "displayName"),
        (_custom(jobSpec={"workerPoolSpecs": []}), "jobSpec.workerPoolSpecs"),
        (_custom(jobSpec={"workerPoolSpecs": [_pool(executorImageUri="python:3.11")]}), "executorImageUri"),
        (_custom(jobSpec={"workerPoolSpecs": [_pool(packageUris=["/tmp/t.tar.gz"])]}), "packageUris[0]"),
        (_custom(jobSpec={"workerPoolSpecs": [{**_pool(), "replicaCount": "2"}]}), "replicaCount"),
        (_custom(jobSpec={"workerPoolSpecs": [{**_pool(), "replicaCount": "one"}]}), "replicaCount"),
        (
            _custom(
                jobSpec={
                    "workerPoolSpecs": [
                        {"machineSpec": {"machineType": "n1-standard-4"}, "containerSpec": {"imageUri": "i"}}
                    ]
                }
            ),
            "jobSpec.workerPoolSpecs[0].containerSpec",
        ),
        (
            _custom(jobSpec={"workerPoolSpecs": [_pool()], "scheduling": {"timeout": "2h"}}),
            "scheduling.timeout",
        ),
        (_custom(labels={"Team": "a"}), "labels"),
    ],
)
def test_bad_custom_jobs_are_400s_naming_the_field(
    client: TestClient, body: dict[str, Any], field: str
) -> None:
    status, code, named = _violation(client.post(CUSTOM, json=body))
    assert (status, code) == (400, "INVALID_ARGUMENT")
    assert field in named


def test_a_body_that_is_not_an_object_is_refused(client: TestClient) -> None:
    assert _violation(client.post(CUSTOM, json=[1, 2])) == (400, "INVALID_ARGUMENT", "body")
    assert _violation(client.post(TUNING, content=b"{not json")) == (400, "INVALID_ARGUMENT", "body")


def test_an_unknown_enum_number_is_refused(client: TestClient) -> None:
    pool = _pool()
    pool["machineSpec"]["acceleratorType"] = 99
    status, _, named = _violation(client.post(CUSTOM, json=_custom(jobSpec={"workerPoolSpecs": [pool]})))
    assert (status, named) == (400, "jobSpec.workerPoolSpecs[0].machineSpec.acceleratorType")


@pytest.mark.parametrize("location", ["mars-central1", "global"])
def test_a_location_vertex_does_not_serve_is_a_400(client: TestClient, location: str) -> None:
    response = client.post(f"/v1/projects/proj/locations/{location}/customJobs", json=_custom())
    assert _violation(response) == (400, "INVALID_ARGUMENT", "parent")
    assert location in response.json()["error"]["message"]


@pytest.mark.parametrize(
    ("parameter", "field"),
    [
        (
            {"parameterId": "learning rate", "doubleValueSpec": {"minValue": 0.1, "maxValue": 1}},
            "parameterId",
        ),
        ({"parameterId": "x", "doubleValueSpec": {"minValue": 2, "maxValue": 1}}, "doubleValueSpec.minValue"),
        ({"parameterId": "x", "integerValueSpec": {"minValue": "1"}}, "integerValueSpec.maxValue"),
        ({"parameterId": "x"}, "studySpec.parameters[0]"),
        ({"parameterId": "c", "categoricalValueSpec": {"values": ["a", "a"]}}, "categoricalValueSpec.values"),
        (
            {
                "parameterId": "c",
                "categoricalValueSpec": {"values": ["a", "b"]},
                "conditionalParameterSpecs": [
                    {"parentIntValues": {"values": ["1"]}, "parameterSpec": {"parameterId": "y"}}
                ],
            },
            "parentIntValues",
        ),
    ],
)
def test_bad_study_specs_are_400s(client: TestClient, parameter: dict[str, Any], field: str) -> None:
    status, _, named = _violation(client.post(TUNING, json=_tuning([parameter])))
    assert status == 400
    assert field in named


def test_a_tuning_job_is_created_canonical(client: TestClient) -> None:
    parameter = {"parameterId": "n", "integerValueSpec": {"minValue": 1, "maxValue": 8}, "scaleType": 2}
    created = client.post(TUNING, json=_tuning([parameter])).json()
    assert created["maxTrialCount"] == 4
    assert created["studySpec"]["parameters"][0]["integerValueSpec"] == {"minValue": "1", "maxValue": "8"}
    assert created["studySpec"]["parameters"][0]["scaleType"] == "UNIT_LOG_SCALE"


def test_list_filters_are_checked_on_both_faces(client: TestClient) -> None:
    ok = client.get(CUSTOM, params={"filter": 'labels.team="a" AND state!="JOB_STATE_FAILED"'})
    assert ok.status_code == 200
    bad_vertex = [
        'jobId="a" OR 1=1',
        'colour="blue"',
        'state<"JOB_STATE_FAILED"',
        'labels="a"',
        'display_name="a" AND (',
    ]
    for text in bad_vertex:
        assert _violation(client.get(CUSTOM, params={"filter": text}))[:2] == (400, "INVALID_ARGUMENT"), text
    unknown = client.get("/v1/projects/proj/jobs", params={"filter": 'jobId="a" OR 1=1'})
    assert unknown.status_code == 400
    assert "'1'" in unknown.json()["error"]["message"]
    assert client.get("/v1/projects/proj/jobs", params={"filter": "colour=blue"}).status_code == 400
    assert (
        client.get(
            "/v1/projects/proj/jobs", params={"filter": "trainingInput.region=us-central1"}
        ).status_code
        == 200
    )


def test_the_ml_face_refuses_regions_and_parameter_names_vertex_would(client: TestClient) -> None:
    ti: dict[str, Any] = {
        "region": "mars-central1",
        "packageUris": ["gs://bucket/t-0.1.tar.gz"],
        "pythonModule": "t.task",
    }
    region = client.post("/v1/projects/proj/jobs", json={"jobId": "j1", "trainingInput": ti})
    assert _violation(region) == (400, "INVALID_ARGUMENT", "trainingInput.region")
    ti["region"] = "us-central1"
    ti["hyperparameters"] = {
        "goal": "MAXIMIZE",
        "maxTrials": 2,
        "params": [{"parameterName": "learning rate", "type": "DOUBLE", "minValue": 0.1, "maxValue": 1}],
    }
    name = client.post("/v1/projects/proj/jobs", json={"jobId": "j2", "trainingInput": ti})
    assert _violation(name) == (
        400,
        "INVALID_ARGUMENT",
        "trainingInput.hyperparameters.params[0].parameterName",
    )


def test_cancel_queued_then_delete(client: TestClient) -> None:
    created = client.post(CUSTOM, json=_custom()).json()
    path = f"/v1/{created['name']}"
    running = client.delete(path)
    assert _violation(running)[:2] == (400, "FAILED_PRECONDITION")
    assert client.post(f"{path}:cancel", json={}).json() == {}
    job = client.get(path).json()
    assert job["state"] == "JOB_STATE_CANCELLED"
    assert job["error"]["code"] == 1
    assert _violation(client.post(f"{path}:cancel", json={}))[:2] == (400, "FAILED_PRECONDITION")
    operation = client.delete(path).json()
    assert operation["done"] is True
    assert operation["name"].startswith(created["name"] + "/operations/")
    assert client.get(path).status_code == 404
    assert client.delete(path).status_code == 404


def test_lists_page_newest_first_and_leave_trials_out(client: TestClient) -> None:
    names = [client.post(CUSTOM, json=_custom(displayName=f"j{i}")).json()["name"] for i in range(3)]
    first = client.get(CUSTOM, params={"pageSize": 2, "readMask": "name,display_name"}).json()
    assert [j["name"] for j in first["customJobs"]] == names[:0:-1]
    assert set(first["customJobs"][0]) == {"name", "displayName"}
    rest = client.get(CUSTOM, params={"pageToken": first["nextPageToken"]}).json()
    assert [j["name"] for j in rest["customJobs"]] == names[:1]
    assert client.get(CUSTOM, params={"readMask": "colour"}).status_code == 400
    assert client.get(CUSTOM, params={"pageToken": "nonsense"}).status_code == 400
    tuning = client.post(
        TUNING, json=_tuning([{"parameterId": "x", "discreteValueSpec": {"values": [1, 2]}}])
    )
    listed = client.get(TUNING).json()["hyperparameterTuningJobs"]
    assert [j["name"] for j in listed] == [tuning.json()["name"]]
    assert "trials" not in listed[0]


@pytest.mark.parametrize(
    ("mask", "says"),
    [
        ("colour", "has no field 'colour'"),
        ("jobSpec.colour", "CustomJobSpec has no field 'colour'"),
        ("state.name", "has no field 'name'"),  # a scalar ends the path
        ("jobSpec.workerPoolSpecs.machineSpec", "past the repeated field 'workerPoolSpecs'"),
        ("labels.team", "past the repeated field 'labels'"),  # a map is repeated too
    ],
)
def test_a_bad_read_mask_is_a_400_naming_it_before_anything_is_read(
    client: TestClient, mask: str, says: str
) -> None:
    for path in (CUSTOM, TUNING, f"{PARENT}/trainingPipelines"):
        if path != CUSTOM:
            mask = mask.replace("jobSpec.", "trialJobSpec." if path == TUNING else "trainingTaskInputs.")
        response = client.get(path, params={"readMask": mask})  # nothing listed: still a 400
        status, reason, field = _violation(response)
        assert (status, reason, field) == (400, "INVALID_ARGUMENT", "readMask"), (path, mask)
        if path == CUSTOM:
            assert says in response.json()["error"]["message"]


def test_a_read_mask_takes_either_case_and_stops_at_a_repeated_field(client: TestClient) -> None:
    client.post(CUSTOM, json=_custom(labels={"team": "a"}))
    mask = "job_spec.worker_pool_specs,jobSpec.scheduling.timeout,labels"
    listed = client.get(CUSTOM, params={"readMask": mask}).json()["customJobs"][0]
    assert set(listed) == {"jobSpec", "labels"}
    assert listed["jobSpec"]["workerPoolSpecs"][0]["machineSpec"] == {"machineType": "n1-standard-4"}
    assert "scheduling" not in listed["jobSpec"]  # not set: nothing to show

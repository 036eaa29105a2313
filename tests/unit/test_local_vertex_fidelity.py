"""The aiplatform v1 face where Google's protos say more than our old emulator did.

Output-only fields ignored in a create (field_behavior.proto), proto names accepted (proto3
JSON), Vertex's own label rule (custom_job.proto), list filters as strict as job_service.proto
documents, and the fields GET answers with: ``elapsedDuration``, trial CustomJobs that exist,
``webAccessUris``, ``outputUriPrefix`` ending in ``/`` (io.proto). Through the real ASGI app,
with no runner threads: running states and trials are written into the store directly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from airflow_aip.jobs.vertex.diff import diff_vertex_spec
from airflow_aip.local.executor.plans import trial_job_id
from airflow_aip.local.service import TrainingService
from airflow_aip.local.store import project_number

PARENT = "/v1/projects/proj/locations/us-central1"
CUSTOM = f"{PARENT}/customJobs"
TUNING = f"{PARENT}/hyperparameterTuningJobs"
IMAGE = "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-14.py310:latest"
NUMBER = project_number("proj")


def _pool(replicas: int = 1) -> dict[str, Any]:
    return {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": str(replicas),
        "pythonPackageSpec": {
            "executorImageUri": IMAGE,
            "packageUris": ["gs://bucket/t-0.1.tar.gz"],
            "pythonModule": "t.task",
        },
    }


def _custom(**spec: Any) -> dict[str, Any]:
    return {"displayName": "job", "jobSpec": {"workerPoolSpecs": [_pool()], **spec}}


def _tuning(**spec: Any) -> dict[str, Any]:
    return {
        "displayName": "hpt",
        "maxTrialCount": 3,
        "parallelTrialCount": 3,
        "studySpec": {
            "metrics": [{"metricId": "acc", "goal": "MAXIMIZE"}],
            "parameters": [{"parameterId": "lr", "doubleValueSpec": {"minValue": 0.1, "maxValue": 1}}],
        },
        "trialJobSpec": {"workerPoolSpecs": [_pool()], **spec},
    }


def _id(created: dict[str, Any]) -> str:
    return str(created["name"]).rsplit("/", 1)[1]


def _change(
    service: TrainingService, created: dict[str, Any], change: Callable[[dict[str, Any]], None]
) -> None:
    service.store.update(NUMBER, _id(created), change)


def _error(response: Any) -> tuple[int, str, str]:
    error = response.json()["error"]
    field = error["details"][0]["fieldViolations"][0]["field"] if "details" in error else ""
    return response.status_code, error["status"], field


# -- requests ---------------------------------------------------------------------------------


@pytest.mark.parametrize("alt", ["json", "json;enum-encoding=int"])
def test_get_then_create_the_same_body_clones_the_job(client: TestClient, alt: str) -> None:
    first = client.post(CUSTOM, json=_custom() | {"labels": {"team": "a"}}).json()
    client.post(f"/v1/{first['name']}:cancel", json={})
    got = client.get(f"/v1/{first['name']}", params={"$alt": alt}).json()
    assert {"name", "state", "createTime", "updateTime", "endTime", "error"} <= set(got)
    clone = client.post(CUSTOM, json=got)
    assert clone.status_code == 200, clone.json()
    made = clone.json()
    assert made["name"] != first["name"]
    assert made["state"] == "JOB_STATE_QUEUED"  # the server's, not the body's
    assert "error" not in made
    assert "endTime" not in made
    assert made["labels"] == {"team": "a"}


def test_a_tuning_job_with_trials_clones(client: TestClient, service: TrainingService) -> None:
    first = client.post(TUNING, json=_tuning()).json()
    _change(service, first, _with_trials)
    got = client.get(f"/v1/{first['name']}").json()
    assert got["trials"]
    made = client.post(TUNING, json=got).json()
    assert made["state"] == "JOB_STATE_QUEUED"
    assert "trials" not in made


def test_proto_field_names_are_taken_and_answered_in_camel_case(client: TestClient) -> None:
    body = {
        "display_name": "snake",
        "labels": {"my_key": "my_value"},
        "job_spec": {
            "worker_pool_specs": [
                {
                    "machine_spec": {"machine_type": "n1-standard-4"},
                    "replica_count": 1,
                    "python_package_spec": {
                        "executor_image_uri": IMAGE,
                        "package_uris": ["gs://bucket/t-0.1.tar.gz"],
                        "python_module": "t.task",
                        "env": [{"name": "MY_VAR", "value": "x"}],
                    },
                }
            ],
            "base_output_directory": {"output_uri_prefix": "gs://bucket/out/"},
            "enable_web_access": True,
        },
    }
    created = client.post(CUSTOM, json=body)
    assert created.status_code == 200, created.json()
    got = client.get(f"/v1/{created.json()['name']}").json()
    assert got["displayName"] == "snake"
    assert got["labels"] == {"my_key": "my_value"}  # map keys are data, not field names
    pool = got["jobSpec"]["workerPoolSpecs"][0]
    assert pool["machineSpec"] == {"machineType": "n1-standard-4"}
    assert pool["replicaCount"] == "1"
    assert pool["pythonPackageSpec"]["executorImageUri"] == IMAGE
    assert pool["pythonPackageSpec"]["env"] == [{"name": "MY_VAR", "value": "x"}]
    assert got["jobSpec"]["baseOutputDirectory"] == {"outputUriPrefix": "gs://bucket/out/"}
    assert got["jobSpec"]["enableWebAccess"] is True
    assert "display_name" not in got


def test_a_field_spelled_both_ways_is_a_400_naming_it(client: TestClient) -> None:
    both = client.post(CUSTOM, json=_custom() | {"display_name": "other"})
    assert _error(both) == (400, "INVALID_ARGUMENT", "displayName")
    nested = _custom()
    nested["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["machine_type"] = "n1-standard-8"
    status, _, field = _error(client.post(CUSTOM, json=nested))
    assert (status, field) == (400, "jobSpec.workerPoolSpecs[0].machineSpec.machineType")
    assert _error(client.post(CUSTOM, json=_custom() | {"displayname": "x"}))[2] == "displayname"


def test_vertex_labels_take_64_characters_and_international_letters(client: TestClient) -> None:
    labels = {"k" * 64: "v" * 64, "équipe": "données", "チーム": "機械学習"}
    created = client.post(CUSTOM, json=_custom() | {"labels": labels})
    assert created.status_code == 200, created.json()
    assert created.json()["labels"] == labels
    for bad in ({"k" * 65: "v"}, {"k": "v" * 65}, {"Équipe": "a"}, {"k": "A"}):
        status, code, field = _error(client.post(CUSTOM, json=_custom() | {"labels": bad}))
        assert (status, code) == (400, "INVALID_ARGUMENT"), bad
        assert field == f"labels.{next(iter(bad))}"
    too_many = {f"k{i}": "v" for i in range(65)}
    assert _error(client.post(CUSTOM, json=_custom() | {"labels": too_many}))[:2] == (400, "INVALID_ARGUMENT")


def test_ml_v1_keeps_its_own_label_rule(client: TestClient) -> None:
    job = {
        "jobId": "j1",
        "labels": {"équipe": "a"},
        "trainingInput": {
            "region": "us-central1",
            "packageUris": ["gs://bucket/t.tar.gz"],
            "pythonModule": "t.task",
        },
    }
    assert _error(client.post("/v1/projects/proj/jobs", json=job)) == (
        400,
        "INVALID_ARGUMENT",
        "labels.équipe",
    )


def test_the_output_prefix_is_echoed_with_its_slash_and_adoption_still_matches(client: TestClient) -> None:
    body = _custom(baseOutputDirectory={"outputUriPrefix": "gs://bucket/out"})
    got = client.get(f"/v1/{client.post(CUSTOM, json=body).json()['name']}").json()
    assert got["jobSpec"]["baseOutputDirectory"]["outputUriPrefix"] == "gs://bucket/out/"
    assert diff_vertex_spec(body, got) == []


# -- list filters -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        'labels.team!="a"',
        'labels.team:"a"',
        'create_time>"2021-05-18"',
        'create_time>"yesterday"',
        'create_time>"2021-05-18 00:00:00Z"',
        "state=SUCCEEDED",
        'state="JOB_STATE_DONE"',
    ],
)
def test_filters_google_documents_as_invalid_are_400s(client: TestClient, text: str) -> None:
    response = client.get(CUSTOM, params={"filter": text})
    assert _error(response)[:2] == (400, "INVALID_ARGUMENT"), text


def test_the_documented_filter_forms_still_match(client: TestClient) -> None:
    made = [
        client.post(CUSTOM, json=_custom() | {"displayName": name, "labels": labels}).json()
        for name, labels in (("my_job_1", {"team": "a"}), ("MY_JOB", {}), ("other", {"team": "b"}))
    ]

    def names(text: str) -> list[str]:
        response = client.get(CUSTOM, params={"filter": text})
        assert response.status_code == 200, response.json()
        return sorted(job["displayName"] for job in response.json().get("customJobs", []))

    assert names('labels.team="a"') == ["my_job_1"]
    assert names("labels.team:*") == ["my_job_1", "other"]
    assert names('display_name:"my_job_*"') == ["my_job_1"]
    assert names('display_name:"MY_JOB"') == ["MY_JOB"]  # case-sensitive
    assert names('display_name:"my_job"') == []
    assert names('state="JOB_STATE_QUEUED" AND NOT display_name="other"') == ["MY_JOB", "my_job_1"]
    assert names('create_time>"2021-05-18T00:00:00Z"') == ["MY_JOB", "my_job_1", "other"]
    assert names('create_time<"2021-05-18T00:00:00+02:00"') == []
    # "=" compares instants: the same time written in another offset and precision.
    created = made[0]["createTime"]
    assert names(f'create_time="{created}"') == ["my_job_1"]
    assert names(f'create_time="{created[:-1]}000+00:00"') == ["my_job_1"]


def test_the_ml_v1_face_keeps_gcloud_leniency(client: TestClient) -> None:
    job = {
        "jobId": "j1",
        "trainingInput": {
            "region": "us-central1",
            "packageUris": ["gs://bucket/t.tar.gz"],
            "pythonModule": "t.task",
        },
    }
    assert client.post("/v1/projects/proj/jobs", json=job).status_code == 200
    listed = client.get("/v1/projects/proj/jobs", params={"filter": "state:queued"}).json()
    assert [j["jobId"] for j in listed["jobs"]] == ["j1"]


# -- what GET answers -----------------------------------------------------------------------------

START = "2026-01-01T00:00:00.000000Z"


def _with_trials(job: dict[str, Any]) -> None:
    job["state"] = "RUNNING"
    job["runningSince"] = START
    points = [
        {"trainingStep": "1", "objectiveValue": 0.5, "reportTime": "2026-01-01T00:00:05.000000Z"},
        {"trainingStep": "2", "objectiveValue": 0.7, "reportTime": "2026-01-01T00:00:12.500000Z"},
    ]
    job["trainingOutput"] = {
        "trials": [
            {
                "trialId": "1",
                "hyperparameters": {"lr": "0.5"},
                "state": "SUCCEEDED",
                "startTime": START,
                "endTime": "2026-01-01T00:00:13.000000Z",
                "allMetrics": points,
                "finalMetric": {"trainingStep": "2", "objectiveValue": 0.7},
            },
            {
                "trialId": "2",
                "hyperparameters": {"lr": "0.2"},
                "state": "SUCCEEDED",
                "startTime": START,
                "endTime": "2026-01-01T00:01:00.000123Z",
                "allMetrics": [{"trainingStep": "3", "objectiveValue": 0.6}],
                "finalMetric": {"trainingStep": "3", "objectiveValue": 0.6},
            },
            {"trialId": "3", "hyperparameters": {"lr": "0.9"}, "state": "RUNNING", "startTime": START},
        ]
    }


def test_measurements_carry_their_elapsed_duration(client: TestClient, service: TrainingService) -> None:
    created = client.post(TUNING, json=_tuning()).json()
    _change(service, created, _with_trials)
    first, second, _ = client.get(f"/v1/{created['name']}").json()["trials"]
    assert [m["elapsedDuration"] for m in first["measurements"]] == ["5s", "12.500s"]
    assert first["finalMeasurement"]["elapsedDuration"] == "13s"  # no stamp of its own: the trial's end
    assert second["finalMeasurement"]["elapsedDuration"] == "60.000123s"
    assert "elapsedDuration" not in second["measurements"][0]  # no stamp, not taken at the end


def test_each_trial_names_a_distinct_custom_job_a_get_finds(
    client: TestClient, service: TrainingService
) -> None:
    created = client.post(TUNING, json=_tuning(enableWebAccess=True)).json()
    _change(service, created, _with_trials)
    # A GET on a trial's CustomJob before any GET of its tuning job, as after a restart.
    expected = trial_job_id(_id(created), "2")
    direct = client.get(f"{CUSTOM}/{expected}")
    assert direct.status_code == 200, direct.json()
    trials = client.get(f"/v1/{created['name']}").json()["trials"]
    names = [t["customJob"] for t in trials]
    ids = [name.rsplit("/", 1)[1] for name in names]
    assert len(set(ids)) == 3
    assert all(len(i) == 19 and i.isdigit() for i in ids)
    assert str(int(_id(created)) + 1) not in ids  # unrelated to the tuning job's ID, as on Vertex
    for trial, name in zip(trials, names, strict=True):
        job = client.get(f"/v1/{name}").json()
        assert job["name"] == name
        assert job["displayName"].endswith(f"-trial-{trial['id']}")
    assert client.get(f"/v1/{names[0]}").json()["state"] == "JOB_STATE_SUCCEEDED"
    running = client.get(f"/v1/{names[2]}").json()
    assert set(running["webAccessUris"]) == {"workerpool0-0"}
    assert set(trials[2]["webAccessUris"]) == {"workerpool0-0"}
    assert "webAccessUris" not in trials[0]
    assert client.get(f"{CUSTOM}/{int(ids[0]) + 1}").status_code == 404


def test_a_new_trial_is_found_after_the_index_was_built(client: TestClient, service: TrainingService) -> None:
    created = client.post(TUNING, json=_tuning()).json()
    assert client.get(f"{CUSTOM}/{trial_job_id(_id(created), '1')}").status_code == 404  # builds the index
    _change(service, created, _with_trials)
    trials = client.get(f"/v1/{created['name']}").json()["trials"]
    assert client.get(f"/v1/{trials[0]['customJob']}").status_code == 200
    client.post(f"/v1/{created['name']}:cancel", json={})
    _change(service, created, lambda job: job.update(state="CANCELLED"))
    assert client.delete(f"/v1/{created['name']}").status_code == 200
    assert client.get(f"/v1/{trials[0]['customJob']}").status_code == 404


def test_web_access_uris_only_when_asked_and_while_running(
    client: TestClient, service: TrainingService
) -> None:
    spec = {"workerPoolSpecs": [_pool(), _pool(replicas=2)], "enableWebAccess": True}
    asked = client.post(CUSTOM, json=_custom() | {"jobSpec": spec}).json()
    plain = client.post(CUSTOM, json=_custom()).json()
    assert "webAccessUris" not in client.get(f"/v1/{asked['name']}").json()  # QUEUED
    for job in (asked, plain):
        _change(service, job, lambda j: j.update(state="RUNNING", runningSince=START))
    uris = client.get(f"/v1/{asked['name']}").json()["webAccessUris"]
    assert set(uris) == {"workerpool0-0", "workerpool1-0", "workerpool1-1"}
    assert len(set(uris.values())) == 3
    assert all(
        u.startswith("https://") and u.endswith("-dot-us-central1.aiplatform-training.googleusercontent.com")
        for u in uris.values()
    )
    assert "webAccessUris" not in client.get(f"/v1/{plain['name']}").json()
    as_numbers = client.get(f"/v1/{asked['name']}", params={"$alt": "json;enum-encoding=int"}).json()
    assert as_numbers["webAccessUris"] == uris

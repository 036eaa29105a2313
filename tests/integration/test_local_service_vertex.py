"""The local service's aiplatform v1 face, driven by the discovery client of ``aiplatform.v1.json``.

Raw bodies, as an operator (or ``gcloud ai custom-jobs``) sends them: the client builds exactly
the URLs Google's would, with only the endpoint overridden. One ``aip-local serve`` per session;
each test uses its own project, so lists and logs see only its jobs.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from googleapiclient.errors import HttpError

from airflow_aip.local.store import project_number
from tests.fixtures.local_service import LocalService, StagedTrainer, log_entries, wait_for_job
from tests.fixtures.vertex import LOCATION, VERTEX_TERMINAL, aiplatform, grid_tuning_job, worker_pool
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def project() -> str:
    return f"proj-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def jobs(local_service: LocalService) -> Any:
    return aiplatform(local_service.url).projects().locations().customJobs()


@pytest.fixture
def tuning(local_service: LocalService) -> Any:
    return aiplatform(local_service.url).projects().locations().hyperparameterTuningJobs()


def _error(exc: HttpError) -> dict[str, Any]:
    error: dict[str, Any] = json.loads(exc.content)["error"]
    return error


def test_custom_job_runs_with_the_environment_vertex_sets(
    jobs: Any, local_service: LocalService, staged_trainer: StagedTrainer, project: str
) -> None:
    base = f"gs://{staged_trainer.bucket}/vertex/{uuid.uuid4().hex[:8]}"
    pool = worker_pool(
        staged_trainer,
        "succeed",
        [f"--job-dir={base}", "--message=hi"],
        env=[{"name": "AIP_TEST_ENV", "value": "$(AIP_MODEL_DIR)export"}],
    )
    body = {
        "displayName": "ok",
        "labels": {"team": "a"},
        "jobSpec": {
            "workerPoolSpecs": [pool],
            "baseOutputDirectory": {"outputUriPrefix": base},
            "scheduling": {"timeout": "600s"},
        },
    }
    created = jobs.create(parent=f"projects/{project}/locations/{LOCATION}", body=body).execute()
    number = project_number(project)
    job_id = created["name"].rsplit("/", 1)[1]
    assert created["name"] == f"projects/{number}/locations/{LOCATION}/customJobs/{job_id}"
    assert job_id.isdigit()
    assert len(job_id) == 19
    assert created["state"] in {"JOB_STATE_QUEUED", "JOB_STATE_PENDING"}
    assert created["jobSpec"]["workerPoolSpecs"][0]["replicaCount"] == "1"

    job = wait_for_job(jobs, created["name"], VERTEX_TERMINAL)
    assert job["state"] == "JOB_STATE_SUCCEEDED", job.get("error")
    assert job["createTime"] <= job["startTime"] <= job["endTime"] <= job["updateTime"]
    # the project ID addresses the same job as the number
    same = jobs.get(name=f"projects/{project}/locations/{LOCATION}/customJobs/{job_id}").execute()
    assert same["name"] == created["name"]
    report = staged_trainer.read_json(base + "/report.json")
    assert report["AIP_MODEL_DIR"] == base + "/model/"
    assert report["AIP_TENSORBOARD_LOG_DIR"] == base + "/logs/"
    assert report["AIP_TEST_ENV"] == base + "/model/export"  # $(VAR) expanded, as Vertex does
    assert report["CLOUD_ML_JOB_ID"] == job_id
    assert report["CLOUD_ML_PROJECT_ID"] == number
    assert "--job-dir" not in report["argv"][-1]  # Vertex passes no --job-dir of its own
    cluster_spec = json.loads(report["CLUSTER_SPEC"])
    assert cluster_spec["task"] == {"type": "workerpool0", "index": 0}
    assert list(cluster_spec["cluster"]) == ["workerpool0"]
    assert report["TF_CONFIG"] is None  # Vertex AI: not on a single-replica job
    entries = log_entries(local_service.url, project, job_id)
    tasks = {e["resource"]["labels"]["task_name"] for e in entries}
    assert "workerpool0-0" in tasks
    assert {e["resource"]["type"] for e in entries} == {"ml_job"}
    assert any("in an isolated environment" in e["textPayload"] for e in entries)


def test_failed_job_names_replica_status_and_links_its_logs(
    jobs: Any, staged_trainer: StagedTrainer, project: str
) -> None:
    body = {"displayName": "bad", "jobSpec": {"workerPoolSpecs": [worker_pool(staged_trainer, "fail", [])]}}
    created = jobs.create(parent=f"projects/{project}/locations/{LOCATION}", body=body).execute()
    job = wait_for_job(jobs, created["name"], VERTEX_TERMINAL)
    assert job["state"] == "JOB_STATE_FAILED"
    assert job["error"]["code"] == 3
    assert job["error"]["message"].startswith(
        "The replica workerpool0-0 exited with a non-zero status of 3. "
        "To find out more about why your job exited please check the logs: "
    )
    assert "the training data is empty" not in job["error"]["message"]  # no traceback: in the log only


def test_cancel_then_delete_and_the_preconditions(
    jobs: Any, staged_trainer: StagedTrainer, project: str
) -> None:
    spec = {"workerPoolSpecs": [worker_pool(staged_trainer, "sleep", [])]}
    body = {"displayName": "sleepy", "jobSpec": spec}
    created = jobs.create(parent=f"projects/{project}/locations/{LOCATION}", body=body).execute()
    name = created["name"]
    with pytest.raises(HttpError) as running:
        jobs.delete(name=name).execute()
    assert running.value.resp.status == 400
    assert _error(running.value)["status"] == "FAILED_PRECONDITION"
    assert jobs.cancel(name=name, body={}).execute() == {}
    job = wait_for_job(jobs, name, VERTEX_TERMINAL)
    assert job["state"] == "JOB_STATE_CANCELLED"
    assert job["error"]["code"] == 1
    with pytest.raises(HttpError) as finished:
        jobs.cancel(name=name, body={}).execute()
    assert _error(finished.value)["status"] == "FAILED_PRECONDITION"
    operation = jobs.delete(name=name).execute()
    assert operation["done"] is True
    assert operation["metadata"]["@type"].endswith("DeleteOperationMetadata")
    with pytest.raises(HttpError) as gone:
        jobs.get(name=name).execute()
    assert gone.value.resp.status == 404
    assert _error(gone.value)["status"] == "NOT_FOUND"


def test_timeout_fails_the_job(jobs: Any, staged_trainer: StagedTrainer, project: str) -> None:
    spec = {"workerPoolSpecs": [worker_pool(staged_trainer, "sleep", [])], "scheduling": {"timeout": "1s"}}
    created = jobs.create(
        parent=f"projects/{project}/locations/{LOCATION}", body={"displayName": "slow", "jobSpec": spec}
    ).execute()
    job = wait_for_job(jobs, created["name"], VERTEX_TERMINAL)
    assert job["state"] == "JOB_STATE_FAILED"
    assert "scheduling.timeout (1s)" in job["error"]["message"]


def test_tuning_job_runs_trials_with_their_own_output(
    tuning: Any, jobs: Any, staged_trainer: StagedTrainer, project: str
) -> None:
    base = f"gs://{staged_trainer.bucket}/hpt/{uuid.uuid4().hex[:8]}"
    body = {
        "displayName": "hpt",
        "maxTrialCount": 3,
        "parallelTrialCount": 2,
        "studySpec": {
            "metrics": [
                {"metricId": "score", "goal": 1},
                {"metricId": "loss", "goal": "MINIMIZE"},
            ],  # 1: MAXIMIZE
            "parameters": [
                {"parameterId": "x", "integerValueSpec": {"minValue": 1, "maxValue": "5"}},
                {"parameterId": "kind", "categoricalValueSpec": {"values": ["good", "bad"]}},
            ],
            "algorithm": "RANDOM_SEARCH",
        },
        "trialJobSpec": {
            "workerPoolSpecs": [
                worker_pool(staged_trainer, "tune", ["--metric-tag=score", "--also-tag=loss", "--report"])
            ],
            "baseOutputDirectory": {"outputUriPrefix": base},
        },
    }
    created = tuning.create(parent=f"projects/{project}/locations/{LOCATION}", body=body).execute()
    assert created["studySpec"]["metrics"][0]["goal"] == "MAXIMIZE"
    job = wait_for_job(tuning, created["name"], VERTEX_TERMINAL, timeout=180)
    assert job["state"] == "JOB_STATE_SUCCEEDED", job.get("error")
    trials = job["trials"]
    assert [t["id"] for t in trials] == ["1", "2", "3"]
    for trial in trials:
        assert trial["state"] == "SUCCEEDED"
        values = {p["parameterId"]: p["value"] for p in trial["parameters"]}
        assert isinstance(values["x"], int)
        assert values["kind"] in {"good", "bad"}
        measurement = trial["finalMeasurement"]
        assert measurement["stepCount"] == "300"
        assert [m["stepCount"] for m in trial["measurements"]] == ["100", "200", "300"]
        assert trial["measurements"][-1]["metrics"][0] == measurement["metrics"][0]
        assert [m["metricId"] for m in measurement["metrics"]] == ["score", "loss"]  # the first is optimized
        assert measurement["metrics"][1]["value"] == -measurement["metrics"][0]["value"]
        assert trial["startTime"] <= trial["endTime"]
        trial_job = jobs.get(name=trial["customJob"]).execute()
        assert trial_job["state"] == "JOB_STATE_SUCCEEDED"
        assert trial_job["jobSpec"]["baseOutputDirectory"]["outputUriPrefix"] == f"{base}/{trial['id']}/"
        assert f"--x={values['x']}" in trial_job["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["args"]
        report = staged_trainer.read_json(f"{base}/{trial['id']}/model/report.json")
        assert report["CLOUD_ML_TRIAL_ID"] == trial["id"]
        assert json.loads(report["CLUSTER_SPEC"])["task"]["trial"] == trial["id"]
    listed = tuning.list(parent=f"projects/{project}/locations/{LOCATION}").execute()
    assert [j["name"] for j in listed["hyperparameterTuningJobs"]] == [created["name"]]
    assert "trials" not in listed["hyperparameterTuningJobs"][0]


def test_list_filters_pages_and_read_mask(jobs: Any, staged_trainer: StagedTrainer, project: str) -> None:
    parent = f"projects/{project}/locations/{LOCATION}"
    names = []
    for i in range(3):
        body = {
            "displayName": f"listed-{i}",
            "labels": {"run": "r1" if i < 2 else "r2"},
            "jobSpec": {"workerPoolSpecs": [worker_pool(staged_trainer, "fail", [])]},
        }
        names.append(jobs.create(parent=parent, body=body).execute()["name"])
    page = jobs.list(parent=parent, filter='labels.run="r1"', pageSize=1, readMask="name,labels").execute()
    assert set(page["customJobs"][0]) == {"name", "labels"}
    second = jobs.list(parent=parent, filter='labels.run="r1"', pageToken=page["nextPageToken"]).execute()
    seen = [page["customJobs"][0]["name"], *(j["name"] for j in second["customJobs"])]
    assert seen == [names[1], names[0]]
    assert "nextPageToken" not in second
    wild = jobs.list(parent=parent, filter='display_name:"listed-*" AND NOT labels.run="r1"').execute()
    assert [j["name"] for j in wild["customJobs"]] == [names[2]]
    other = jobs.list(parent=f"projects/{project}/locations/europe-west4").execute()
    assert other == {}


def test_worker_pools_become_replicas_with_vertex_cluster_names(
    jobs: Any, staged_trainer: StagedTrainer, project: str
) -> None:
    base = f"gs://{staged_trainer.bucket}/pools/{uuid.uuid4().hex[:8]}"
    primary = worker_pool(staged_trainer, "succeed", [f"--job-dir={base}"])
    workers = {**worker_pool(staged_trainer, "succeed", [f"--job-dir={base}"]), "replicaCount": "2"}
    evaluator = worker_pool(staged_trainer, "sleep", [])
    body = {"displayName": "pools", "jobSpec": {"workerPoolSpecs": [primary, workers, {}, evaluator]}}
    created = jobs.create(parent=f"projects/{project}/locations/{LOCATION}", body=body).execute()
    job = wait_for_job(jobs, created["name"], VERTEX_TERMINAL)
    assert job["state"] == "JOB_STATE_SUCCEEDED", job.get("error")
    worker = staged_trainer.read_json(base + "/report-worker-1.json")
    cluster_spec = json.loads(worker["CLUSTER_SPEC"])
    assert sorted(cluster_spec["cluster"]) == ["workerpool0", "workerpool1", "workerpool3"]
    assert len(cluster_spec["cluster"]["workerpool1"]) == 2
    assert cluster_spec["task"] == {"type": "workerpool1", "index": 1}
    tf_config = json.loads(worker["TF_CONFIG"])
    assert sorted(tf_config["cluster"]) == ["chief", "worker"]  # evaluators are never in TF's cluster
    assert tf_config["task"] == {"type": "worker", "index": 1}
    assert tf_config["job"]["worker_pool_specs"][1]["replica_count"] == "2"
    # PyTorch's nodes are the primary and the workers: the evaluator is no rank of the world.
    assert (worker["RANK"], worker["WORLD_SIZE"]) == ("2", "3")


def _hpt_body(trainer: StagedTrainer, args: list[str], **extra: Any) -> dict[str, Any]:
    return grid_tuning_job(worker_pool(trainer, "tune", args), 2, **extra)


def test_failed_trials_are_infeasible_and_max_failed_fails_the_job(
    tuning: Any, staged_trainer: StagedTrainer, project: str
) -> None:
    body = _hpt_body(staged_trainer, ["--fail-when-x=1"], maxFailedTrialCount=1)
    created = tuning.create(parent=f"projects/{project}/locations/{LOCATION}", body=body).execute()
    job = wait_for_job(tuning, created["name"], VERTEX_TERMINAL)
    assert job["state"] == "JOB_STATE_FAILED"
    assert "reaching maxFailedTrials (1)" in job["error"]["message"]
    failed = [t for t in job["trials"] if t["parameters"] == [{"parameterId": "x", "value": 1}]]
    assert [t["state"] for t in failed] == ["INFEASIBLE"]
    assert failed[0]["infeasibleReason"]


def test_cancelling_a_tuning_job_stops_its_trials(
    tuning: Any, local_service: LocalService, staged_trainer: StagedTrainer, project: str
) -> None:
    body = _hpt_body(staged_trainer, ["--hold=60", "--steps=1"])
    created = tuning.create(parent=f"projects/{project}/locations/{LOCATION}", body=body).execute()
    seen: list[str] = []

    def with_trials() -> dict[str, Any] | None:
        job: dict[str, Any] = tuning.get(name=created["name"]).execute()
        seen.append(job["state"])
        return job if job.get("trials") else None

    job = wait_until(with_trials, 60, "trial of the tuning job", state=lambda: f"job {seen[-1]}")
    assert job["trials"][0]["state"] == "ACTIVE"
    job_id = created["name"].rsplit("/", 1)[1]

    def trial_lines() -> list[dict[str, Any]]:
        return log_entries(local_service.url, project, job_id, 'labels."ml.googleapis.com/trial_id"="1"')

    # The trial's replica has started printing (its runtime takes a moment to start).
    wait_until(
        lambda: any(e["resource"]["labels"]["task_name"] == "workerpool0-0" for e in trial_lines()),
        60,
        "line of the trial's replica",
    )
    tuning.cancel(name=created["name"], body={}).execute()
    job = wait_for_job(tuning, created["name"], VERTEX_TERMINAL)
    assert job["state"] == "JOB_STATE_CANCELLED"
    assert job["error"]["code"] == 1
    assert [t["state"] for t in job["trials"]] == ["INFEASIBLE"]
    assert {e["resource"]["labels"]["project_id"] for e in trial_lines()} == {project}

"""The local training service, driven only through its HTTP API with google-api-python-client.

One ``aip-local serve`` process serves the whole module; each test uses its own project so
lists and logs do not see other tests' jobs.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from googleapiclient.errors import HttpError

from tests.fixtures.local_service import (
    TERMINAL,
    LocalService,
    StagedTrainer,
    log_entries,
    process_gone,
    wait_for_state,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def project() -> str:
    return f"proj-{uuid.uuid4().hex[:10]}"


def _create(
    ml: Any, project: str, job_id: str, training_input: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    body = {"jobId": job_id, "trainingInput": training_input, **extra}
    job: dict[str, Any] = ml.projects().jobs().create(parent=f"projects/{project}", body=body).execute()
    return job


def _error(exc: HttpError) -> dict[str, Any]:
    error: dict[str, Any] = json.loads(exc.content)["error"]
    return error


def test_job_succeeds_with_the_environment_the_real_service_sets(
    local_service: LocalService, staged_trainer: StagedTrainer, project: str
) -> None:
    ml = local_service.ml()
    ti = staged_trainer.training_input("succeed", ["--message", "hi there"])
    created = _create(ml, project, "ok_job", ti, labels={"team": "a"})
    assert created["state"] == "QUEUED"
    assert created["trainingInput"]["pythonModule"] == "aip_test_trainer.succeed"

    job = wait_for_state(ml, f"projects/{project}/jobs/ok_job", TERMINAL)

    assert job["state"] == "SUCCEEDED", job.get("errorMessage")
    assert job["createTime"] <= job["startTime"] <= job["endTime"]
    assert job["labels"] == {"team": "a"}
    report = staged_trainer.read_json(ti["jobDir"] + "/report.json")
    assert report["message"] == "hi there"
    assert report["argv"][-2:] == ["--job-dir", ti["jobDir"]]
    assert report["CLOUD_ML_JOB_ID"] == "ok_job"
    assert report["CLOUD_ML_TRIAL_ID"] is None
    assert report["STORAGE_EMULATOR_HOST"] == staged_trainer.gcs_url
    assert report["AIP_MODEL_DIR"] == ti["jobDir"] + "/model/"
    tf_config = json.loads(report["TF_CONFIG"])
    assert tf_config["task"] == {"type": "master", "index": 0}
    assert tf_config["environment"] == "cloud"
    assert tf_config["job"]["python_module"] == "aip_test_trainer.succeed"
    assert list(json.loads(report["CLUSTER_SPEC"])["cluster"]) == ["master"]
    work = Path(report["cwd"]).resolve()
    assert work.is_relative_to(local_service.data_dir.resolve() / "projects" / project / "jobs" / "ok_job")

    entries = log_entries(local_service.url, project, "ok_job")
    lines = {(e["resource"]["labels"]["task_name"], e["severity"], e["textPayload"]) for e in entries}
    assert ("master-replica-0", "INFO", "training with message=hi there") in lines
    assert ("master-replica-0", "ERROR", "a warning on stderr") in lines
    assert [e["timestamp"] for e in entries] == sorted(e["timestamp"] for e in entries)


def test_failed_job_reports_exit_code_and_links_its_logs_as_google_does(
    local_service: LocalService, staged_trainer: StagedTrainer, project: str
) -> None:
    ml = local_service.ml()
    _create(ml, project, "bad_job", staged_trainer.training_input("fail"))

    job = wait_for_state(ml, f"projects/{project}/jobs/bad_job", TERMINAL)

    assert job["state"] == "FAILED"
    message = job["errorMessage"]
    assert message.startswith("The replica master 0 exited with a non-zero status of 3. To find out more")
    assert "ValueError: the training data is empty" not in message  # no traceback: stderr is in the log
    link = message.rsplit("please check the logs: ", 1)[1]
    assert link.endswith(
        f"/logs/viewer?project={project}&resource=ml_job%2Fjob_id%2Fbad_job&advancedFilter="
        "resource.type%3D%22ml_job%22%0Aresource.labels.job_id%3D%22bad_job%22"
    )
    opened = httpx.get(link, follow_redirects=True)
    assert opened.status_code == 200
    assert "bad_job" in opened.text  # the job's console page
    entries = log_entries(local_service.url, project, "bad_job")
    lines = {(e["resource"]["labels"]["task_name"], e["textPayload"]) for e in entries}
    assert ("master-replica-0", "ValueError: the training data is empty") in lines
    assert "endTime" in job


def test_cancel_stops_the_running_process(
    local_service: LocalService, staged_trainer: StagedTrainer, project: str
) -> None:
    ml = local_service.ml()
    name = f"projects/{project}/jobs/sleepy"
    ti = staged_trainer.training_input("sleep")
    _create(ml, project, "sleepy", ti)
    wait_for_state(ml, name, {"RUNNING"})
    sleeper = staged_trainer.wait_for_json(ti["jobDir"] + "/sleeper.json")

    assert ml.projects().jobs().cancel(name=name, body={}).execute() == {}
    job = wait_for_state(ml, name, TERMINAL)

    assert job["state"] == "CANCELLED"
    assert process_gone(sleeper["pid"])
    with pytest.raises(HttpError) as finished:
        ml.projects().jobs().cancel(name=name, body={}).execute()
    assert finished.value.resp.status == 400
    assert _error(finished.value)["status"] == "FAILED_PRECONDITION"


def test_max_running_time_cancels_the_job_and_says_why(
    local_service: LocalService, staged_trainer: StagedTrainer, project: str
) -> None:
    ml = local_service.ml()
    ti = staged_trainer.training_input("sleep", scheduling={"maxRunningTime": "2s"})
    _create(ml, project, "too_long", ti)

    job = wait_for_state(ml, f"projects/{project}/jobs/too_long", TERMINAL)

    assert job["state"] == "CANCELLED"
    assert "maxRunningTime (2s)" in job["errorMessage"]


def test_create_errors_match_google(
    local_service: LocalService, staged_trainer: StagedTrainer, project: str
) -> None:
    ml = local_service.ml()
    ti = staged_trainer.training_input("fail")
    _create(ml, project, "dup_job", ti)

    with pytest.raises(HttpError) as duplicate:
        _create(ml, project, "dup_job", ti)
    with pytest.raises(HttpError) as missing:
        ml.projects().jobs().get(name=f"projects/{project}/jobs/no_such_job").execute()
    with pytest.raises(HttpError) as bad_id:
        _create(ml, project, "9starts_with_digit", ti)

    assert (duplicate.value.resp.status, _error(duplicate.value)["status"]) == (409, "ALREADY_EXISTS")
    assert (missing.value.resp.status, _error(missing.value)["status"]) == (404, "NOT_FOUND")
    assert (bad_id.value.resp.status, _error(bad_id.value)["status"]) == (400, "INVALID_ARGUMENT")
    assert _error(bad_id.value)["message"].startswith("Field: job_id Error: ")  # AI Platform's words


def test_list_filters_and_pages(
    local_service: LocalService, staged_trainer: StagedTrainer, project: str
) -> None:
    ml = local_service.ml()
    for index, team in enumerate(["a", "b", "a"]):
        _create(ml, project, f"listed_{index}", staged_trainer.training_input("fail"), labels={"team": team})
    jobs = ml.projects().jobs()

    first = jobs.list(parent=f"projects/{project}", pageSize=2).execute()
    second = jobs.list(parent=f"projects/{project}", pageSize=2, pageToken=first["nextPageToken"]).execute()
    team_a = jobs.list(parent=f"projects/{project}", filter="labels.team=a").execute()
    empty = jobs.list(parent=f"projects/{project}", filter="jobId:nothing*").execute()

    assert [j["jobId"] for j in first["jobs"] + second["jobs"]] == ["listed_2", "listed_1", "listed_0"]
    assert "nextPageToken" not in second
    assert sorted(j["jobId"] for j in team_a["jobs"]) == ["listed_0", "listed_2"]
    assert empty == {}
    with pytest.raises(HttpError) as bad_filter:
        jobs.list(parent=f"projects/{project}", filter="state=(").execute()
    assert bad_filter.value.resp.status == 400


def test_request_body_over_one_mebibyte_is_refused(local_service: LocalService, project: str) -> None:
    body = {"jobId": "huge", "labels": {"x": "y" * (1 << 20)}}
    response = httpx.post(f"{local_service.url}v1/projects/{project}/jobs", json=body, timeout=30)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == 413


def test_second_job_with_the_same_packages_reuses_the_environment(
    local_service: LocalService, fake_gcs: Any, tmp_path: Path, project: str
) -> None:
    from tests.fixtures.local_service import stage_trainer

    # A version no other test uses: the first job here is a guaranteed cache miss.
    staged = stage_trainer(fake_gcs.url, tmp_path, version=f"0.2.{uuid.uuid4().int % 10**6}")
    ml = local_service.ml()
    ti_first, ti_second = staged.training_input("succeed"), staged.training_input("succeed")
    _create(ml, project, "cold", ti_first)
    assert wait_for_state(ml, f"projects/{project}/jobs/cold", TERMINAL)["state"] == "SUCCEEDED"
    _create(ml, project, "warm", ti_second)
    assert wait_for_state(ml, f"projects/{project}/jobs/warm", TERMINAL)["state"] == "SUCCEEDED"

    def service_lines(job_id: str) -> list[str]:
        entries = log_entries(local_service.url, project, job_id, 'resource.labels.task_name="service"')
        return [e["textPayload"] for e in entries]

    assert any("(cache miss)" in line for line in service_lines("cold"))
    assert any("(cache hit)" in line for line in service_lines("warm"))
    assert not any(line.startswith("pip:") for line in service_lines("warm"))
    # The installer's output is one summary line in the job's log; its lines stay in the service's own log.
    cold_pip = [line for line in service_lines("cold") if "installed " in line]
    assert len(cold_pip) == 1, cold_pip
    assert "aip-test-trainer==0.2." in cold_pip[0]
    # declared, but the image ships it (jobs.vertex.image_packages): satisfied, not installed again
    assert "google-cloud-storage==" not in cold_pip[0]
    all_cold = [e["textPayload"] for e in log_entries(local_service.url, project, "cold", "")]
    assert not any("Requirement already satisfied" in line for line in all_cold)
    service_log = (local_service.data_dir.parent / f"aip-local-{local_service.port}.log").read_text()
    assert f"job {project}/cold pip: " in service_log
    cold = staged.read_json(ti_first["jobDir"] + "/report.json")
    warm = staged.read_json(ti_second["jobDir"] + "/report.json")
    assert cold["prefix"] == warm["prefix"]
    assert cold["cwd"] != warm["cwd"]
    assert os.path.isdir(cold["prefix"])


def test_custom_tier_runs_every_replica_with_its_task(
    local_service: LocalService, staged_trainer: StagedTrainer, project: str
) -> None:
    ml = local_service.ml()
    ti = staged_trainer.training_input(
        "succeed", scaleTier="CUSTOM", masterType="n1-standard-4", workerType="n1-standard-4", workerCount="1"
    )
    _create(ml, project, "cluster", ti)

    job = wait_for_state(ml, f"projects/{project}/jobs/cluster", TERMINAL)

    assert job["state"] == "SUCCEEDED", job.get("errorMessage")
    master = staged_trainer.read_json(ti["jobDir"] + "/report.json")
    worker = staged_trainer.read_json(ti["jobDir"] + "/report-worker-0.json")
    master_config, worker_config = json.loads(master["TF_CONFIG"]), json.loads(worker["TF_CONFIG"])
    assert master_config["cluster"] == worker_config["cluster"]
    assert sorted(master_config["cluster"]) == ["master", "worker"]
    assert worker_config["task"] == {"type": "worker", "index": 0}
    assert master["cwd"] != worker["cwd"]
    # PyTorch's rendezvous: the master's address from the cluster map, a rank each
    assert f"{worker['MASTER_ADDR']}:{worker['MASTER_PORT']}" == master_config["cluster"]["master"][0]
    assert [(r["RANK"], r["WORLD_SIZE"]) for r in (master, worker)] == [("0", "2"), ("1", "2")]


@pytest.mark.parametrize("name", ["pkgs/../../../outside.tar.gz", "pkgs/./a.tar.gz", "pkgs/nul\u0000.tar.gz"])
def test_package_object_names_never_escape_the_data_dir(
    local_service: LocalService, staged_trainer: StagedTrainer, project: str, name: str
) -> None:
    ml = local_service.ml()
    ti = staged_trainer.training_input("succeed")
    ti["packageUris"] = [f"gs://{staged_trainer.bucket}/{name}"]
    status = 200
    try:
        _create(ml, project, "escape", ti)
    except HttpError as refused:  # refusing it up front is as good as failing it
        status = refused.resp.status
    if status == 200:
        job = wait_for_state(ml, f"projects/{project}/jobs/escape", TERMINAL)
        assert job["state"] == "FAILED"
        assert "unusable URI" in job["errorMessage"]
    else:
        assert status == 400
    assert not list(local_service.data_dir.parent.rglob("outside.tar.gz"))

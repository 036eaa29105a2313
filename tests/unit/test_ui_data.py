"""The plugin's data endpoints against real XCom and task-instance rows (SQLite, Airflow's own models).

Access checks are Airflow's and are proved over HTTP in the e2e tier; here they are switched off
so the test is about what each endpoint makes of the rows the tasks stored.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from airflow_aip.jobs.vertex.capacity import Ending
from airflow_aip.jobs.vertex.ladder import Rung
from airflow_aip.jobs.vertex.ladder_trials import rung_record, with_ladder
from tests.fixtures.tuning_job import SUMMARY
from tests.fixtures.xcom_rows import dag_run, push_xcom, xcom_database

DAG, RUN = "aip_training_pipeline", "manual__2026-11-23T10:00:00+00:00"
T0 = datetime(2026, 11, 23, 10, tzinfo=timezone.utc)


SPOT, STANDARD = Rung(label="spot", strategy="SPOT"), Rung(label="standard", strategy="STANDARD")


def _ladder_summary() -> dict[str, Any]:
    """A tuning job whose SPOT rung was reclaimed after one trial: the rest ran on STANDARD.

    Both jobs number their trials from 1; the best is the SPOT job's trial 1.
    """
    spot_trial = {**SUMMARY["trials"][0], "finalMetric": {"objectiveValue": 0.99, "trainingStep": "100"}}
    spot = {
        **SUMMARY,
        "job_id": "iris_tuning_1_spot",
        "name": "projects/local-project/locations/us-central1/hyperparameterTuningJobs/111",
        "state": "FAILED",
        "region": "us-central1",
        "create_time": "2026-11-23T10:00:00Z",
        "start_time": "2026-11-23T10:00:30Z",
        "end_time": "2026-11-23T10:03:00Z",
        "trials": [spot_trial],
    }
    final = {**SUMMARY, "job_id": "iris_tuning_1_standard", "trials": SUMMARY["trials"][:2]}
    now = T0.timestamp() + 600
    records = [
        rung_record(0, SPOT, spot, Ending("preempted", "Spot VMs were reclaimed 7 times"), now),
        rung_record(1, STANDARD, final, None, now),
    ]
    return with_ladder(final, records, [("spot", spot)], "standard")


EXPORT = {
    "job_id": "iris_tuning_1",
    "trial_id": "2",
    "exported": True,
    "promoted": False,
    "destination": "gs://b/m",
}
# The job's export as the run and task payloads give it: no metric, nothing to compare with.
RUN_EXPORT = {
    "exported": True,
    "promoted": False,
    "destination": "gs://b/m",
    "trial_id": "2",
    "metric": None,
    "metric_tag": None,
    "champion_metric": None,
}


@pytest.fixture
def session() -> Iterator[Session]:
    with xcom_database() as db:
        yield db


def _xcom(
    db: Session, run_row: int, task_id: str, key: str, value: Any, at: datetime, dag: str = DAG
) -> None:
    run_id = f"{RUN}-{run_row}" if run_row > 1 else RUN
    push_xcom(db, key, value, dag_id=dag, run_id=run_id, task_id=task_id, at=at)


@pytest.fixture
def client(session: Session, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    from airflow.api_fastapi.common.db.common import _get_session
    from airflow.api_fastapi.core_api.security import get_user

    from airflow_aip.ui import app as ui_app

    class Readable:
        def get_authorized_dag_ids(self, **_: Any) -> set[str]:
            return {DAG, "other_dag"}

        def is_authorized_dag(self, **_: Any) -> bool:
            return False  # a viewer: no "Cancel job" (the cancel itself: test_ui_live.py)

    monkeypatch.setattr(ui_app, "get_auth_manager", Readable)
    app = ui_app.create_app()
    app.dependency_overrides[_get_session] = lambda: session
    app.dependency_overrides[get_user] = lambda: object()
    app.dependency_overrides[ui_app.READ_XCOM.dependency] = lambda: None
    app.dependency_overrides[ui_app.READ_TI.dependency] = lambda: None
    app.dependency_overrides[ui_app.LOGGED_IN.dependency] = lambda: None
    # the pipeline: tune (job id pushed before the wait, summary returned), export, a plain task
    _xcom(session, 1, "tune", "training_job_id", "iris_tuning_1", T0)
    _xcom(session, 1, "tune", "return_value", SUMMARY, T0 + timedelta(minutes=5))
    _xcom(session, 1, "export_best_model", "return_value", EXPORT, T0 + timedelta(minutes=6))
    _xcom(session, 1, "prepare_data", "return_value", {"train": "gs://b/t.csv"}, T0)
    # a second run whose job is still running: only its id is stored
    _xcom(session, 2, "tune", "training_job_id", "iris_tuning_2", T0 + timedelta(hours=1))
    # a third run whose tuning job climbed a capacity ladder (return value only)
    _xcom(session, 4, "tune", "return_value", _ladder_summary(), T0 + timedelta(hours=3))
    # a Dag the user may not read
    _xcom(session, 3, "tune", "training_job_id", "secret_job", T0 + timedelta(hours=2), dag="hidden_dag")
    dag_run(session, DAG, RUN).state = "success"  # the first run has ended: its tabs stop refreshing
    session.commit()
    with TestClient(app) as test_client:
        yield test_client


def test_task_endpoint_draws_the_summary_of_an_unmapped_task(client: TestClient) -> None:
    # the UI leaves {MAP_INDEX} literal on an unmapped task instance's page
    query = {"dag_id": DAG, "run_id": RUN, "task_id": "tune", "map_index": "{MAP_INDEX}"}
    job = client.get("/api/task", params=query).raise_for_status().json()["job"]

    assert (job["job_id"], job["state"], job["metric"], job["goal"]) == (
        "iris_tuning_1",
        "SUCCEEDED",
        "accuracy",
        "MAXIMIZE",
    )
    assert [(t["id"], t["objective"], t["state"]) for t in job["trials"]] == [
        ("1", 0.81, "SUCCEEDED"),
        ("2", 0.95, "SUCCEEDED"),
        ("3", None, "FAILED"),
    ]
    assert job["best_trial_id"] == "2"
    assert job["parameters"] == [
        {"name": "C", "type": "DOUBLE", "log": True},
        {"name": "max_iter", "type": "INTEGER", "log": False},
    ]
    trial = job["trials"][1]
    assert (trial["params"]["C"], trial["values"]["C"], trial["step"], trial["duration_s"]) == (
        "1.5",
        1.5,
        200,
        30.5,
    )
    assert job["console_url"].startswith("https://console.cloud.google.com/ai-platform/jobs/iris_tuning_1?")
    assert "iris_tuning_1" in job["logs_url"]
    assert "project=local-project" in job["logs_url"]


def test_task_endpoint_draws_the_ladders_rungs_and_where_each_trial_ran(client: TestClient) -> None:
    query = {"dag_id": DAG, "run_id": f"{RUN}-4", "task_id": "tune"}
    job = client.get("/api/task", params=query).raise_for_status().json()["job"]

    assert job["job_id"] == "iris_tuning_1_standard"
    assert [
        (r["rung"], r["label"], r["placement"], r["job_id"], r["state"], r["ended_because"])
        for r in job["ladder"]
    ] == [
        (1, "spot", "spot (SPOT)", "iris_tuning_1_spot", "FAILED", "preempted"),
        (2, "standard", "standard (STANDARD)", "iris_tuning_1_standard", "SUCCEEDED", None),
    ]
    spot, standard = job["ladder"]
    assert spot["detail"] == "Spot VMs were reclaimed 7 times"
    assert (spot["waited_s"], spot["ran_s"], spot["trials_finished"]) == (30.0, 150.0, 1)
    assert standard["ran_s"] == 295.0
    # every job numbers its trials from 1: the key tells them apart, and the best is the SPOT job's
    assert job["several_jobs"] is True
    assert [(t["id"], t["rung"], t["job_id"], t["objective"]) for t in job["trials"]] == [
        ("1", "spot", "iris_tuning_1_spot", 0.99),
        ("1", "standard", "iris_tuning_1_standard", 0.81),
        ("2", "standard", "iris_tuning_1_standard", 0.95),
    ]
    assert (job["best_trial_id"], job["best_trial_key"]) == ("1", "iris_tuning_1_spot/1")
    assert job["trials"][0]["key"] == job["best_trial_key"]


def test_a_job_without_a_ladder_has_no_rungs_and_trials_keyed_by_id(client: TestClient) -> None:
    query = {"dag_id": DAG, "run_id": RUN, "task_id": "tune"}
    job = client.get("/api/task", params=query).raise_for_status().json()["job"]

    assert (job["ladder"], job["several_jobs"], job["best_trial_key"]) == ([], False, "2")
    assert [(t["key"], t["rung"], t["job_id"]) for t in job["trials"]] == [
        ("1", None, None),
        ("2", None, None),
        ("3", None, None),
    ]


def test_task_endpoint_for_a_task_without_a_job_or_still_waiting(client: TestClient) -> None:
    plain = {"dag_id": DAG, "run_id": RUN, "task_id": "prepare_data", "map_index": "-1"}
    waiting = {"dag_id": DAG, "run_id": f"{RUN}-2", "task_id": "tune"}

    assert client.get("/api/task", params=plain).json() == {
        "task_state": None,
        "job_id": None,
        "job": None,
        "live": False,
        "read_now": False,
        "waiting": None,
        "read_error": None,
        "refresh_s": None,
        "awaiting_decision": False,
        "held": None,
        "can_cancel": False,
        "cancelled_by": None,
        "champion": None,  # no job: nothing to compare, though the run has an export
        "image": None,
    }
    assert client.get("/api/task", params=waiting).json()["job_id"] == "iris_tuning_2"


def test_run_endpoint_lists_the_runs_jobs_with_their_export(client: TestClient) -> None:
    jobs = client.get("/api/run", params={"dag_id": DAG, "run_id": RUN}).raise_for_status().json()["jobs"]

    assert [(j["task_id"], j["job_id"], j["best_trial_id"]) for j in jobs] == [("tune", "iris_tuning_1", "2")]
    assert jobs[0]["export"] == RUN_EXPORT


def test_jobs_endpoint_lists_readable_dags_newest_first_and_filters(client: TestClient) -> None:
    listed = client.get("/api/jobs").raise_for_status().json()
    only_done = client.get("/api/jobs", params={"state": "SUCCEEDED"}).json()["jobs"]
    other_dag = client.get("/api/jobs", params={"dag_id": "other_dag"}).json()["jobs"]

    assert [(j["job_id"], j["state"]) for j in listed["jobs"]] == [
        ("iris_tuning_2", None),
        ("iris_tuning_1", "SUCCEEDED"),
    ]
    done = listed["jobs"][1]
    assert (done["trials"], done["best_trial_id"], done["best_objective"], done["exported"]) == (
        3,
        "2",
        0.95,
        True,
    )
    assert listed["dags"] == ["aip_training_pipeline", "other_dag"]
    assert [j["job_id"] for j in only_done] == ["iris_tuning_1"]
    assert other_dag == []


def test_browse_lists_the_rungs_a_ladder_passed_as_their_own_jobs(
    client: TestClient, session: Session
) -> None:
    """Issue 52: Browse hid the stocked-out Spot rungs; each rung that made a job is a row."""
    _xcom(session, 4, "tune", "training_job_id", "iris_tuning_1_standard", T0 + timedelta(hours=3))
    session.commit()
    listed = client.get("/api/jobs", params={"dag_id": DAG}).json()["jobs"]
    mine = [j for j in listed if j["run_id"] == f"{RUN}-4"]
    assert [(j["job_id"], j["state"], j["rung"]) for j in mine] == [
        ("iris_tuning_1_standard", "SUCCEEDED", "rung 2 of 2 · STANDARD"),
        ("iris_tuning_1_spot", "FAILED", "rung 1 of 2 · SPOT"),
    ]
    assert mine[1]["result"]["reason"].startswith("out of capacity (preempted)")
    failed = client.get("/api/jobs", params={"dag_id": DAG, "state": "FAILED"}).json()["jobs"]
    assert [j["job_id"] for j in failed] == ["iris_tuning_1_spot"]  # the state filter sees it too


@pytest.mark.parametrize("page", ["task", "run", "jobs"])
def test_pages_and_their_scripts_are_served(client: TestClient, page: str) -> None:
    html = client.get(f"/ui/{page}", params={"dag_id": DAG}).raise_for_status().text
    script = client.get(f"/static/{page}.js")

    assert f"../static/{page}.js" in html
    assert script.headers["content-type"].startswith("text/javascript")
    assert "render(" in script.text or "renderLive(" in script.text  # the task tab follows a live job
    assert client.get("/static/../app.py").status_code == 404
    assert client.get("/ui/nope").status_code == 404


REGISTERED = {
    "model": "iris",
    "version_id": "4",
    "version_name": "projects/p/locations/us-central1/models/iris@4",
    "aliases": [],
    "metric": 0.95,
    "metric_tag": "accuracy",
    "goal": "MAXIMIZE",
    "champion_alias": "champion",
    "promoted": True,
    "reason": "accuracy 0.95 beats the champion's 0.9",
    "champion_before": {"version_id": "3", "metric": 0.9},
    "console_url": "http://127.0.0.1:8731/models/iris",
}


def test_build_images_tab_names_the_image_and_each_page_names_a_jobs_image(
    client: TestClient, session: Session
) -> None:
    """Issue 52: build_image's tab said "ran no training job"; no page named the image a job ran."""
    image = "localhost:5000/iris-trainer:ctx-0123456789abcdef0123"
    _xcom(session, 1, "build_image", "return_value", image, T0)
    _xcom(session, 1, "prepare_data_2", "return_value", "localhost:5000/iris:latest", T0)  # not a build's
    session.commit()
    built = client.get("/api/task", params={"dag_id": DAG, "run_id": RUN, "task_id": "build_image"}).json()
    assert (built["job"], built["image"]) == (None, image)
    other = client.get("/api/task", params={"dag_id": DAG, "run_id": RUN, "task_id": "prepare_data_2"}).json()
    assert other["image"] is None
    _xcom(session, 5, "tune", "training_job_id", "iris_container_1", T0 + timedelta(hours=4))
    _xcom(
        session, 5, "tune", "return_value", {**SUMMARY, "job_id": "iris_container_1", "image_uri": image}, T0
    )
    session.commit()
    where = {"dag_id": DAG, "run_id": f"{RUN}-5"}
    task = client.get("/api/task", params={**where, "task_id": "tune"}).json()
    run = client.get("/api/run", params=where).json()
    listed = client.get("/api/jobs", params={"dag_id": DAG}).json()["jobs"]
    assert task["job"]["image_uri"] == run["jobs"][0]["image_uri"] == image
    assert [j["image_uri"] for j in listed if j["job_id"] == "iris_container_1"] == [image]


def test_a_jobs_view_names_the_image_its_chief_runs() -> None:
    from airflow_aip.jobs import summarize_job
    from airflow_aip.jobs.mlv1.view import view_from_ml
    from airflow_aip.jobs.vertex.view import view_from_vertex

    def vertex(pool: dict[str, Any]) -> Any:
        resource = {"name": "projects/p/locations/r/customJobs/1", "jobSpec": {"workerPoolSpecs": [pool]}}
        return summarize_job(view_from_vertex(resource, project_id="p", region="r"))["image_uri"]

    assert (
        vertex({"containerSpec": {"imageUri": "r-docker.pkg.dev/p/t/i:ctx-1"}})
        == "r-docker.pkg.dev/p/t/i:ctx-1"
    )
    prebuilt = "us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest"
    assert vertex({"pythonPackageSpec": {"executorImageUri": prebuilt}}) == prebuilt
    container = {"jobId": "j", "trainingInput": {"masterConfig": {"imageUri": "gcr.io/p/i:1"}}}
    assert summarize_job(view_from_ml(container, "p"))["image_uri"] == "gcr.io/p/i:1"
    assert summarize_job(view_from_ml({"jobId": "j", "trainingInput": {}}, "p"))["image_uri"] is None


def test_run_and_task_payloads_carry_the_champion_comparison(client: TestClient, session: Session) -> None:
    _xcom(session, 1, "register_model", "return_value", REGISTERED, T0 + timedelta(minutes=7))
    session.commit()
    run = client.get("/api/run", params={"dag_id": DAG, "run_id": RUN}).raise_for_status().json()
    task = client.get("/api/task", params={"dag_id": DAG, "run_id": RUN, "task_id": "tune"}).json()
    plain = client.get("/api/task", params={"dag_id": DAG, "run_id": RUN, "task_id": "prepare_data"}).json()
    register = client.get("/api/task", params={"dag_id": DAG, "run_id": RUN, "task_id": "register_model"})

    expected = (0.95, 0.9, "3", True, "accuracy 0.95 beats the champion's 0.9")
    for champion in (run["champion"], task["champion"], register.json()["champion"]):
        assert (
            champion["metric"],
            champion["champion_metric"],
            champion["champion_version"],
            champion["promoted"],
            champion["reason"],
        ) == expected
    assert run["champion"]["console_label"] == "Local training service: model page"
    assert plain["champion"] is None
    # a run without registration or gated export has nothing to compare
    assert client.get("/api/run", params={"dag_id": DAG, "run_id": f"{RUN}-4"}).json()["champion"] is None


def test_an_ended_jobs_tab_follows_its_run_until_the_decision_arrives(
    client: TestClient, session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The train task succeeded; a later task of the still-running run decides: the tab fetches again."""
    from airflow_aip.ui import app as ui_app

    monkeypatch.setattr(ui_app, "_task_state", lambda *_: "success")
    monkeypatch.setattr(ui_app, "_run_active", lambda *_: True)
    params = {"dag_id": DAG, "run_id": RUN, "task_id": "tune"}
    before = client.get("/api/task", params=params).json()
    assert (before["awaiting_decision"], before["refresh_s"], before["champion"]) == (True, 5.0, None)
    _xcom(session, 1, "register_model", "return_value", REGISTERED, T0 + timedelta(minutes=7))
    session.commit()
    after = client.get("/api/task", params=params).json()
    assert (after["awaiting_decision"], after["refresh_s"]) == (False, None)
    assert after["champion"]["promoted"] is True


def test_task_payload_gives_the_job_its_runs_export(client: TestClient) -> None:
    job = client.get("/api/task", params={"dag_id": DAG, "run_id": RUN, "task_id": "tune"}).json()["job"]

    assert job["export"] == RUN_EXPORT
    assert job["console_label"] == "Google Cloud console"
    assert job["tied_trial_keys"] == []


def test_a_trials_duration_reads_vertex_nanosecond_times_on_every_python() -> None:
    """Vertex AI sends up to nine fractional digits, which ``datetime.fromisoformat`` refuses on 3.10."""
    from airflow_aip.ui.views import trial_row

    trial = {
        "trialId": "1",
        "startTime": "2026-11-25T10:00:00.123456789Z",
        "endTime": "2026-11-25T10:00:30.623456789Z",
    }
    assert trial_row(trial)["duration_s"] == 30.5
    assert trial_row({"trialId": "2", "startTime": "2026-11-25T10:00:00Z"})["duration_s"] is None


def test_the_cloud_storage_gates_refusal_shows_in_its_own_words() -> None:
    """A champion on another metric tag is refused, not beaten: the page says what the gate said."""
    from airflow_aip.ui.views import champion_comparison

    refused = "the champion was chosen on loss, this model on accuracy: they cannot be compared"
    export = {"job_id": "j", "exported": False, "promoted": False, "metric": 0.9, "champion_metric": 0.2}
    shown = champion_comparison([{**export, "decision": "refuse", "reason": refused}])
    assert shown is not None
    assert (shown["promoted"], shown["reason"]) == (False, refused)
    kept = champion_comparison([{**export, "decision": "keep", "reason": "accuracy 0.9 does not beat..."}])
    assert kept is not None
    assert kept["reason"] == "it does not beat the champion"  # the page's own sentence says the numbers

"""The live Training job tab: one job read per refresh interval, shared; the payload; cancel from the page.

The job client is a fake here (our own ``JobClient`` interface, not Google's): what is under test
is how often the UI reads, and what it makes of the neutral view our hooks return. The view
itself is built by our real Vertex translation from a Vertex AI resource.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from airflow_aip.jobs.vertex.view import view_from_vertex
from airflow_aip.links import CANCELLED_BY_XCOM_KEY, ENDED_JOB_XCOM_KEY, JOB_API_XCOM_KEY, JOB_ID_XCOM_KEY
from airflow_aip.ui.live import LiveReads, job_api_of, keeps_refreshing, why_it_waits
from tests.fixtures.operators import FakeTI
from tests.fixtures.tuning_job import SUMMARY
from tests.fixtures.xcom_rows import dag_run, push_xcom, task_instance, xcom_database
from tests.unit.clock import Clock

DAG, RUN, TASK = "aip_training_pipeline", "manual__2026-11-25T10:00:00+00:00", "tune"
NAME = "projects/local-project/locations/us-central1/hyperparameterTuningJobs/42"
API = {
    "name": NAME,
    "gcp_conn_id": "google_cloud_default",
    "api_endpoint": "http://127.0.0.1:8085",
    "impersonation_chain": None,
    "backend": "vertex",
    "region": "us-central1",
    "project_id": "local-project",
}
T0 = datetime(2026, 11, 25, 10, tzinfo=timezone.utc)


def _trial(n: int, state: str, accuracy: float | None = None) -> dict[str, Any]:
    trial: dict[str, Any] = {
        "id": str(n),
        "state": state,
        "parameters": [{"parameterId": "C", "value": 0.5 * n}],
        "startTime": f"2026-11-25T10:0{n}:00Z",
    }
    if accuracy is not None:
        trial["finalMeasurement"] = {
            "stepCount": "100",
            "metrics": [{"metricId": "accuracy", "value": accuracy}],
        }
        trial["endTime"] = f"2026-11-25T10:0{n}:30Z"
    return trial


def running_job(state: str = "JOB_STATE_RUNNING", **extra: Any) -> dict[str, Any]:
    """A Vertex AI tuning job two trials into its study, the third running."""
    resource = {
        "name": NAME,
        "displayName": "iris_tuning_live",
        "state": state,
        "createTime": "2026-11-25T10:00:00Z",
        "studySpec": {
            "metrics": [{"metricId": "accuracy", "goal": "MAXIMIZE"}],
            "parameters": [{"parameterId": "C", "doubleValueSpec": {"minValue": 0.1, "maxValue": 10}}],
        },
        "trialJobSpec": {},
        "trials": [_trial(1, "SUCCEEDED", 0.8), _trial(2, "SUCCEEDED", 0.9), _trial(3, "ACTIVE")],
        **extra,
    }
    return view_from_vertex(resource, project_id="local-project", region="us-central1")


class FakeJobs:
    """Our ``JobClient`` as the UI uses it: ``read`` and ``cancel``, counted."""

    def __init__(self, view: dict[str, Any] | None = None, error: Exception | None = None) -> None:
        self.view = view or running_job()
        self.error = error
        self.reads = 0
        self.cancelled: list[str] = []
        self.cancel_answer: bool | Exception = True  # False: the job had already ended
        self.before_read: Any = None

    def read(self, name: str) -> dict[str, Any]:
        if self.before_read is not None:
            self.before_read()
        self.reads += 1
        if self.error is not None:
            raise self.error
        return self.view

    def cancel(self, name: str) -> bool:
        self.cancelled.append(name)
        if isinstance(self.cancel_answer, Exception):
            raise self.cancel_answer
        return self.cancel_answer


def test_twenty_concurrent_requests_make_one_read() -> None:
    jobs = FakeJobs()
    arrived = threading.Condition()
    entered: list[str] = []

    class Counted(LiveReads):
        def _lock_for(self, key: str) -> threading.Lock:
            with arrived:
                entered.append(key)
                arrived.notify_all()
            return super()._lock_for(key)

    reads = Counted(ttl=5.0, hook_for=lambda api: jobs, clock=Clock())

    def hold_the_read_until_all_arrived() -> None:
        with arrived:  # every request is now waiting for this read, none has a result yet
            assert arrived.wait_for(lambda: len(entered) == 20, timeout=30)

    jobs.before_read = hold_the_read_until_all_arrived
    results: list[Any] = []
    threads = [threading.Thread(target=lambda: results.append(reads.read(API))) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert jobs.reads == 1
    assert len(results) == 20
    assert all(r is results[0] for r in results)
    assert results[0].summary["state"] == "RUNNING"


def test_a_read_is_reused_for_the_interval_then_made_again() -> None:
    jobs, clock = FakeJobs(), Clock()
    reads = LiveReads(ttl=5.0, hook_for=lambda api: jobs, clock=clock)

    reads.read(API)
    clock.now += 4.9
    reads.read(API)
    assert jobs.reads == 1
    clock.now += 0.2
    reads.read(API)
    assert jobs.reads == 2


def test_a_failed_read_is_shown_and_cached_too() -> None:
    jobs, clock = FakeJobs(error=RuntimeError("403 caller lacks aiplatform.customJobs.get")), Clock()
    reads = LiveReads(ttl=5.0, hook_for=lambda api: jobs, clock=clock)

    first = reads.read(API)
    second = reads.read(API)
    clock.now += 5.0
    reads.read(API)

    assert (first.summary, first.error) == (
        None,
        "could not read the job: 403 caller lacks aiplatform.customJobs.get",
    )
    assert second is first
    assert jobs.reads == 2


def test_hooks_are_built_once_per_way_of_reaching_the_api() -> None:
    built: list[dict[str, Any]] = []

    def hook_for(api: Any) -> FakeJobs:
        built.append(dict(api))
        return FakeJobs()

    reads = LiveReads(hook_for=hook_for, clock=Clock())
    reads.read(API)
    reads.read({**API, "name": NAME.replace("/42", "/43")})  # another job, same connection
    reads.read({**API, "gcp_conn_id": "other_conn"})

    assert [b["gcp_conn_id"] for b in built] == ["google_cloud_default", "other_conn"]


def test_why_a_job_waits() -> None:
    flex = {"trialJobSpec": {"scheduling": {"strategy": "FLEX_START", "maxWaitDuration": "1800s"}}}
    queued_on_a_rung = running_job("JOB_STATE_QUEUED", labels={"aip_rung": "spot"})

    # worded as the wait step words it in the task log (one rule: the backend's why_waiting)
    assert why_it_waits(queued_on_a_rung) == (
        "QUEUED for quota custom_model_training_cpus in us-central1. Capacity ladder rung: spot."
    )
    assert (
        why_it_waits(running_job("JOB_STATE_PENDING", **flex))
        == "Flex-Start: waiting for capacity (up to 1800s)."
    )
    assert why_it_waits(running_job("JOB_STATE_PENDING")) == (
        "Pending capacity: Vertex AI is finding machines for the job."
    )
    assert why_it_waits(running_job()) is None


def test_refreshing_stops_when_the_task_or_its_job_ended() -> None:
    assert keeps_refreshing("deferred", "RUNNING")
    assert keeps_refreshing("queued", None)
    assert keeps_refreshing("running", "SUCCEEDED")  # the task is about to store its summary
    assert keeps_refreshing("queued", "CANCELLED")  # resuming from its trigger, to fail as the job did
    assert not keeps_refreshing("up_for_retry", "CANCELLED")
    assert not keeps_refreshing("failed", "RUNNING")
    assert not keeps_refreshing(None, None)  # never to run: its run has ended
    assert keeps_refreshing(None, None, run_active=True)  # not scheduled yet: the tab waits for it
    assert not keeps_refreshing("failed", None, run_active=True)


def test_only_what_the_operators_push_is_read() -> None:
    assert job_api_of(API) == API
    assert job_api_of({"name": NAME}) is None
    assert job_api_of("projects/p/jobs/j") is None


# -- the endpoints, against real XCom rows (SQLite, Airflow's own models) ---------------------------


@pytest.fixture
def session() -> Iterator[Session]:
    with xcom_database() as db:
        dag_run(db, DAG, RUN)
        db.commit()
        yield db


def _push(db: Session, key: str, value: Any) -> None:
    push_xcom(db, key, value, dag_id=DAG, run_id=RUN, task_id=TASK, at=T0)


def _push_job(db: Session, job_id: str) -> None:
    """What a submit task pushes once its job exists: the job's ID and the API it is on."""
    _push(db, JOB_ID_XCOM_KEY, job_id)
    _push(db, JOB_API_XCOM_KEY, API)


class Auth:
    """Airflow's auth manager as the app asks it: may this user edit the Dag's task instances?"""

    def __init__(self, editor: bool) -> None:
        self.editor = editor

    def is_authorized_dag(self, **_: Any) -> bool:
        return self.editor

    def get_authorized_dag_ids(self, **_: Any) -> set[str]:
        return {DAG}


class User:
    def get_name(self) -> str:
        return "ada"


@pytest.fixture
def jobs() -> FakeJobs:
    return FakeJobs()


@pytest.fixture
def state() -> dict[str, str | None]:
    return {"task": "deferred"}


def _client(
    session: Session, monkeypatch: pytest.MonkeyPatch, jobs: FakeJobs, state: dict[str, Any], *, editor: bool
) -> TestClient:
    from airflow.api_fastapi.common.db.common import _get_session
    from airflow.api_fastapi.core_api import security
    from airflow.api_fastapi.core_api.security import get_user
    from airflow.models.dag import DagModel

    from airflow_aip.ui import app as ui_app
    from airflow_aip.ui import live

    reads = LiveReads(ttl=5.0, hook_for=lambda api: jobs, clock=Clock())
    monkeypatch.setattr(live, "LIVE_READS", reads)
    monkeypatch.setattr(ui_app, "_task_state", lambda db, ti: state["task"])
    monkeypatch.setattr(ui_app, "get_auth_manager", lambda: Auth(editor))
    monkeypatch.setattr(security, "get_auth_manager", lambda: Auth(editor))  # EDIT_TI's own check
    monkeypatch.setattr(DagModel, "get_team_name", staticmethod(lambda dag_id, **_: None))
    app = ui_app.create_app()
    app.dependency_overrides[_get_session] = lambda: session
    app.dependency_overrides[get_user] = User
    app.dependency_overrides[ui_app.READ_XCOM.dependency] = lambda: None
    app.dependency_overrides[ui_app.READ_TI.dependency] = lambda: None
    app.dependency_overrides[ui_app.LOGGED_IN.dependency] = lambda: None
    return TestClient(app)


QUERY = {"dag_id": DAG, "run_id": RUN, "task_id": TASK, "map_index": "{MAP_INDEX}"}
SAME_SITE = {"X-Requested-With": "aip"}


def test_a_waiting_task_shows_its_job_as_read_now(
    session: Session, monkeypatch: pytest.MonkeyPatch, jobs: FakeJobs, state: dict[str, Any]
) -> None:
    _push_job(session, "iris_tuning_live")
    client = _client(session, monkeypatch, jobs, state, editor=True)

    payloads = [client.get("/api/task", params=QUERY).raise_for_status().json() for _ in range(3)]

    data = payloads[0]
    assert jobs.reads == 1  # three refreshes within the interval: one read
    assert (data["task_state"], data["live"], data["refresh_s"], data["can_cancel"]) == (
        "deferred",
        True,
        5.0,
        True,
    )
    job = data["job"]
    assert (job["job_id"], job["state"], job["best_trial_id"]) == ("iris_tuning_live", "RUNNING", "2")
    assert [(t["id"], t["state"], t["objective"]) for t in job["trials"]] == [
        ("1", "SUCCEEDED", 0.8),
        ("2", "SUCCEEDED", 0.9),
        ("3", "RUNNING", None),
    ]


def test_a_tab_opened_before_its_task_is_scheduled_waits_for_it(
    session: Session, monkeypatch: pytest.MonkeyPatch, jobs: FakeJobs, state: dict[str, Any]
) -> None:
    from airflow.models.dagrun import DagRun

    state["task"] = None  # the run is queued; its task has no state yet
    run = session.query(DagRun).one()
    run.state = "queued"
    session.commit()
    client = _client(session, monkeypatch, jobs, state, editor=True)
    data = client.get("/api/task", params=QUERY).raise_for_status().json()
    assert (data["task_state"], data["job"], data["refresh_s"]) == (None, None, 5.0)
    run.state = "failed"  # the run ended without it: nothing to wait for
    session.commit()
    assert client.get("/api/task", params=QUERY).raise_for_status().json()["refresh_s"] is None


def test_an_ended_task_reads_xcom_only(
    session: Session, monkeypatch: pytest.MonkeyPatch, jobs: FakeJobs, state: dict[str, Any]
) -> None:
    from airflow.models.dagrun import DagRun

    _push_job(session, "iris_tuning_1")
    _push(session, "return_value", SUMMARY)
    state["task"] = "success"
    run = session.query(DagRun).one()
    run.state = "running"  # a later task may still decide on the champion: the tab follows the run
    session.commit()
    client = _client(session, monkeypatch, jobs, state, editor=True)

    following = client.get("/api/task", params=QUERY).raise_for_status().json()
    assert (following["awaiting_decision"], following["refresh_s"], following["can_cancel"]) == (
        True,
        5.0,
        False,
    )
    run.state = "success"
    session.commit()
    data = client.get("/api/task", params=QUERY).raise_for_status().json()

    assert jobs.reads == 0  # neither fetch read the job: its summary is in XCom
    assert (data["live"], data["refresh_s"], data["can_cancel"]) == (False, None, False)
    assert data["awaiting_decision"] is False
    assert (data["job"]["job_id"], data["job"]["state"]) == ("iris_tuning_1", "SUCCEEDED")


def _ending(status: str, state: str, message: str, summary: dict[str, Any] | None) -> dict[str, Any]:
    """What ``record_ending`` pushes for the job ``NAME`` when its wait did not succeed."""
    return {
        "job_id": "iris_tuning_live",
        "name": NAME,
        "status": status,
        "state": state,
        "message": message,
        "summary": summary,
    }


def test_a_failed_wait_still_shows_its_job_its_trials_and_why_it_ended(
    session: Session, monkeypatch: pytest.MonkeyPatch, jobs: FakeJobs, state: dict[str, Any]
) -> None:
    from airflow_aip.jobs.summary import summarize_job

    cancelled = summarize_job(running_job("JOB_STATE_CANCELLED"))
    message = "Training job iris_tuning_live ended CANCELLED"
    _push_job(session, "iris_tuning_live")
    _push(session, ENDED_JOB_XCOM_KEY, _ending("cancelled", "CANCELLED", message, cancelled))
    state["task"] = "failed"
    client = _client(session, monkeypatch, jobs, state, editor=True)

    task = client.get("/api/task", params=QUERY).raise_for_status().json()
    run = client.get("/api/run", params={"dag_id": DAG, "run_id": RUN}).json()["jobs"]
    browse = client.get("/api/jobs", params={"state": "CANCELLED"}).json()["jobs"]

    assert jobs.reads == 0  # XCom holds how it ended: the job is not read
    assert (task["live"], task["read_now"], task["refresh_s"], task["can_cancel"]) == (
        False,
        False,
        None,
        False,
    )
    job = task["job"]
    assert (job["state"], job["ended_because"], job["best_trial_id"]) == ("CANCELLED", message, "2")
    assert [(t["id"], t["state"]) for t in job["trials"]] == [
        ("1", "SUCCEEDED"),
        ("2", "SUCCEEDED"),
        ("3", "RUNNING"),
    ]
    assert [(j["job_id"], j["state"], len(j["trials"])) for j in run] == [
        ("iris_tuning_live", "CANCELLED", 3)
    ]
    assert [(j["job_id"], j["trials"], j["best_trial_id"]) for j in browse] == [("iris_tuning_live", 3, "2")]


def test_a_wait_that_timed_out_shows_the_job_as_last_read(
    session: Session, monkeypatch: pytest.MonkeyPatch, jobs: FakeJobs, state: dict[str, Any]
) -> None:
    message = "Stopped waiting for training job iris_tuning_live: still RUNNING"
    _push(session, JOB_ID_XCOM_KEY, "iris_tuning_live")
    _push(session, ENDED_JOB_XCOM_KEY, _ending("timeout", "RUNNING", message, None))
    state["task"] = "failed"
    client = _client(session, monkeypatch, jobs, state, editor=False)

    job = client.get("/api/task", params=QUERY).raise_for_status().json()["job"]

    assert (job["job_id"], job["name"], job["state"], job["ended_because"], job["trials"]) == (
        "iris_tuning_live",
        NAME,
        "RUNNING",
        message,
        [],
    )


def test_a_task_killed_while_it_waited_reads_its_ended_job_once(
    session: Session, monkeypatch: pytest.MonkeyPatch, state: dict[str, Any]
) -> None:
    """Marked failed while deferred: the trigger cancelled the job, the task stored nothing of it."""
    jobs = FakeJobs(running_job("JOB_STATE_CANCELLED"))
    _push_job(session, "iris_tuning_live")
    state["task"] = "failed"
    client = _client(session, monkeypatch, jobs, state, editor=True)
    from airflow_aip.ui import live

    first = client.get("/api/task", params=QUERY).raise_for_status().json()
    live.LIVE_READS._clock.now += 600  # type: ignore[attr-defined]  # past the refresh interval
    again = client.get("/api/task", params=QUERY).json()
    browse = client.get("/api/jobs", params={"state": "CANCELLED"}).json()["jobs"]

    assert jobs.reads == 1  # an ended job does not change: one read serves the tab and Browse
    assert (first["live"], first["read_now"], first["refresh_s"], first["can_cancel"]) == (
        False,
        True,
        None,
        False,
    )
    assert first["job"]["state"] == again["job"]["state"] == "CANCELLED"
    assert [t["id"] for t in first["job"]["trials"]] == ["1", "2", "3"]
    assert [(j["job_id"], j["state"], j["read_now"]) for j in browse] == [
        ("iris_tuning_live", "CANCELLED", True)
    ]


def test_browse_gives_a_waiting_jobs_state_now_so_running_and_queued_filter_it(
    session: Session, monkeypatch: pytest.MonkeyPatch, jobs: FakeJobs, state: dict[str, Any]
) -> None:
    _push_job(session, "iris_tuning_live")
    client = _client(session, monkeypatch, jobs, state, editor=False)

    running = [client.get("/api/jobs", params={"state": "RUNNING"}).json()["jobs"] for _ in range(3)]
    queued = client.get("/api/jobs", params={"state": "QUEUED"}).json()["jobs"]

    assert jobs.reads == 1  # shared with the live tab, one read per interval
    assert [(j["job_id"], j["state"], j["trials"], j["read_now"]) for j in running[0]] == [
        ("iris_tuning_live", "RUNNING", 3, True)
    ]
    assert running[0] == running[2]
    assert queued == []


def test_an_editor_cancels_and_the_task_can_say_who(
    session: Session, monkeypatch: pytest.MonkeyPatch, jobs: FakeJobs, state: dict[str, Any]
) -> None:
    _push(session, JOB_API_XCOM_KEY, API)
    client = _client(session, monkeypatch, jobs, state, editor=True)

    answer = client.post("/api/task/cancel", params=QUERY, headers=SAME_SITE).raise_for_status().json()
    shown = client.get("/api/task", params=QUERY).json()

    assert jobs.cancelled == [NAME]
    assert answer["cancel_requested"] is True
    assert answer["cancelled_by"]["user"] == "ada"
    assert shown["cancelled_by"] == answer["cancelled_by"]  # the XCom the task reads when the job ends
    assert CANCELLED_BY_XCOM_KEY == "aip_cancelled_by"


@pytest.mark.parametrize(
    ("answer", "status"),
    [(False, 200), (ConnectionError("connection refused"), 502)],
    ids=["ended", "failed"],
)
def test_a_cancel_that_cancelled_nothing_takes_back_who_cancelled(
    session: Session,
    monkeypatch: pytest.MonkeyPatch,
    jobs: FakeJobs,
    state: dict[str, Any],
    answer: bool | Exception,
    status: int,
) -> None:
    """The job had already ended, or the call failed: the task must not say a user cancelled it."""
    _push(session, JOB_API_XCOM_KEY, API)
    jobs.cancel_answer = answer
    client = _client(session, monkeypatch, jobs, state, editor=True)

    response = client.post("/api/task/cancel", params=QUERY, headers=SAME_SITE)

    assert response.status_code == status
    assert jobs.cancelled == [NAME]  # the cancel was sent, its record written first, then taken back
    assert client.get("/api/task", params=QUERY).json()["cancelled_by"] is None
    assert _stored_keys(session) == {JOB_API_XCOM_KEY}  # the job's address stays


def _stored_keys(db: Session) -> set[str]:
    from airflow.models.xcom import XComModel
    from sqlalchemy import select

    db.expire_all()
    return set(db.scalars(select(XComModel.key).where(XComModel.dag_id == DAG, XComModel.run_id == RUN)))


def test_a_cancel_without_the_pages_header_is_refused(
    session: Session, monkeypatch: pytest.MonkeyPatch, jobs: FakeJobs, state: dict[str, Any]
) -> None:
    _push(session, JOB_API_XCOM_KEY, API)
    client = _client(session, monkeypatch, jobs, state, editor=True)

    assert client.post("/api/task/cancel", params=QUERY).status_code == 403
    assert jobs.cancelled == []


def test_a_viewer_gets_no_button_and_403(
    session: Session, monkeypatch: pytest.MonkeyPatch, jobs: FakeJobs, state: dict[str, Any]
) -> None:
    _push(session, JOB_API_XCOM_KEY, API)
    client = _client(session, monkeypatch, jobs, state, editor=False)

    assert client.get("/api/task", params=QUERY).json()["can_cancel"] is False
    assert client.post("/api/task/cancel", params=QUERY, headers=SAME_SITE).status_code == 403
    assert jobs.cancelled == []


def test_nothing_to_cancel_once_the_task_ended(
    session: Session, monkeypatch: pytest.MonkeyPatch, jobs: FakeJobs, state: dict[str, Any]
) -> None:
    _push(session, JOB_API_XCOM_KEY, API)
    state["task"] = "failed"
    client = _client(session, monkeypatch, jobs, state, editor=True)

    assert client.post("/api/task/cancel", params=QUERY, headers=SAME_SITE).status_code == 409
    assert jobs.cancelled == []


# -- what the submit operator leaves for the tab, and what it logs after a cancel from it ----------


def test_the_submit_pushes_how_the_tab_reaches_its_job_and_logs_who_cancelled_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import airflow.sdk

    from airflow_aip.exceptions import JobFailedError
    from airflow_aip.hooks import waiting as waiting_module
    from airflow_aip.hooks.training import TrainingJobHook
    from airflow_aip.operators import training as training_module
    from airflow_aip.ui.live import build_hook
    from tests.fixtures import submit
    from tests.unit.ml_fake import FakeMlApi, serve_hook

    fake = serve_hook(monkeypatch, TrainingJobHook, FakeMlApi())
    clock = submit.FakeClock()
    monkeypatch.setattr(training_module, "time", clock)
    monkeypatch.setattr(waiting_module, "time", clock)
    fake.play(submit.JOB_ID, ["RUNNING", "CANCELLED"])
    ti = FakeTI()
    who = {"user": "ada", "at": "2026-11-25T10:05:00+00:00"}
    ti.xcom_pull = lambda key: who if key == CANCELLED_BY_XCOM_KEY else None  # type: ignore[attr-defined]
    monkeypatch.setattr(airflow.sdk, "get_current_context", lambda: {"ti": ti})

    with pytest.raises(JobFailedError):
        submit.operator().execute(submit.make_context(ti))

    api = job_api_of(ti.xcom[JOB_API_XCOM_KEY])
    assert api is not None
    assert (api["name"], api["project_id"], api["api_endpoint"]) == (
        f"projects/proj/jobs/{submit.JOB_ID}",
        "proj",
        submit.LOCAL,
    )
    assert isinstance(build_hook(api), TrainingJobHook)  # the backend's own hook, as the task's
    ended = ti.xcom[ENDED_JOB_XCOM_KEY]  # what the tab shows once the task has failed
    assert (ended["job_id"], ended["status"], ended["state"]) == (submit.JOB_ID, "cancelled", "CANCELLED")
    assert ended["summary"]["state"] == "CANCELLED"
    assert (
        f"Job {submit.JOB_ID} was cancelled from the Training job tab by ada at 2026-11-25T10:05:00+00:00"
        in capsys.readouterr().out  # the task log (structlog writes it to stdout here)
    )


def test_a_task_whose_ended_job_is_held_says_when_it_resumes_and_offers_no_cancel(
    session: Session, monkeypatch: pytest.MonkeyPatch, state: dict[str, Any]
) -> None:
    """Issue 52: the job ended, the trigger holds its event ([aip] deferral_hold): the tab says until
    when and why, and offers no Cancel for a job that has ended."""
    import time

    from airflow_aip.ui import app as ui_app

    jobs = FakeJobs(running_job("JOB_STATE_SUCCEEDED", endTime="2026-11-25T10:05:00Z"))
    _push_job(session, "iris_tuning_live")
    release = time.time() + 20
    monkeypatch.setattr(ui_app, "_release_at", lambda db, ti: release)
    client = _client(session, monkeypatch, jobs, state, editor=True)

    held = client.get("/api/task", params=QUERY).raise_for_status().json()
    assert (held["job"]["state"], held["refresh_s"], held["can_cancel"]) == ("SUCCEEDED", 5.0, False)
    assert held["held"]["until"] == datetime.fromtimestamp(release, timezone.utc).isoformat(
        timespec="seconds"
    )
    assert 15 < held["held"]["seconds_left"] <= 20
    assert held["held"]["issue"] == "apache/airflow#67287"

    state["task"] = "queued"  # the hold is over: the task resumes, still no Cancel
    resumed = client.get("/api/task", params=QUERY).raise_for_status().json()
    assert (resumed["held"]["until"], resumed["can_cancel"]) == (None, False)


def test_a_running_job_is_not_held_and_may_be_cancelled(
    session: Session, monkeypatch: pytest.MonkeyPatch, jobs: FakeJobs, state: dict[str, Any]
) -> None:
    from airflow_aip.ui import app as ui_app

    _push_job(session, "iris_tuning_live")
    monkeypatch.setattr(ui_app, "_release_at", lambda db, ti: pytest.fail("read only for an ended job"))
    client = _client(session, monkeypatch, jobs, state, editor=True)
    data = client.get("/api/task", params=QUERY).raise_for_status().json()
    assert (data["held"], data["can_cancel"]) == (None, True)


def test_the_hold_is_read_from_the_deferred_tasks_trigger(session: Session) -> None:
    """``release_at`` out of the trigger row Airflow stores (its arguments encrypted, as always)."""
    from airflow.models.trigger import Trigger

    from airflow_aip.ui.app import _release_at

    trigger = Trigger(
        classpath="airflow_aip.triggers.training.TrainingJobTrigger", kwargs={"release_at": 1.5e9}
    )
    session.add(trigger)
    session.flush()
    task_instance(session, DAG, RUN, TASK, trigger_id=trigger.id, state="deferred")
    session.commit()
    assert _release_at(session, (DAG, RUN, TASK, -1)) == 1.5e9
    assert _release_at(session, (DAG, RUN, "other", -1)) is None

"""Submit/Cancel operators and the sensor on ml v1, faked at the HTTP boundary (Vertex: see
test_vertex_adapters)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from airflow_aip.compat import AirflowFailException, TaskDeferred
from airflow_aip.exceptions import (
    AipError,
    JobAlreadyExistsError,
    JobFailedError,
    JobNotFoundError,
    JobSpecMismatchError,
    JobWaitTimeoutError,
    ValidationError,
)
from airflow_aip.hooks import waiting as waiting_module
from airflow_aip.hooks.logs import JobLogsHook
from airflow_aip.hooks.training import TrainingJobHook
from airflow_aip.jobs.mlv1.view import view_from_ml
from airflow_aip.links import CONSOLE_URL_XCOM_KEY, JOB_ID_XCOM_KEY, TrainingJobConsoleLink
from airflow_aip.operators import CancelTrainingJobOperator
from airflow_aip.operators import training as training_module
from airflow_aip.sensors import training as sensor_module
from airflow_aip.sensors.training import TrainingJobSensor
from airflow_aip.triggers.training import TrainingJobTrigger, job_event
from tests.fixtures.logging_api import FakeLoggingApi
from tests.fixtures.operators import FakeTI
from tests.fixtures.submit import JOB_ID, LOCAL, FakeClock, make_context, operator
from tests.unit.ml_fake import FakeMlApi, serve_hook


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> FakeMlApi:
    return serve_hook(monkeypatch, TrainingJobHook, FakeMlApi())


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(training_module, "time", fake)
    monkeypatch.setattr(waiting_module, "time", fake)  # the runner of the wait step
    return fake


def sent_bodies(api: FakeMlApi) -> list[dict[str, Any]]:
    return [body for _, _, body in api.calls("POST", "/jobs")]


def test_template_fields_are_attributes() -> None:
    op = operator()
    for name in op.template_fields:
        assert hasattr(op, name), name
    for name in ("job_id_prefix", "training_input", "placement", "config", "vertex_job", "labels"):
        assert name in op.template_fields


def test_submit_and_wait_in_worker(api: FakeMlApi, clock: FakeClock) -> None:
    api.play(JOB_ID, ["PREPARING", "RUNNING", "SUCCEEDED"])
    ti = FakeTI()
    summary = operator().execute(make_context(ti))
    assert summary["job_id"] == JOB_ID
    assert summary["state"] == "SUCCEEDED"
    assert (
        summary["console_url"] == f"{LOCAL}console/projects/proj/jobs/{JOB_ID}"  # the local service's page
    )
    assert json.loads(json.dumps(summary)) == summary
    assert ti.xcom[JOB_ID_XCOM_KEY] == JOB_ID
    assert ti.xcom[CONSOLE_URL_XCOM_KEY] == summary["console_url"]
    assert clock.sleeps == [30, 30, 30]
    (body,) = sent_bodies(api)
    assert body["trainingInput"]["args"] == ["--epochs", "2"]
    assert body["labels"] == {
        "airflow-dag-id": "train_dag",
        "airflow-task-id": "train",
        "airflow-run-id": "manual__2024-03-09t07-05-01-00-00",
        "airflow-try-number": "1",
    }


@pytest.mark.parametrize("final", ["FAILED", "CANCELLED"])
def test_only_succeeded_succeeds(api: FakeMlApi, clock: FakeClock, final: str) -> None:
    api.play(JOB_ID, ["RUNNING", final])

    def fail_on_get(method: str, path: str) -> None:
        if method == "GET":
            api.jobs[("proj", JOB_ID)].update(errorMessage="OOM in master")

    api.on_request = fail_on_get
    with pytest.raises(JobFailedError, match="OOM in master") as err:
        operator().execute(make_context())
    assert err.value.state == final
    assert err.value.job_id == JOB_ID


@pytest.mark.parametrize("waiting", ["QUEUED", "PREPARING", "RUNNING", "CANCELLING", "STATE_UNSPECIFIED"])
def test_waiting_states_keep_waiting(api: FakeMlApi, clock: FakeClock, waiting: str) -> None:
    api.play(JOB_ID, [waiting, waiting, "SUCCEEDED"])
    assert operator().execute(make_context())["state"] == "SUCCEEDED"
    assert len(api.calls("GET")) == 3


def test_no_wait_returns_at_once(api: FakeMlApi, clock: FakeClock) -> None:
    summary = operator(wait_for_completion=False).execute(make_context())
    assert summary["state"] == "QUEUED"
    assert api.calls("GET") == []


def test_deferrable_checks_then_defers(api: FakeMlApi, clock: FakeClock) -> None:
    op = operator(
        deferrable=True,
        wait_timeout=600,
        cancel_on_kill=False,
        stream_logs=True,
        max_log_lines_per_minute=7,
        impersonation_chain="runner@proj.iam.gserviceaccount.com",
    )
    ti = FakeTI()
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(make_context(ti))
    trigger = deferred.value.trigger
    assert isinstance(trigger, TrainingJobTrigger)
    assert trigger.job_id == JOB_ID
    assert trigger.project_id == "proj"
    assert trigger.api_endpoint == LOCAL
    assert trigger.end_time == clock.now + 600
    assert trigger.cancel_on_kill is False
    assert trigger.stream_logs is True
    assert trigger.log_cursor is None  # nothing shown yet: the trigger starts at the job's createTime
    assert trigger.max_log_lines_per_minute == 7
    assert trigger.impersonation_chain == "runner@proj.iam.gserviceaccount.com"  # the same identity
    assert deferred.value.method_name == "execute_complete"
    assert ti.xcom[JOB_ID_XCOM_KEY] == JOB_ID  # pushed before deferring


def test_deferring_hands_the_masked_values_in_its_job_to_the_trigger(
    api: FakeMlApi, clock: FakeClock
) -> None:
    from airflow.sdk.log import mask_secret

    secret = f"token-{uuid.uuid4().hex}"
    mask_secret(secret)  # as resolving a Variable named like a token does
    op = operator({"args": ["--auth", f"Bearer {secret}", "--epochs", "2"]}, deferrable=True)
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(make_context())
    assert deferred.value.trigger.masked_values == [secret]  # the value alone, not the whole arg
    assert secret not in json.dumps(deferred.value.kwargs or {})  # nor in what execute_complete gets


def test_deferrable_adopting_a_finished_job_does_not_defer(api: FakeMlApi, clock: FakeClock) -> None:
    op = operator(deferrable=True)
    api.add_job(
        "proj", JOB_ID, "SUCCEEDED", **op.build_job(make_context()).requests[0].body
    )  # an earlier try's
    assert op.execute(make_context())["state"] == "SUCCEEDED"


def test_execute_complete_reads_the_event(api: FakeMlApi) -> None:
    op = operator()
    done = job_event(view_from_ml({"jobId": "other_job", "state": "SUCCEEDED"}, "p2"), "p2")
    assert op.execute_complete(make_context(), done)["job_id"] == "other_job"
    with pytest.raises(JobFailedError):
        op.execute_complete(
            make_context(), job_event(view_from_ml({"jobId": "x", "state": "FAILED"}, "proj"), "proj")
        )
    assert api.cancels == []


def test_giving_up_cancels_the_job(api: FakeMlApi) -> None:
    api.add_job("proj", "j9", "RUNNING")
    event = {"status": "timeout", "job_id": "j9", "project_id": "proj", "state": "RUNNING", "message": "m"}
    with pytest.raises(JobWaitTimeoutError):
        operator().execute_complete(make_context(), event)
    assert api.cancels == ["j9"]
    with pytest.raises(JobWaitTimeoutError):
        operator(cancel_on_kill=False).execute_complete(make_context(), event)
    assert api.cancels == ["j9"]


def test_an_error_event_never_cancels_the_job(api: FakeMlApi) -> None:
    api.add_job("proj", "j9", "RUNNING")
    event = {"status": "error", "job_id": "j9", "project_id": "proj", "state": "RUNNING", "message": "403"}
    with pytest.raises(AipError, match="403"):
        operator().execute_complete(make_context(), event)
    assert api.cancels == []  # waiting is observation only: the retry adopts the running job


def fail_reads(api: FakeMlApi, count: int | None, status: int = 503) -> None:
    """The next ``count`` job reads (None: every one) fail with ``status``; creates go through."""
    left = [count]

    def inject(method: str, path: str) -> None:
        if method == "GET" and (left[0] is None or left[0] > 0):
            api.errors.append((status, f"injected {status}"))
            left[0] = None if left[0] is None else left[0] - 1

    api.on_request = inject


def test_worker_wait_rides_out_an_outage_without_cancelling(api: FakeMlApi, clock: FakeClock) -> None:
    from structlog.testing import capture_logs

    api.play(JOB_ID, ["RUNNING", "SUCCEEDED"])
    fail_reads(api, 4)
    with capture_logs() as captured:
        summary = operator().execute(make_context())
    assert summary["state"] == "SUCCEEDED"
    assert api.cancels == []
    assert len(api.calls("GET")) == 6
    outage = [str(e["event"]) for e in captured if "outage" in str(e["event"])]
    assert len(outage) == 2  # once when it starts, once when it ends
    assert "injected 503" in outage[0]
    assert "4 failed reads" in outage[1]
    assert clock.sleeps[0] == 30  # the poll interval, then backoff: 1, 2, 4, 8 s (jittered)
    assert [0.5 <= s / 2**n <= 1 for n, s in enumerate(clock.sleeps[1:5])] == [True] * 4


def test_worker_wait_outage_stops_at_wait_timeout_and_cancels(api: FakeMlApi, clock: FakeClock) -> None:
    fail_reads(api, None)
    with pytest.raises(JobWaitTimeoutError):
        operator(wait_timeout=100).execute(make_context())
    assert sum(clock.sleeps) == pytest.approx(100)  # backoff never sleeps past the deadline
    assert api.cancels == [JOB_ID]  # giving up (wait_timeout) is the task's own decision


def test_worker_wait_fails_on_a_non_transient_error_and_leaves_the_job(
    api: FakeMlApi, clock: FakeClock
) -> None:
    fail_reads(api, 1, status=403)
    with pytest.raises(AipError, match="HTTP 403"):
        operator().execute(make_context())
    assert api.cancels == []
    assert len(api.calls("GET")) == 1


def test_worker_wait_timeout_cancels(api: FakeMlApi, clock: FakeClock) -> None:
    with pytest.raises(JobWaitTimeoutError):
        operator(wait_timeout=100, poll_interval=30).execute(make_context())
    assert api.cancels == [JOB_ID]
    assert sum(clock.sleeps) == 100


def test_on_kill_while_waiting_in_worker_cancels(api: FakeMlApi, clock: FakeClock) -> None:
    op = operator()
    api.play(JOB_ID, ["RUNNING", "RUNNING", "RUNNING"])

    def kill_on_second_poll(method: str, path: str) -> None:
        if method == "GET" and len(api.calls("GET")) == 2:
            op.on_kill()  # as the SIGTERM handler would, mid-wait

    api.on_request = kill_on_second_poll
    with pytest.raises(JobFailedError) as err:
        op.execute(make_context())
    assert err.value.state == "CANCELLED"
    assert api.cancels == [JOB_ID]


def test_on_kill_respects_cancel_on_kill(api: FakeMlApi) -> None:
    op = operator(cancel_on_kill=False)
    op._watching().watched = (JOB_ID, "proj")
    op.on_kill()
    assert api.cancels == []
    operator().on_kill()  # nothing submitted yet: nothing to cancel
    assert api.requests == []


# -- log streaming (the real service: tests/integration/test_log_streaming.py) -----------------


@pytest.fixture
def logs(monkeypatch: pytest.MonkeyPatch) -> FakeLoggingApi:
    return serve_hook(monkeypatch, JobLogsHook, FakeLoggingApi())


def job_lines(captured: Sequence[Mapping[str, Any]]) -> list[str]:
    return [str(e["event"]).rsplit(" ", 1)[-1] for e in captured if "[master-replica-0]" in str(e["event"])]


def test_worker_wait_streams_each_line_once_then_drains(
    api: FakeMlApi, clock: FakeClock, logs: FakeLoggingApi
) -> None:
    from structlog.testing import capture_logs

    api.play(JOB_ID, ["RUNNING", "RUNNING", "SUCCEEDED"])
    logs.job_id = JOB_ID
    logs.add(2)
    logs.on_request = lambda n: logs.add(2, start=2 * n) if n < 3 else None  # lines keep coming
    with capture_logs() as captured:
        assert operator(stream_logs=True).execute(make_context())["state"] == "SUCCEEDED"
    assert job_lines(captured) == [str(n) for n in range(6)]
    # Two polls while RUNNING, then the drain: one poll at the end, one 5 s later that is empty.
    assert len(logs.bodies) == 4
    assert clock.sleeps == [30, 30, 30, 5]
    assert all(b["resourceNames"] == ["projects/proj"] for b in logs.bodies)
    assert f'resource.labels.job_id="{JOB_ID}"' in logs.bodies[0]["filter"]


def test_unreadable_logs_never_fail_the_task(api: FakeMlApi, clock: FakeClock, logs: FakeLoggingApi) -> None:
    from structlog.testing import capture_logs

    api.play(JOB_ID, ["RUNNING", "SUCCEEDED"])
    logs.errors.extend([403] * 10)
    with capture_logs() as captured:
        assert operator(stream_logs=True).execute(make_context())["state"] == "SUCCEEDED"
    warnings = [e["event"] for e in captured if e["log_level"] == "warning"]
    assert any("Could not read the logs of training job" in str(w) for w in warnings)


# -- if_exists --------------------------------------------------------------------------------


def existing_input(**changes: Any) -> dict[str, Any]:
    return {
        "packageUris": ["gs://bucket/trainer-0.1.tar.gz"],
        "pythonModule": "trainer.task",
        "args": ["--epochs", "2"],
        "jobDir": "gs://bucket/out",
        "region": "us-central1",
        "scaleTier": "BASIC",  # filled in by the server: not a difference
        **changes,
    }


def our_labels(**changes: str) -> dict[str, str]:
    """The labels an earlier try of FakeTI's task instance gave its job."""
    return {
        "airflow-dag-id": "train_dag",
        "airflow-task-id": "train",
        "airflow-run-id": "manual__2024-03-09t07-05-01-00-00",
        "airflow-try-number": "1",
        **changes,
    }


def test_409_adopts_an_earlier_trys_job_with_the_same_spec(api: FakeMlApi, clock: FakeClock) -> None:
    api.add_job("proj", JOB_ID, "SUCCEEDED", trainingInput=existing_input(), labels=our_labels())
    assert operator(wait_for_completion=False).execute(make_context())["job_id"] == JOB_ID
    assert len(sent_bodies(api)) == 1  # the create that met the 409


def test_409_with_a_different_spec_fails_listing_fields(api: FakeMlApi, clock: FakeClock) -> None:
    api.add_job(
        "proj",
        JOB_ID,
        "RUNNING",
        trainingInput=existing_input(args=["--epochs", "3"], region="eu"),
        labels=our_labels(team="a"),
    )
    with pytest.raises(JobSpecMismatchError) as err:
        operator().execute(make_context())
    assert err.value.differing_fields == ["args", "region", "labels.team"]
    assert api.cancels == []


def test_another_runs_job_under_our_id_is_never_adopted(api: FakeMlApi, clock: FakeClock) -> None:
    other_run = our_labels(**{"airflow-run-id": "manual__2024-03-09t07-05-01-5-00-00"})
    api.add_job("proj", "pinned", "RUNNING", trainingInput=existing_input(), labels=other_run)
    summary = operator(job_id="pinned", wait_for_completion=False).execute(make_context())
    assert summary["job_id"] == "pinned_r2"
    assert api.jobs[("proj", "pinned_r2")]["labels"] == our_labels()


@pytest.mark.parametrize("ended", ["FAILED", "CANCELLED"])
def test_ended_job_is_retried_as_r2_then_r3(api: FakeMlApi, clock: FakeClock, ended: str) -> None:
    api.add_job("proj", JOB_ID, ended, trainingInput=existing_input(), labels=our_labels())
    api.add_job(
        "proj", f"{JOB_ID}_r2", "FAILED", trainingInput=existing_input(args=["old"]), labels=our_labels()
    )
    summary = operator(wait_for_completion=False).execute(make_context())
    assert summary["job_id"] == f"{JOB_ID}_r3"
    assert [b["jobId"] for b in sent_bodies(api)] == [JOB_ID, f"{JOB_ID}_r2", f"{JOB_ID}_r3"]


def test_if_exists_fail(api: FakeMlApi, clock: FakeClock) -> None:
    api.add_job("proj", JOB_ID, "RUNNING", trainingInput=existing_input())
    with pytest.raises(JobAlreadyExistsError):
        operator(if_exists="fail").execute(make_context())


def test_if_exists_new_takes_the_next_free_suffix(api: FakeMlApi, clock: FakeClock) -> None:
    api.add_job("proj", JOB_ID, "SUCCEEDED", trainingInput=existing_input())
    summary = operator(if_exists="new", wait_for_completion=False).execute(make_context())
    assert summary["job_id"] == f"{JOB_ID}_r2"


# -- job ids and inputs ----------------------------------------------------------------------


def test_job_id_prefix_map_index_and_run_after(api: FakeMlApi, clock: FakeClock) -> None:
    op = operator(job_id_prefix="My Model!", wait_for_completion=False)
    summary = op.execute(make_context(FakeTI(map_index=3), logical_date=None))
    assert summary["job_id"] == "My_Model_3_20240309_070501_96abb7a094e9"
    assert sent_bodies(api)[0]["labels"] == our_labels(**{"airflow-map-index": "3"})


def test_two_runs_in_one_second_get_two_ids_and_a_retry_keeps_its_id() -> None:
    first, second, retry = FakeTI(), FakeTI(), FakeTI()
    second.run_id = "manual__2024-03-09T07:05:01.500000+00:00"  # triggered in the same second
    ids = [operator().build_job(make_context(ti)).base_id for ti in (first, second, retry)]
    assert ids[0] != ids[1]
    assert ids[0] == ids[2] == JOB_ID


def test_explicit_job_id(api: FakeMlApi, clock: FakeClock) -> None:
    assert (
        operator(job_id="exact_id", wait_for_completion=False).execute(make_context())["job_id"] == "exact_id"
    )
    with pytest.raises(ValidationError) as err:
        operator(job_id="bad-id").execute(make_context())
    assert err.value.field == "job_id"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"training_input": {"scaleTier": "CUSTOM"}}, "trainingInput.masterType"),
        ({"training_input": {"pythonModule": None}}, "trainingInput.pythonModule"),
        ({"if_exists": "replace"}, "if_exists"),
        ({"poll_interval": 0}, "poll_interval"),
        ({"max_log_lines_per_minute": 0}, "max_log_lines_per_minute"),
        ({"labels": {f"k{i}": "v" for i in range(70)}}, "labels"),
        (
            {"training_input": {"hyperparameters": {"params": [], "goal": "MAXIMIZE"}}},
            "trainingInput.hyperparameters.params",
        ),
    ],
)
def test_bad_input_fails_before_any_request(
    api: FakeMlApi, clock: FakeClock, kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValidationError) as err:
        operator(**kwargs).execute(make_context())
    assert err.value.field == field
    assert api.requests == []


def test_config_file_then_training_input(api: FakeMlApi, clock: FakeClock, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "trainingInput:\n  scaleTier: CUSTOM\n  masterType: n1-standard-4\n  region: europe-west1\n"
        "  scheduling: {maxWaitTime: 3600s}\nlabels:\n  team: ml\n"
    )
    operator(
        {"masterType": "n1-standard-8", "pythonVersion": "3.7"},
        config=str(config),
        wait_for_completion=False,
        labels={"cost-center": "42"},
    ).execute(make_context())
    (body,) = sent_bodies(api)
    ti = body["trainingInput"]
    assert ti["masterType"] == "n1-standard-8"
    assert ti["region"] == "us-central1"
    assert ti["scheduling"] == {"maxWaitTime": "3600s"}
    assert ti["pythonVersion"] == "3.7"
    assert body["labels"]["team"] == "ml"
    assert body["labels"]["cost-center"] == "42"


# -- cancel operator -------------------------------------------------------------------------


def test_cancel_operator(api: FakeMlApi) -> None:
    api.add_job("proj", "live", "RUNNING")
    api.add_job("proj", "done", "SUCCEEDED")
    kwargs = {
        "project_id": "proj",
        "api_endpoint": LOCAL,
        "gcp_conn_id": "aip_missing_conn",
        "backend": "ai_platform",
    }
    live = CancelTrainingJobOperator(task_id="c1", job_id="live", **kwargs).execute(make_context())
    assert live == {
        "job_id": "live",
        "name": "projects/proj/jobs/live",
        "project_id": "proj",
        "cancel_requested": True,
    }
    done = CancelTrainingJobOperator(task_id="c2", job_id="done", **kwargs).execute(make_context())
    assert done["cancel_requested"] is False
    with pytest.raises(JobNotFoundError):
        CancelTrainingJobOperator(task_id="c3", job_id="nope", **kwargs).execute(make_context())


# -- sensor ----------------------------------------------------------------------------------


def sensor(**kwargs: Any) -> TrainingJobSensor:
    base = {
        "task_id": "wait",
        "backend": "ai_platform",
        "job_id": "j1",
        "project_id": "proj",
        "api_endpoint": LOCAL,
        "gcp_conn_id": "x",
        "stream_logs": False,
    }
    return TrainingJobSensor(**{**base, "poke_interval": 5, **kwargs})


@pytest.fixture
def sensor_clock(clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    monkeypatch.setattr(sensor_module, "time", clock)
    return clock


def test_sensor_reschedule_poke_is_one_read(api: FakeMlApi) -> None:
    api.add_job("proj", "j1", "RUNNING")
    api.play("j1", ["RUNNING", "SUCCEEDED"])
    assert not sensor(mode="reschedule").poke(make_context())
    done = sensor(mode="reschedule").poke(make_context())
    assert cast(dict[str, Any], done.xcom_value)["state"] == "SUCCEEDED"
    assert len(api.calls("GET")) == 2


def test_sensor_poke_mode_waits_in_one_poke(api: FakeMlApi, sensor_clock: FakeClock) -> None:
    api.add_job("proj", "j1", "RUNNING")
    api.play("j1", ["RUNNING", "RUNNING", "SUCCEEDED"])
    done = sensor().poke(make_context())
    assert cast(dict[str, Any], done.xcom_value)["state"] == "SUCCEEDED"
    assert sensor_clock.sleeps == [5, 5]


def test_sensor_poke_mode_rides_out_an_outage(api: FakeMlApi, sensor_clock: FakeClock) -> None:
    from structlog.testing import capture_logs

    api.add_job("proj", "j1", "RUNNING")
    api.play("j1", ["RUNNING", "SUCCEEDED"])
    fail_reads(api, 3)
    with capture_logs() as captured:
        done = sensor().poke(make_context())
    assert cast(dict[str, Any], done.xcom_value)["state"] == "SUCCEEDED"
    assert len([e for e in captured if "outage" in str(e["event"])]) == 2
    assert api.cancels == []


def test_sensor_poke_mode_timeout_never_cancels(api: FakeMlApi, sensor_clock: FakeClock) -> None:
    from airflow_aip.compat import AirflowSensorTimeout

    api.add_job("proj", "j1", "RUNNING")
    fail_reads(api, None)
    with pytest.raises(AirflowSensorTimeout):
        sensor(timeout=60, cancel_on_kill=True).poke(make_context())
    assert sum(sensor_clock.sleeps) == pytest.approx(60)
    assert api.cancels == []  # the sensor may not own the job: its teardown cancels, if asked


def test_sensor_reschedule_poke_meeting_an_outage_is_not_done(api: FakeMlApi) -> None:
    from structlog.testing import capture_logs

    api.add_job("proj", "j1", "RUNNING")
    fail_reads(api, 1)
    with capture_logs() as captured:
        assert not sensor(mode="reschedule").poke(make_context())
    assert [e["log_level"] for e in captured if "outage" in str(e["event"])] == ["warning"]
    assert api.cancels == []


def test_sensor_fails_on_a_non_transient_error_and_leaves_the_job(api: FakeMlApi) -> None:
    api.add_job("proj", "j1", "RUNNING")
    fail_reads(api, 1, status=403)
    with pytest.raises(AipError, match="HTTP 403"):
        sensor(mode="reschedule", cancel_on_kill=True).poke(make_context())
    assert api.cancels == []


def test_sensor_deferrable_defers_through_an_outage(api: FakeMlApi) -> None:
    api.add_job("proj", "j1", "RUNNING", trainingInput={"args": ["--token", "s3cr3t"]})
    fail_reads(api, 1)
    with pytest.raises(TaskDeferred):  # the trigger rides it out
        sensor(deferrable=True, timeout=60).execute(make_context())
    assert api.cancels == []


@pytest.mark.parametrize("final", ["FAILED", "CANCELLED"])
def test_sensor_fails_without_retry_on_ended_job(api: FakeMlApi, final: str) -> None:
    api.add_job("proj", "j1", final, errorMessage="bad")
    with pytest.raises(AirflowFailException, match="bad"):
        sensor().poke(make_context())


def test_sensor_checks_streams_then_defers_with_the_cursor(api: FakeMlApi, logs: FakeLoggingApi) -> None:
    from structlog.testing import capture_logs

    api.add_job("proj", "j1", "RUNNING")
    logs.add(3)
    waiting = sensor(stream_logs=True, deferrable=True, timeout=3600)
    with capture_logs() as captured, pytest.raises(TaskDeferred) as deferred:
        waiting.execute(make_context())
    assert job_lines(captured) == ["0", "1", "2"]  # the check before deferring shows them once
    trigger = deferred.value.trigger
    assert trigger.log_cursor == {"timestamp": "2024-05-01T12:00:02.000000000Z", "insert_ids": ["id0002"]}


def test_sensor_in_reschedule_mode_shows_the_log_once_the_job_ended(
    api: FakeMlApi, logs: FakeLoggingApi
) -> None:
    api.add_job("proj", "j1", "RUNNING")
    api.play("j1", ["RUNNING", "SUCCEEDED"])
    logs.add(3)
    from structlog.testing import capture_logs

    rescheduled = sensor(stream_logs=True, mode="reschedule", poke_interval=0.001)
    assert not rescheduled.poke(make_context())
    assert logs.bodies == []  # a new process per poke: showing lines now would repeat them
    with capture_logs() as captured:
        assert rescheduled.poke(make_context())
    assert job_lines(captured) == ["0", "1", "2"]
    assert logs.bodies[0]["filter"].endswith('timestamp>="2024-01-01T00:00:00.000000000Z"')  # createTime


def test_sensor_deferrable(api: FakeMlApi) -> None:
    api.add_job("proj", "j1", "QUEUED")
    ti = FakeTI()
    with pytest.raises(TaskDeferred) as deferred:
        sensor(deferrable=True, timeout=3600, impersonation_chain=["a@p.iam.gserviceaccount.com"]).execute(
            make_context(ti)
        )
    trigger = deferred.value.trigger
    assert isinstance(trigger, TrainingJobTrigger)
    assert trigger.impersonation_chain == ["a@p.iam.gserviceaccount.com"]
    assert trigger.poll_interval == 5
    assert trigger.cancel_on_kill is False
    assert trigger.end_time is not None
    assert ti.xcom[JOB_ID_XCOM_KEY] == "j1"
    event = job_event(view_from_ml({"jobId": "j1", "state": "SUCCEEDED"}, "proj"), "proj")
    assert sensor().execute_complete(make_context(), event)["state"] == "SUCCEEDED"
    api.jobs[("proj", "j1")]["state"] = "SUCCEEDED"
    assert sensor(deferrable=True).execute(make_context())["state"] == "SUCCEEDED"


def test_sensor_cancels_on_kill_only_when_asked(api: FakeMlApi) -> None:
    api.add_job("proj", "j1", "RUNNING")
    watching = sensor(mode="reschedule")
    assert not watching.poke(make_context())
    watching.on_kill()
    assert api.cancels == []  # by default the sensor leaves a job it may not own alone
    owning = sensor(cancel_on_kill=True)
    owning.on_kill()  # killed before its first poke, too
    assert api.cancels == ["j1"]
    api.add_job("proj", "j2", "RUNNING")
    with pytest.raises(TaskDeferred) as deferred:
        sensor(job_id="j2", cancel_on_kill=True, deferrable=True, timeout=60).execute(make_context())
    assert deferred.value.trigger.cancel_on_kill is True


# -- link ------------------------------------------------------------------------------------


def test_console_link_reads_xcom(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk.execution_time import xcom

    asked: list[dict[str, Any]] = []

    def get_one(**kwargs: Any) -> str:
        asked.append(kwargs)
        return "https://console.cloud.google.com/ai-platform/jobs/j1?project=proj"

    monkeypatch.setattr(xcom.XCom, "get_one", staticmethod(get_one))
    link = TrainingJobConsoleLink()
    key = SimpleNamespace(dag_id="d", task_id="t", run_id="r", map_index=-1, try_number=1)
    assert link.get_link(operator(), ti_key=key).endswith("j1?project=proj")  # type: ignore[arg-type]
    assert asked[0]["key"] == CONSOLE_URL_XCOM_KEY == link.xcom_key
    assert link.name == "Training job"

"""The job's log lines in the task log, against the real local service (its logging v2 entries:list).

Worker mode (the operator's wait loop, the sensor's pokes) and the deferred path (the trigger's
``run()`` to completion in an event loop) log through structlog, captured with
``structlog.testing.capture_logs``. The operator's paths run on both backends (their jobs' log
IDs and task names differ: ml v1's own ID and ``master-replica-0``, Vertex AI's numeric ID and
``workerpool0-0``); the sensor's, on jobs created directly through the ml v1 API.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Mapping
from typing import Any

import pytest
from structlog.testing import capture_logs

from airflow_aip.compat import TaskDeferred
from airflow_aip.sensors.training import TrainingJobSensor
from airflow_aip.triggers.training import TrainingJobTrigger
from tests.fixtures.local_service import TERMINAL, LocalService, StagedTrainer, log_entries, wait_for_state
from tests.fixtures.log_streaming import CHATTY_ARGS, JOB_LINE, PROJECT, context, job_lines, operator

pytestmark = pytest.mark.integration
BACKENDS = pytest.mark.parametrize("backend", ["vertex", "ai_platform"])
PRIMARY_TASK = {"vertex": "workerpool0-0", "ai_platform": "master-replica-0"}
DROPPED = re.compile(r"^\.\.\. (\d+) lines dropped \(rate limit")


@pytest.fixture(autouse=True)
def no_logging_override(monkeypatch: pytest.MonkeyPatch) -> None:
    """Logs come from the ml endpoint (an emulator) unless a test says otherwise."""
    monkeypatch.delenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING", raising=False)


def messages(lines: list[str], prefix: str) -> list[str]:
    found = (JOB_LINE.match(line) for line in lines)
    return [m["message"] for m in found if m and m["message"].startswith(prefix)]


def log_id(summary: Mapping[str, Any]) -> str:
    """The ID the job's log entries carry: the last segment of its resource name."""
    return str(summary["name"]).rsplit("/", 1)[-1]


def sensor_on_new_job(
    service: LocalService, job_id: str, training_input: dict[str, Any], **kwargs: Any
) -> TrainingJobSensor:
    """A sensor (poking every second) on ml v1 job ``job_id``, created here with ``training_input``."""
    body = {"jobId": job_id, "trainingInput": training_input}
    service.ml().projects().jobs().create(parent=f"projects/{PROJECT}", body=body).execute()
    arguments = {"poke_interval": 1, "gcp_conn_id": "aip_missing_conn", "backend": "ai_platform", **kwargs}
    return TrainingJobSensor(task_id="wait", job_id=job_id, project_id=PROJECT, **arguments)


TWO_TRIALS = {
    "goal": "MAXIMIZE",
    "algorithm": "GRID_SEARCH",
    "maxTrials": 2,
    "maxParallelTrials": 2,
    "params": [{"parameterName": "x", "type": "INTEGER", "minValue": 1, "maxValue": 2}],
}


def tagged_trials(lines: list[str], task: str) -> set[str]:
    """The trials whose lines were relayed, each line tagged ``[<task> trial N]`` with its own trial."""
    seen = set()
    for line in lines:
        if " x=" not in line or "] trial " not in line:
            continue
        match = JOB_LINE.match(line)
        assert match is not None
        trial = re.search(r"^trial (\d+) ", match["message"])
        assert trial is not None
        assert match["where"] == f"{task} trial {trial[1]}"
        seen.add(trial[1])
    return seen


def expected_chatty(count: int = 30) -> list[str]:
    return [f"chatty line {n:04d}" for n in range(1, count + 1)]


@BACKENDS
def test_worker_mode_shows_every_line_once_in_order(
    local_env: LocalService, staged_trainer: StagedTrainer, backend: str
) -> None:
    op = operator(staged_trainer, "chatty", CHATTY_ARGS, deferrable=False, backend=backend)
    with capture_logs() as captured:
        summary = op.execute(context())
    assert summary["state"] == "SUCCEEDED"
    lines = job_lines(captured)
    # Lines 21-30 were printed in the last second before exit: only the drain sees them.
    assert messages(lines, "chatty line") == expected_chatty()
    assert messages(lines, "Job state: SUCCEEDED") == ["Job state: SUCCEEDED"]
    assert all(f"[{PRIMARY_TASK[backend]}]" in line for line in lines if "chatty line" in line)
    assert len(lines) == len(set(lines))
    everything = log_entries(local_env.url, PROJECT, log_id(summary))
    assert len(lines) == len(everything)  # below the rate limit, every entry of the job is shown


def test_a_successful_jobs_stderr_warning_is_no_error_line(
    local_env: LocalService, staged_trainer: StagedTrainer
) -> None:
    """The service logs stderr at ERROR, as Google does; the task log, each line at its content's level."""
    op = operator(staged_trainer, "succeed", [], deferrable=False, backend="vertex")
    with capture_logs() as captured:
        summary = op.execute(context())
    assert summary["state"] == "SUCCEEDED"
    relayed = {
        str(e["event"]).split("] ", 1)[-1]: e["log_level"]
        for e in captured
        if JOB_LINE.match(str(e["event"]))
    }
    warning = next(line for line in relayed if "FutureWarning: a harmless future warning" in line)
    source = next(line for line in relayed if "warnings.warn(" in line)
    assert (relayed[warning], relayed[source], relayed["a warning on stderr"]) == (
        "warning",
        "warning",
        "info",
    )
    assert [line for line, level in relayed.items() if level == "error"] == []
    stored = {e["textPayload"]: e["severity"] for e in log_entries(local_env.url, PROJECT, log_id(summary))}
    assert stored[warning] == "ERROR"  # Cloud Logging's view is Google's


@BACKENDS
def test_deferred_mode_streams_from_the_trigger_then_one_event(
    local_env: LocalService, staged_trainer: StagedTrainer, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    monkeypatch.setenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING", local_env.url)  # gcloud's variable
    monkeypatch.setenv("AIRFLOW__AIP__DEFERRAL_HOLD", "0")  # no executor here: nothing to hold for
    op = operator(staged_trainer, "chatty", [*CHATTY_ARGS, "--fail"], deferrable=True, backend=backend)
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(context())
    trigger = deferred.value.trigger
    assert isinstance(trigger, TrainingJobTrigger)
    assert trigger.stream_logs is True
    rebuilt = TrainingJobTrigger(**trigger.serialize()[1])  # what the triggerer runs

    async def run() -> list[dict[str, Any]]:
        return [event.payload async for event in rebuilt.run()]

    with capture_logs() as captured:
        events = asyncio.run(run())
    assert [e["status"] for e in events] == ["failed"]  # exactly one event; lines are logs
    lines = job_lines(captured)
    assert messages(lines, "chatty line") == expected_chatty()
    assert len(messages(lines, "Job state: FAILED")) == 1
    assert any(str(e["event"]).startswith("Streaming logs of training job") for e in captured)


def test_sensor_pokes_then_the_trigger_continues_from_its_cursor(
    local_env: LocalService, staged_trainer: StagedTrainer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lines the first poke showed are not shown again by the trigger; none are missing."""
    monkeypatch.setenv("AIRFLOW__AIP__DEFERRAL_HOLD", "0")  # no executor here: nothing to hold for
    job_id = f"resume_{uuid.uuid4().hex[:10]}"
    sensor = sensor_on_new_job(
        local_env, job_id, staged_trainer.training_input("chatty", CHATTY_ARGS), deferrable=True
    )
    with capture_logs() as poked, pytest.raises(TaskDeferred) as deferred:
        sensor.execute(context())
    trigger = deferred.value.trigger
    assert isinstance(trigger, TrainingJobTrigger)
    before = job_lines(poked)
    assert before  # at least "Job created; waiting in the queue."
    assert trigger.log_cursor is not None

    async def run() -> list[dict[str, Any]]:
        return [event.payload async for event in TrainingJobTrigger(**trigger.serialize()[1]).run()]

    with capture_logs() as waited:
        events = asyncio.run(run())
    assert [e["status"] for e in events] == ["success"]
    lines = before + job_lines(waited)
    assert len(lines) == len(set(lines)) == len(log_entries(local_env.url, PROJECT, job_id))
    assert messages(lines, "chatty line") == expected_chatty()


def test_tuning_job_lines_carry_their_trial_ids(
    local_env: LocalService, staged_trainer: StagedTrainer
) -> None:
    job_id = f"tune_logs_{uuid.uuid4().hex[:8]}"
    training_input = staged_trainer.training_input("tune", hyperparameters=TWO_TRIALS)
    sensor = sensor_on_new_job(local_env, job_id, training_input, timeout=300, mode="poke")
    with capture_logs() as captured:
        summary = sensor.execute(context())
    assert summary["state"] == "SUCCEEDED"
    lines = job_lines(captured)
    assert tagged_trials(lines, "master-replica-0") == {"1", "2"}
    assert len(lines) == len(set(lines)) == len(log_entries(local_env.url, PROJECT, job_id))


def test_vertex_tuning_job_lines_carry_their_trial_ids(
    local_env: LocalService, staged_trainer: StagedTrainer
) -> None:
    """On Vertex AI the trials log under the tuning job's numeric ID, tagged with their trial."""
    op = operator(staged_trainer, "tune", [], hyperparameters=TWO_TRIALS, deferrable=False)
    with capture_logs() as captured:
        summary = op.execute(context())
    assert summary["state"] == "SUCCEEDED"
    assert "/hyperparameterTuningJobs/" in summary["name"]
    lines = job_lines(captured)
    assert tagged_trials(lines, "workerpool0-0") == {"1", "2"}
    assert len(lines) == len(set(lines)) == len(log_entries(local_env.url, PROJECT, log_id(summary)))
    best = [str(e["event"]) for e in captured if str(e.get("event")).startswith("Best trial: ")]
    assert len(best) == 1  # the wait's last words: the winner, its metric and hyperparameters
    assert f"Best trial: {summary['best_trial']['trialId']} with training/hptuning/metric = " in best[0]


def test_reschedule_mode_shows_the_log_once_when_the_job_ended(
    local_env: LocalService, staged_trainer: StagedTrainer
) -> None:
    job_id = f"resched_{uuid.uuid4().hex[:8]}"
    training_input = staged_trainer.training_input("chatty", CHATTY_ARGS)
    sensor = sensor_on_new_job(local_env, job_id, training_input, mode="reschedule", gcp_conn_id="x")
    with capture_logs() as running:
        assert not sensor.poke(context())  # still queued or running: nothing shown yet
    assert job_lines(running) == []
    wait_for_state(local_env.ml(), f"projects/{PROJECT}/jobs/{job_id}", TERMINAL)
    with capture_logs() as ended:
        assert sensor.poke(context())
    assert messages(job_lines(ended), "chatty line") == expected_chatty()


def test_a_flood_is_capped_and_the_dropped_count_reported(
    local_env: LocalService, staged_trainer: StagedTrainer
) -> None:
    per_minute = 100
    op = operator(
        staged_trainer, "chatty", ["--flood", "5000"], deferrable=False, max_log_lines_per_minute=per_minute
    )
    started = time.monotonic()
    with capture_logs() as captured:
        summary = op.execute(context())
    elapsed = time.monotonic() - started
    assert summary["state"] == "SUCCEEDED"
    events = [str(e["event"]) for e in captured]
    shown = job_lines(captured)
    dropped = [int(m[1]) for e in events if (m := DROPPED.match(e))]
    assert dropped
    # The cap held: a burst of per_minute, then per_minute a minute, however long the run took.
    assert len(shown) <= per_minute + per_minute * elapsed / 60 + 1
    total = len(log_entries(local_env.url, PROJECT, log_id(summary)))
    assert len(shown) + sum(dropped) == total  # every entry either shown once or counted as dropped
    numbers = [int(m.split()[-1]) for m in messages(shown, "flood line")]
    assert numbers == sorted(set(numbers))  # in order, none twice


def test_a_deferrable_submit_whose_job_ends_within_defer_after_never_defers(
    local_env: LocalService, staged_trainer: StagedTrainer
) -> None:
    """A job of 2 s ends in the worker's first wait: no deferral, so no ``deferral_hold`` after it."""
    op = operator(staged_trainer, "chatty", CHATTY_ARGS, deferrable=True, defer_after=60)
    with capture_logs() as captured:
        summary = op.execute(context())  # TaskDeferred would fail the test here
    assert summary["state"] == "SUCCEEDED"
    lines = job_lines(captured)
    assert messages(lines, "chatty line") == expected_chatty()
    assert len(lines) == len(set(lines)) == len(log_entries(local_env.url, PROJECT, log_id(summary)))
    assert not [e for e in captured if "deferring" in str(e["event"])]


def test_a_job_running_past_defer_after_defers_and_its_trigger_shows_every_line_once(
    local_env: LocalService, staged_trainer: StagedTrainer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW__AIP__DEFERRAL_HOLD", "0")  # no executor here: nothing to hold for
    op = operator(staged_trainer, "chatty", [*CHATTY_ARGS[:3], "6"], deferrable=True, defer_after=2)
    with capture_logs() as first, pytest.raises(TaskDeferred) as deferred:
        op.execute(context())
    assert any(str(e["event"]).endswith("still runs after defer_after (2 s): deferring.") for e in first)
    trigger = deferred.value.trigger
    assert isinstance(trigger, TrainingJobTrigger)
    assert job_lines(first) == []  # the trigger shows them all, from the job's start, within its quota

    async def run() -> list[dict[str, Any]]:
        return [event.payload async for event in TrainingJobTrigger(**trigger.serialize()[1]).run()]

    with capture_logs() as waited:
        events = asyncio.run(run())
    assert [e["status"] for e in events] == ["success"]
    lines = job_lines(waited)
    stored = log_entries(local_env.url, PROJECT, log_id({"name": trigger.job_name}))
    assert len(lines) == len(set(lines)) == len(stored)

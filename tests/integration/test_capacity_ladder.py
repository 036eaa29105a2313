"""The capacity ladder through real task runs (dag.test) against a region that lacks things on purpose.

One ``aip-local serve`` for the module with capacity flags: A100s out of stock, L4 quota 0 (jobs
wait QUEUED), Flex-Start capacity never comes; 429s at create are queued per test through
``/_capacity``. What each test checks is read back from the service, by the jobs' labels.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
import urllib.request
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_aip.local.storage.gcs import FakeGcsServer
from tests.fixtures.ladder import A100_RUNG, CPU_RUNG
from tests.fixtures.local_service import LocalService, StagedTrainer, own_service
from tests.fixtures.operators import FakeTI, task_context, task_instance
from tests.fixtures.vertex import aiplatform
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.integration
PROJECT = "ladder-ops"
REGION = "us-central1"
PARENT = f"projects/{PROJECT}/locations/{REGION}"
FLAGS = [
    "--fault-admin",
    f"--stockout={REGION}:NVIDIA_TESLA_A100",
    f"--quota={REGION}:custom_model_training_nvidia_l4_gpus=0",
    "--flex-start-capacity-after=never",
]
A100, CPU = A100_RUNG, CPU_RUNG
WHEN = datetime(2026, 3, 9, 7, 5, 1, tzinfo=timezone.utc)  # the run's logical date: its job IDs'

DAG = """\
from datetime import datetime
from airflow.sdk import DAG
from airflow_aip.operators import ExportArtifactsOperator, SubmitTrainingJobOperator

with DAG({name!r}, schedule=None, start_date=datetime(2026, 1, 1)) as dag:
    submit = SubmitTrainingJobOperator(
        task_id="submit", project_id={project!r}, region={region!r}, job_id_prefix={name!r},
        training_input={training_input!r}, placement={ladder!r}, config={config!r},
        executor_image_uri="us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest",
        deferrable={deferrable!r}, poll_interval=0.5, retries=0, wait_timeout={wait_timeout!r},
        budget={budget!r},
    )
    export = ExportArtifactsOperator(
        task_id="export", project_id={project!r}, region={region!r},
        job_id="{{{{ ti.xcom_pull(task_ids='submit')['name'] }}}}",
        earlier_jobs="{{{{ ti.xcom_pull(task_ids='submit')['earlier_jobs'] | tojson }}}}",
        destination_uri={destination!r}, source_subdir="",
    ) if {export!r} else None
    if export is not None:
        submit >> export
"""


service = own_service("service", FLAGS, jobs=4)


@pytest.fixture
def env(service: LocalService, fake_gcs: FakeGcsServer, monkeypatch: pytest.MonkeyPatch) -> LocalService:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", fake_gcs.url)
    monkeypatch.setenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM", service.url)
    return service


def capacity(service: LocalService, body: dict[str, Any]) -> None:
    service.admin("_capacity", body, "POST")


def run_dag(loader: Any, trainer: StagedTrainer, module: str, args: list[str], **kw: Any) -> tuple[Any, str]:
    name = kw.get("name") or f"aip_ladder_{uuid.uuid4().hex[:8]}"
    source = DAG.format(
        name=name,
        project=PROJECT,
        region=REGION,
        training_input=kw.get("training_input") or trainer.training_input(module, args),
        ladder=kw.get("ladder"),
        config=kw.get("config"),
        deferrable=kw.get("deferrable", False),
        wait_timeout=kw.get("wait_timeout"),
        export=kw.get("export", False),
        destination=f"gs://{trainer.bucket}/models/{name}",
        budget=kw.get("budget"),
    )
    return loader(name, source).test(), name


def states(run: Any) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in run.get_task_instances()}


def summary_of(run: Any, task_id: str = "submit") -> dict[str, Any]:
    result: dict[str, Any] = task_instance(run, task_id).xcom_pull(task_ids=task_id)
    return result


def jobs_of(service: LocalService, dag_id: str, kind: str = "customJobs") -> list[dict[str, Any]]:
    """Every job the DAG's runs created, oldest first (by the dag-id label), trials included."""
    collection = getattr(aiplatform(service.url).projects().locations(), kind)()
    listed = collection.list(parent=PARENT, filter=f'labels.airflow-dag-id="{dag_id}"').execute()
    jobs = [collection.get(name=job["name"]).execute() for job in listed.get(kind, [])]
    return sorted(jobs, key=lambda job: job["createTime"])


def test_a_stockout_climbs_to_the_next_rung_and_one_model_is_exported(
    env: LocalService, staged_trainer: StagedTrainer, load_test_dag: Any
) -> None:
    run, dag_id = run_dag(load_test_dag, staged_trainer, "succeed", [], ladder=[A100, CPU], export=True)
    assert states(run) == {"submit": "success", "export": "success"}, states(run)
    summary = summary_of(run)
    first, second = summary["ladder"]
    assert (first["label"], first["state"], first["ended_because"]) == ("a100", "FAILED", "stockout")
    assert "Resources are insufficient" in first["detail"]
    assert (second["label"], second["state"], second["ended_because"]) == ("cpu", "SUCCEEDED", None)
    assert second["job_id"] == summary["job_id"]
    assert summary["job_id"].endswith("_cpu")
    assert first["waited_seconds"] is not None
    assert second["ran_seconds"] is not None
    assert first["cost"]["amount"] == 0.0  # failed before it ran: nothing billed (its A100 is unpriced)
    assert second["cost"]["amount"] > 0
    assert summary["ladder_cost"]["amount"] == pytest.approx(second["cost"]["amount"])
    jobs = jobs_of(env, dag_id)
    assert [(j["labels"]["aip_rung"], j["state"]) for j in jobs] == [
        ("a100", "JOB_STATE_FAILED"),
        ("cpu", "JOB_STATE_SUCCEEDED"),
    ]
    assert jobs[0]["error"]["code"] == 8
    assert jobs[1]["jobSpec"]["workerPoolSpecs"][0]["machineSpec"] == {"machineType": "n1-standard-4"}
    exported = summary_of(run, "export")
    assert exported["job_id"] == summary["job_id"]


def ladder_try(training_input: dict[str, Any], ti: FakeTI, **arguments: Any) -> dict[str, Any]:
    """One try of a task with the ladder [A100, CPU], waiting in the worker: ``ti`` says which."""
    from airflow_aip.operators import SubmitTrainingJobOperator

    operator = SubmitTrainingJobOperator(
        task_id="submit",
        project_id=PROJECT,
        region=REGION,
        training_input=training_input,
        placement=[A100, CPU],
        executor_image_uri="us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest",
        deferrable=False,
        poll_interval=0.5,
        **arguments,
    )
    summary: dict[str, Any] = operator.execute(task_context(ti, WHEN))  # type: ignore[arg-type]
    return summary


def test_a_ladder_does_not_climb_to_a_rung_it_cannot_afford(
    env: LocalService, staged_trainer: StagedTrainer, load_test_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    # the CPU rung's worst case is 7 days of an n1-standard-4 (about USD 40): over a USD 1 budget
    run, dag_id = run_dag(load_test_dag, staged_trainer, "succeed", [], ladder=[A100, CPU], budget=1)
    assert states(run) == {"submit": "failed"}, states(run)
    assert [j["labels"]["aip_rung"] for j in jobs_of(env, dag_id)] == ["a100"]  # no CPU job made
    printed = capfd.readouterr()
    assert "not climbing to rung 2, cpu" in printed.out + printed.err


def test_a_retry_passes_the_rungs_already_tried_and_adopts_the_job_of_the_rung_reached(
    env: LocalService, staged_trainer: StagedTrainer
) -> None:
    """What a retry after a lost worker does (the Celery tier kills one mid-ladder, in soak): the
    same task instance's next try scans the rungs, passes rung 1's failed job and adopts rung 2's
    by its rung job ID, creating nothing."""
    dag_id = f"aip_ladder_{uuid.uuid4().hex[:8]}"
    training_input = staged_trainer.training_input("succeed")  # one task: one spec, one job dir
    first = ladder_try(training_input, FakeTI(dag_id, "submit"))
    retry = ladder_try(training_input, FakeTI(dag_id, "submit"))  # the same task instance: the same IDs

    jobs = jobs_of(env, dag_id)
    assert [(j["labels"]["aip_rung"], j["state"]) for j in jobs] == [
        ("a100", "JOB_STATE_FAILED"),
        ("cpu", "JOB_STATE_SUCCEEDED"),
    ]  # nothing created by the retry
    assert retry["job_id"] == first["job_id"] == jobs[1]["displayName"]
    assert [(r["label"], r["job_id"], r["state"], r["ended_because"]) for r in retry["ladder"]] == [
        ("a100", jobs[0]["displayName"], "FAILED", "stockout"),
        ("cpu", jobs[1]["displayName"], "SUCCEEDED", None),
    ]


def test_a_clear_climbs_the_ladder_again_from_rung_one_and_its_retry_adopts(
    env: LocalService, staged_trainer: StagedTrainer
) -> None:
    """A user's clear asks for a new run: the rungs' jobs that ended before it are a past run's, so
    the ladder starts at rung 1 again (capacity may be back) and trains under ``_r2`` IDs; a retry
    after that clear adopts what the clear made."""
    dag_id = f"aip_ladder_{uuid.uuid4().hex[:8]}"
    training_input = staged_trainer.training_input("succeed")  # one task: one spec, one job dir

    def one_try(try_number: int, max_tries: int) -> dict[str, Any]:
        ti = FakeTI(dag_id, "submit", try_number=try_number, max_tries=max_tries)
        return ladder_try(training_input, ti, retries=1)

    one_try(1, 1)  # the run: rung 1 out of stock, rung 2 trains
    cleared = one_try(2, 2)  # cleared after try 1: max_tries = 1 + retries, the next try is 2
    retry = one_try(3, 2)  # that clear's retry

    jobs = jobs_of(env, dag_id)
    assert [(j["labels"]["aip_rung"], j["labels"]["airflow-try-number"], j["state"]) for j in jobs] == [
        ("a100", "1", "JOB_STATE_FAILED"),
        ("cpu", "1", "JOB_STATE_SUCCEEDED"),
        ("a100", "2", "JOB_STATE_FAILED"),
        ("cpu", "2", "JOB_STATE_SUCCEEDED"),
    ]  # the clear tried rung 1 again; the retry created nothing
    assert [j["displayName"] for j in jobs[2:]] == [f"{j['displayName']}_r2" for j in jobs[:2]]
    assert retry["job_id"] == cleared["job_id"] == jobs[3]["displayName"]
    assert [(r["label"], r["job_id"]) for r in cleared["ladder"]] == [
        ("a100", jobs[2]["displayName"]),
        ("cpu", jobs[3]["displayName"]),
    ]


def test_flex_start_past_its_wait_limit_climbs_deferred(
    env: LocalService, staged_trainer: StagedTrainer, load_test_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    """The climb is logged once, at WARNING, though the task scans the rungs again when rung 2's
    job ends (to say which rung it reached)."""
    flex: dict[str, Any] = {
        "strategy": "FLEX_START",
        "max_wait_duration": "2s",
        "machine_type": "g2-standard-4",
    }
    flex |= {"accelerator_type": "NVIDIA_L4", "accelerator_count": 1}
    run, dag_id = run_dag(load_test_dag, staged_trainer, "succeed", [], ladder=[flex, CPU], deferrable=True)
    assert states(run) == {"submit": "success"}, states(run)
    ladder = summary_of(run)["ladder"]
    assert [(r["label"], r["ended_because"]) for r in ladder] == [("flex", "flex_start_wait"), ("cpu", None)]
    out = capfd.readouterr()  # dag.test() prints the task's log
    climbs = [line for line in (out.out + out.err).splitlines() if "Capacity ladder: rung 1" in line]
    assert len(climbs) == 1, climbs
    assert "warn" in climbs[0].lower(), climbs
    jobs = jobs_of(env, dag_id)
    assert jobs[0]["jobSpec"]["scheduling"] == {"strategy": "FLEX_START", "maxWaitDuration": "2s"}
    assert [j["state"] for j in jobs] == ["JOB_STATE_FAILED", "JOB_STATE_SUCCEEDED"]


def test_a_create_refused_for_quota_climbs_and_leaves_no_job(
    env: LocalService, staged_trainer: StagedTrainer, load_test_dag: Any
) -> None:
    capacity(env, {"create429": ["quota:1"]})
    spot = {"strategy": "SPOT"}
    run, dag_id = run_dag(load_test_dag, staged_trainer, "succeed", [], ladder=[spot, CPU])
    assert states(run) == {"submit": "success"}, states(run)
    first, second = summary_of(run)["ladder"]
    assert (first["label"], first["state"], first["ended_because"]) == ("spot", "NOT_CREATED", "quota")
    assert first["job_id"] is None
    assert second["state"] == "SUCCEEDED"
    assert [j["labels"]["aip_rung"] for j in jobs_of(env, dag_id)] == ["cpu"]


def test_a_request_rate_429_is_retried_and_never_climbs(
    env: LocalService, staged_trainer: StagedTrainer, load_test_dag: Any
) -> None:
    capacity(env, {"create429": ["rate:1"]})
    run, dag_id = run_dag(load_test_dag, staged_trainer, "succeed", [], ladder=[{"strategy": "SPOT"}, CPU])
    assert states(run) == {"submit": "success"}, states(run)
    ladder = summary_of(run)["ladder"]
    assert [(r["label"], r["status"]) for r in ladder] == [("spot", "ran"), ("cpu", "not needed")]
    assert (ladder[1]["job_id"], ladder[1]["state"]) == (None, None)  # listed, never tried
    jobs = jobs_of(env, dag_id)
    assert [(j["labels"]["aip_rung"], j["jobSpec"]["scheduling"]["strategy"]) for j in jobs] == [
        ("spot", "SPOT")
    ]


def test_a_trainer_error_never_climbs(
    env: LocalService, staged_trainer: StagedTrainer, load_test_dag: Any
) -> None:
    run, dag_id = run_dag(load_test_dag, staged_trainer, "fail", [], ladder=[{"strategy": "SPOT"}, CPU])
    assert states(run) == {"submit": "failed"}
    jobs = jobs_of(env, dag_id)
    assert [(j["labels"]["aip_rung"], j["state"]) for j in jobs] == [("spot", "JOB_STATE_FAILED")]
    assert jobs[0]["error"]["code"] != 8


def test_queued_past_the_rung_limit_is_cancelled_and_climbs(
    env: LocalService, staged_trainer: StagedTrainer, load_test_dag: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    l4 = {
        "label": "l4",
        "machine_type": "g2-standard-4",
        "accelerator_type": "NVIDIA_L4",
        "accelerator_count": 1,
    }
    run, dag_id = run_dag(
        load_test_dag, staged_trainer, "succeed", [], ladder=[{**l4, "queued_limit": 3}, CPU]
    )
    assert states(run) == {"submit": "success"}, states(run)
    first, _ = summary_of(run)["ladder"]
    assert (first["label"], first["ended_because"], first["ran_seconds"]) == ("l4", "queued_limit", None)
    assert first["waited_seconds"] >= 3
    assert [j["state"] for j in jobs_of(env, dag_id)] == ["JOB_STATE_CANCELLED", "JOB_STATE_SUCCEEDED"]
    printed = capsys.readouterr().out
    assert "is QUEUED for quota custom_model_training_nvidia_l4_gpus in us-central1, 0 min" in printed
    assert "training with message=" in printed  # rung 2's own log lines, streamed into the task log


def test_giving_up_on_a_rung_cancels_its_job_and_climbs_no_further(
    env: LocalService, staged_trainer: StagedTrainer, load_test_dag: Any
) -> None:
    run, dag_id = run_dag(
        load_test_dag, staged_trainer, "sleep", ["--seconds", "600"], ladder=[A100, CPU], wait_timeout=8
    )
    assert states(run) == {"submit": "failed"}
    jobs = jobs_of(env, dag_id)
    assert [j["labels"]["aip_rung"] for j in jobs] == ["a100", "cpu"]
    assert jobs[1]["state"] in ("JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED")


def test_a_ladder_that_cannot_be_built_fails_before_anything_is_created(
    env: LocalService, staged_trainer: StagedTrainer, load_test_dag: Any
) -> None:
    bad = {"label": "a100", "machine_type": "n1-standard-4", "accelerator_type": "NVIDIA_TESLA_A100"}
    run, dag_id = run_dag(load_test_dag, staged_trainer, "succeed", [], ladder=[CPU, bad])
    assert states(run) == {"submit": "failed"}
    assert jobs_of(env, dag_id) == []


SEARCH = {
    "goal": "MAXIMIZE",
    "maxParallelTrials": 1,
    "algorithm": "GRID_SEARCH",
    "params": [{"parameterName": "x", "type": "DISCRETE", "discreteValues": [1, 2, 3, 4, 5]}],
}


def _get(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=30) as answer:
        job: dict[str, Any] = json.loads(answer.read())
    return job


def _stock_out_after_first_trial(service: LocalService, dag_id: str, machine: str) -> threading.Thread:
    """Once the DAG's tuning job has one SUCCEEDED trial, the region runs out of ``machine``."""

    query = urllib.parse.urlencode({"filter": f'labels.airflow-dag-id="{dag_id}"'})
    url = f"{service.url}v1/{PARENT}/hyperparameterTuningJobs?{query}"

    def a_trial_succeeded() -> bool:
        with urllib.request.urlopen(url, timeout=30) as answer:
            listed = json.loads(answer.read()).get("hyperparameterTuningJobs", [])
        jobs = [_get(f"{service.url}v1/{job['name']}") for job in listed]  # a list leaves trials out
        return any(t.get("state") == "SUCCEEDED" for j in jobs for t in j.get("trials", []))

    def watch() -> None:  # a failure here is the thread's: pytest reports it, the test fails on its own
        wait_until(a_trial_succeeded, 240, f"SUCCEEDED trial of {dag_id}'s tuning job to stock out after")
        capacity(service, {"stockouts": [f"{REGION}:NVIDIA_TESLA_A100", f"{REGION}:{machine}"]})

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_a_tuning_job_split_across_two_rungs_runs_the_remaining_budget_and_picks_the_best_over_both(
    env: LocalService, staged_trainer: StagedTrainer, load_test_dag: Any
) -> None:
    name = f"aip_ladder_{uuid.uuid4().hex[:8]}"
    first = {"label": "small", "machine_type": "n1-standard-4"}
    second = {"label": "large", "machine_type": "n1-standard-8"}
    training_input = staged_trainer.training_input(
        "tune", ["--hold", "2"], hyperparameters={**SEARCH, "maxTrials": 4}
    )
    watcher = _stock_out_after_first_trial(env, name, "n1-standard-4")
    try:
        run, dag_id = run_dag(
            load_test_dag,
            staged_trainer,
            "",
            [],
            ladder=[first, second],
            training_input=training_input,
            name=name,
        )
    finally:
        watcher.join(timeout=60)
        capacity(env, {"stockouts": [f"{REGION}:NVIDIA_TESLA_A100"]})
    assert states(run) == {"submit": "success"}, states(run)
    summary = summary_of(run)
    small, large = summary["ladder"]
    assert (small["ended_because"], large["state"]) == ("stockout", "SUCCEEDED")
    done = small["trials_finished"]
    assert 1 <= done < 4
    jobs = jobs_of(env, dag_id, "hyperparameterTuningJobs")
    assert [j["maxTrialCount"] for j in jobs] == [4, 4 - done]
    assert jobs[1]["trialJobSpec"]["baseOutputDirectory"]["outputUriPrefix"].endswith("/large/")
    assert [t["rung"] for t in summary["trials"]] == ["small"] * len(jobs[0]["trials"]) + ["large"] * (
        4 - done
    )
    finished = [t for t in summary["trials"] if t["state"] == "SUCCEEDED"]
    best = max(finished, key=lambda t: t["finalMetric"]["objectiveValue"])
    assert summary["best_trial"] == best
    assert summary["earlier_jobs"] == [jobs[0]["name"]]


def test_resume_previous_job_id_from_a_config_yaml_counts_the_earlier_trials(
    env: LocalService, staged_trainer: StagedTrainer, load_test_dag: Any, tmp_path: Path
) -> None:
    earlier_input = staged_trainer.training_input("tune", [], hyperparameters={**SEARCH, "maxTrials": 2})
    earlier_run, earlier_dag = run_dag(load_test_dag, staged_trainer, "", [], training_input=earlier_input)
    earlier = summary_of(earlier_run)
    assert len(earlier["trials"]) == 2
    config = tmp_path / "config.yaml"
    resumed = {**SEARCH, "maxTrials": 5, "resumePreviousJobId": earlier["job_id"]}
    config.write_text(yaml.safe_dump({"trainingInput": {"hyperparameters": resumed}}))
    run, dag_id = run_dag(
        load_test_dag,
        staged_trainer,
        "",
        [],
        training_input=staged_trainer.training_input("tune", []),
        config=str(config),
    )
    assert states(run) == {"submit": "success"}, states(run)
    summary = summary_of(run)
    (job,) = jobs_of(env, dag_id, "hyperparameterTuningJobs")
    assert job["maxTrialCount"] == 3
    assert job["trialJobSpec"]["baseOutputDirectory"]["outputUriPrefix"].endswith("/resumed/")
    assert [t["rung"] for t in summary["trials"]] == ["previous"] * 2 + [""] * 3
    assert {t["job_id"] for t in summary["trials"]} == {earlier["job_id"], summary["job_id"]}
    assert summary["earlier_jobs"] == [earlier["name"]]
    scored = [t for t in summary["trials"] if "finalMetric" in t]
    assert summary["best_trial"] == max(scored, key=lambda t: t["finalMetric"]["objectiveValue"])
    assert earlier_dag != dag_id

"""The capacity ladder's pure rules: rungs, what counts as a capacity failure, the study's budget."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.times import epoch_seconds
from airflow_aip.jobs.vertex.capacity import (
    EXHAUSTED,
    FLEX_START_WAIT,
    PREEMPTED,
    QUEUED,
    STOCKOUT,
    quota_refusal,
    rung_ending,
    why_waiting,
)
from airflow_aip.jobs.vertex.ladder import Rung, apply_rung, parse_ladder, rung_job_id
from airflow_aip.jobs.vertex.ladder_trials import continue_study, rung_record, with_ladder
from airflow_aip.jobs.vertex.placement import apply_placement, check_placement
from airflow_aip.jobs.waiting import QUEUED_NOTE_INTERVAL, Seen, WaitState, step

T0 = epoch_seconds("2026-11-25T10:00:00Z") or 0.0
POOL = {
    "machineSpec": {
        "machineType": "a2-highgpu-1g",
        "acceleratorType": "NVIDIA_TESLA_A100",
        "acceleratorCount": 1,
    }
}
CUSTOM: dict[str, Any] = {
    "jobSpec": {"workerPoolSpecs": [POOL, {}, {"machineSpec": {"machineType": "a2-highgpu-1g"}}]}
}


def test_rungs_from_strategy_names_and_mappings_get_labels() -> None:
    rungs = parse_ladder(
        ["SPOT", {"strategy": "FLEX_START", "max_wait_duration": "600s"}, {"reservation": "r1"}]
    )
    assert [r.label for r in rungs] == ["spot", "flex", "reserved"]
    assert rungs[1].describe() == "flex (FLEX_START)"


@pytest.mark.parametrize(
    ("ladder", "field"),
    [
        ("SPOT", "placement"),
        ([], "placement"),
        (["SPOT"] * 9, "placement"),
        ([{"strategy": "CHEAP"}], "placement[0].strategy"),
        ([{"speed": 1}], "placement[0].speed"),
        (["SPOT", "SPOT"], "placement[1].label"),
        ([{"label": "r2"}], "placement[0].label"),
        ([{"label": "Has_Caps"}], "placement[0].label"),
        ([{"strategy": "SPOT", "max_wait_duration": "60s"}], "placement[0].max_wait_duration"),
        ([{"strategy": "FLEX_START", "max_wait_duration": "1h"}], "placement[0].max_wait_duration"),
        ([{"queued_limit": 0}], "placement[0].queued_limit"),
        ([{"queued_limit": True}], "placement[0].queued_limit"),
        ([{"region": "mars-central1"}], "placement[0].region"),
        ([{"accelerator_count": -1}], "placement[0].accelerator_count"),
        ([{"machine_type": ""}], "placement[0].machine_type"),
        ([3], "placement[0]"),
    ],
)
def test_bad_rungs_name_their_field(ladder: Any, field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_ladder(ladder)
    assert caught.value.field == field


def test_rung_ids_fit_the_length_rule_and_take_attempts() -> None:
    (rung,) = parse_ladder(["SPOT"])
    assert rung_job_id("base_1", rung) == "base_1_spot"
    assert rung_job_id("base_1", rung, 3) == "base_1_spot_r3"
    long = rung_job_id("a" * 128, rung, 100)
    assert len(long) <= 128
    assert long.endswith("_spot_r100")


def test_a_rung_sets_every_pool_and_drops_what_its_strategy_cannot_take() -> None:
    body = {
        **CUSTOM,
        "jobSpec": {**CUSTOM["jobSpec"], "scheduling": {"strategy": "FLEX_START", "maxWaitDuration": "60s"}},
    }
    rung = Rung(label="cpu", strategy="STANDARD", machine_type="n1-standard-4", accelerator_count=0)
    out = apply_rung(body, rung)
    assert out["labels"] == {"aip_rung": "cpu"}
    assert out["jobSpec"]["scheduling"] == {"strategy": "STANDARD"}
    pools = out["jobSpec"]["workerPoolSpecs"]
    assert pools[0]["machineSpec"] == {"machineType": "n1-standard-4"}
    assert pools[1] == {}
    assert body["jobSpec"]["workerPoolSpecs"][0] == POOL  # not changed in place
    reserved = apply_rung(CUSTOM, Rung(label="res", reservation="projects/p/zones/z/reservations/r1"))
    affinity = reserved["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["reservationAffinity"]
    assert affinity["reservationAffinityType"] == "SPECIFIC_RESERVATION"
    assert affinity["values"] == ["projects/p/zones/z/reservations/r1"]


def view(state: str, code: int | None = None, message: str = "", **times: str) -> dict[str, Any]:
    return {
        "state": state,
        "error_code": code,
        "error_message": message,
        "create_time": "2026-11-25T10:00:00Z",
        **times,
    }


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ("Resources are insufficient in region: us-central1.", STOCKOUT),
        ("Flex-Start could not provision within scheduling.maxWaitDuration 60s", FLEX_START_WAIT),
        ("The job's Spot VMs were preempted 7 times", PREEMPTED),
        ("Something else ran out", EXHAUSTED),
    ],
)
def test_code_8_is_capacity_and_the_message_says_which(message: str, reason: str) -> None:
    ending = rung_ending(view("FAILED", 8, message), Rung(label="a"), T0)
    assert ending is not None
    assert (ending.reason, ending.detail) == (reason, message)


def test_a_trainer_failure_a_success_or_a_user_cancel_never_climbs() -> None:
    rung = Rung(label="a", queued_limit=600)
    assert rung_ending(view("FAILED", 3, "Resources are insufficient"), rung, T0) is None  # words alone: no
    assert rung_ending(view("FAILED", None, "ModuleNotFoundError"), rung, T0) is None
    assert rung_ending(view("SUCCEEDED"), rung, T0) is None
    cancelled_early = view("CANCELLED", 1, end_time="2026-11-25T10:01:00Z")
    assert rung_ending(cancelled_early, rung, T0 + 60) is None
    after_start = view("CANCELLED", 1, start_time="2026-11-25T10:00:05Z", end_time="2026-11-25T10:20:00Z")
    assert rung_ending(after_start, rung, T0 + 1200) is None


def test_cancelled_in_the_queue_past_the_limit_is_the_ladders_own_give_up() -> None:
    rung = Rung(label="a", queued_limit=600)
    ending = rung_ending(view("CANCELLING"), rung, T0 + 601)
    assert ending is not None
    assert ending.reason == QUEUED
    assert rung_ending(view("CANCELLED", 1, end_time="2026-11-25T10:10:01Z"), rung, T0 + 9999) is not None


def test_a_quota_429_is_told_from_the_request_rate() -> None:
    quota = (
        "The following quota metrics exceed quota limits: "
        + "aiplatform.googleapis.com/custom_model_training_cpus"
    )
    rate = (
        "Quota exceeded for quota metric 'Resource management (CRUD) requests' and limit 'Resource "
        "management (CRUD) requests per minute per region' of service 'aiplatform.googleapis.com'"
    )
    assert quota_refusal(429, quota) == "aiplatform.googleapis.com/custom_model_training_cpus"
    assert quota_refusal(429, rate) is None
    assert quota_refusal(400, quota) is None


def test_what_a_queued_job_waits_for() -> None:
    job = {"region": "us-central1", "spec": CUSTOM, "state": "QUEUED"}
    assert why_waiting(job) == "QUEUED for quota custom_model_training_nvidia_a100_gpus in us-central1"
    spot = {**job, "spec": apply_rung(CUSTOM, Rung(label="s", strategy="SPOT"))}
    assert (
        why_waiting(spot)
        == "QUEUED for quota custom_model_training_preemptible_nvidia_a100_gpus in us-central1"
    )


def queued_job(created: str = "2026-11-25T10:00:00Z") -> dict[str, Any]:
    return {
        "backend": "vertex",
        "state": "QUEUED",
        "region": "us-central1",
        "spec": CUSTOM,
        "create_time": created,
    }


def test_the_wait_says_why_a_job_is_queued_once_it_has_waited_and_ends_past_the_limit() -> None:
    state = WaitState.begin("j", T0)
    first = step(state, Seen(queued_job()), now=T0 + 1, deadline=None, poll_interval=10)
    assert first.logs == (("info", "Training job j is QUEUED"),)
    later = step(first.state, Seen(queued_job()), now=T0 + 840, deadline=None, poll_interval=10)
    assert later.logs == (
        (
            "info",
            "Training job j is QUEUED for quota custom_model_training_nvidia_a100_gpus in us-central1, "
            "14 min",
        ),
    )
    quiet = step(later.state, Seen(queued_job()), now=T0 + 850, deadline=None, poll_interval=10)
    assert quiet.logs == ()
    again = step(
        quiet.state, Seen(queued_job()), now=T0 + 840 + QUEUED_NOTE_INTERVAL, deadline=None, poll_interval=10
    )
    assert len(again.logs) == 1
    limited = step(state, Seen(queued_job()), now=T0 + 61, deadline=None, poll_interval=10, queued_limit=60)
    assert limited.action == "outwaited"


def tuning_body(max_trials: int = 6, parallel: int = 3) -> dict[str, Any]:
    spec = {"workerPoolSpecs": [POOL], "baseOutputDirectory": {"outputUriPrefix": "gs://b/out/"}}
    return {
        "maxTrialCount": max_trials,
        "parallelTrialCount": parallel,
        "studySpec": {},
        "trialJobSpec": spec,
    }


def trials(*states: str) -> list[dict[str, Any]]:
    return [{"trialId": str(i + 1), "state": s} for i, s in enumerate(states)]


def test_a_continued_study_runs_what_is_left_of_the_budget_in_its_own_folder() -> None:
    earlier = [{"trials": trials("SUCCEEDED", "FAILED", "RUNNING", "SUCCEEDED")}]
    out = continue_study(tuning_body(), earlier, "large")
    assert (out["maxTrialCount"], out["parallelTrialCount"]) == (3, 3)
    assert out["trialJobSpec"]["baseOutputDirectory"]["outputUriPrefix"] == "gs://b/out/large/"
    nearly = continue_study(tuning_body(6, 3), [{"trials": trials(*["SUCCEEDED"] * 5)}], "x")
    assert (nearly["maxTrialCount"], nearly["parallelTrialCount"]) == (1, 1)
    assert continue_study(CUSTOM, earlier, "x") == CUSTOM


def test_the_best_trial_is_chosen_over_every_job_and_says_where_it_ran() -> None:
    def scored(trial_id: str, value: float) -> dict[str, Any]:
        return {"trialId": trial_id, "state": "SUCCEEDED", "finalMetric": {"objectiveValue": value}}

    earlier_job = {
        "job_id": "j_small",
        "name": "n1",
        "output_dir": "gs://b/out/",
        "is_hyperparameter_tuning_job": True,
    }
    earlier_job["trials"] = [scored("1", 0.9), scored("2", 0.4)]
    summary = {"job_id": "j_large", "output_dir": "gs://b/out/large/", "is_hyperparameter_tuning_job": True}
    summary |= {"goal": "MAXIMIZE", "trials": [scored("1", 0.7)]}
    out = with_ladder(summary, [{"rung": 1}], [("small", earlier_job)], "large")
    assert [(t["job_id"], t["rung"], t["trialId"]) for t in out["trials"]] == [
        ("j_small", "small", "1"),
        ("j_small", "small", "2"),
        ("j_large", "large", "1"),
    ]
    assert (out["best_trial"]["job_id"], out["best_trial"]["output_dir"]) == ("j_small", "gs://b/out/")
    assert out["earlier_jobs"] == ["n1"]
    assert out["ladder"] == [{"rung": 1}]


def test_a_rung_record_says_how_long_it_waited_and_ran() -> None:
    record = rung_record(
        0,
        Rung(label="spot", strategy="SPOT"),
        {
            **view("SUCCEEDED", start_time="2026-11-25T10:02:00Z", end_time="2026-11-25T10:12:00Z"),
            "job_id": "j",
        },
        None,
        T0,
    )
    assert (record["rung"], record["waited_seconds"], record["ran_seconds"]) == (1, 120.0, 600.0)
    refused = rung_record(
        1, Rung(label="b"), None, rung_ending(view("FAILED", 8, "insufficient"), Rung(label="b"), T0), T0
    )
    assert (refused["state"], refused["ended_because"], refused["job_id"]) == ("NOT_CREATED", STOCKOUT, None)


def test_placement_arguments_are_checked_and_set() -> None:
    with pytest.raises(ValidationError, match="max_wait_duration"):
        check_placement({"max_wait_duration": "60s", "scheduling_strategy": "SPOT"})
    with pytest.raises(ValidationError, match="restart_job_on_worker_restart"):
        check_placement({"restart_job_on_worker_restart": "yes"})
    placed = apply_placement(
        CUSTOM,
        {
            "scheduling_strategy": "SPOT",
            "restart_job_on_worker_restart": True,
            "persistent_resource_id": "pr-1",
        },
    )
    spec = placed["jobSpec"]
    assert spec["scheduling"] == {"strategy": "SPOT", "restartJobOnWorkerRestart": True}
    assert spec["persistentResourceId"] == "pr-1"
    assert "labels" not in placed


def test_a_rung_that_adds_or_removes_gpus_or_moves_gets_the_images_twin() -> None:
    from airflow_aip.jobs.vertex.machines import image_for

    tf_cpu = "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-15.py310:latest"
    assert image_for(tf_cpu, gpu=True, region=None) == tf_cpu.replace("tf-cpu", "tf-gpu")
    moved = image_for(tf_cpu.replace("tf-cpu", "tf-gpu"), gpu=False, region="europe-west4")
    assert moved == "europe-docker.pkg.dev/vertex-ai/training/tf-cpu.2-15.py310:latest"
    sklearn = "us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest"
    assert image_for(sklearn, gpu=True, region=None) == sklearn  # no GPU build: its CPUs run it
    assert image_for("gcr.io/p/mine:1", gpu=True, region="europe-west4") == "gcr.io/p/mine:1"
    pool = {
        "machineSpec": {"machineType": "n1-standard-4"},
        "pythonPackageSpec": {"executorImageUri": tf_cpu},
    }
    body = {"jobSpec": {"workerPoolSpecs": [pool]}}
    a100 = Rung(label="a", machine_type="a2-highgpu-1g", accelerator_type="NVIDIA_TESLA_A100")
    out = apply_rung(body, a100)["jobSpec"]["workerPoolSpecs"][0]
    assert out["pythonPackageSpec"]["executorImageUri"].endswith("/tf-gpu.2-15.py310:latest")
    assert apply_rung(body, Rung(label="s", strategy="SPOT"))["jobSpec"]["workerPoolSpecs"][0] == pool


def test_a_continued_study_moves_the_job_dir_argument_with_its_output() -> None:
    body = tuning_body()
    body["trialJobSpec"]["workerPoolSpecs"] = [
        {
            **POOL,
            "pythonPackageSpec": {
                "args": ["--job-dir=gs://b/out", "--lr", "0.1", "--job_dir", "gs://b/out/"]
            },
        }
    ]
    out = continue_study(body, [{"trials": trials("SUCCEEDED")}], "resumed")
    args = out["trialJobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["args"]
    assert args == ["--job-dir=gs://b/out/resumed", "--lr", "0.1", "--job_dir", "gs://b/out/resumed"]


def test_a_placement_may_come_as_the_json_a_template_renders_and_an_empty_one_is_none() -> None:
    from airflow_aip.jobs.vertex.placement import parse_placement, placement_given

    placed = parse_placement('["SPOT", {"strategy": "STANDARD"}]')
    assert [r.label for r in placed.rungs] == ["spot", "standard"]
    assert parse_placement('{"strategy": "SPOT"}').job == {"scheduling_strategy": "SPOT"}
    values: tuple[object, ...] = (
        None,
        [],
        {},
        "",
        "null",
        "None",
        "[]",
        "{}",
        ["SPOT"],
        '["SPOT"]',
        {"strategy": "SPOT"},
    )
    assert [placement_given(v) for v in values] == [
        False,
        False,
        False,
        False,
        False,
        False,
        False,
        False,
        True,
        True,
        True,
    ]
    assert not parse_placement("").given


def test_a_job_placement_takes_the_job_s_keys_and_a_rung_takes_them_too() -> None:
    from airflow_aip.jobs.vertex.placement import parse_placement

    placed = parse_placement({"strategy": "FLEX_START", "max_wait_duration": "600s", "tensorboard": "tb"})
    assert placed.job == {
        "scheduling_strategy": "FLEX_START",
        "max_wait_duration": "600s",
        "tensorboard": "tb",
    }
    assert (placed.rungs, placed.field) == ((), "placement.strategy")
    (rung,) = parse_placement([{"strategy": "SPOT", "restart_job_on_worker_restart": True}]).rungs
    spec = apply_rung(CUSTOM, rung)["jobSpec"]
    assert spec["scheduling"] == {"strategy": "SPOT", "restartJobOnWorkerRestart": True}
    with pytest.raises(ValidationError) as caught:
        parse_placement({"strategy": "SPOT", "queued_limit": 60})
    assert caught.value.field == "placement.queued_limit"

"""A Vertex AI job as the neutral view: every state mapped, trials in AI Platform's words, the summary."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_aip.exceptions import ValidationError
from airflow_aip.hooks.vertex import VertexJobHook
from airflow_aip.jobs import summarize_job
from airflow_aip.jobs.mlv1.view import view_from_ml
from airflow_aip.jobs.states import JobState
from airflow_aip.jobs.vertex.enums import ENUM_NUMBERS
from airflow_aip.jobs.vertex.view import JOB_STATES, job_state, parse_name, view_from_vertex
from airflow_aip.jobs.waiting import job_event

NAME = "projects/123/locations/europe-west4/hyperparameterTuningJobs/456"


def tuning_job(state: str = "JOB_STATE_SUCCEEDED", goal: str = "MINIMIZE", **extra: Any) -> dict[str, Any]:
    def trial(trial_id: str, state: str, loss: float | None, lr: float, layers: float) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": trial_id,
            "state": state,
            "parameters": [{"parameterId": "lr", "value": lr}, {"parameterId": "layers", "value": layers}],
        }
        if loss is not None:
            out["finalMeasurement"] = {"stepCount": "10", "metrics": [{"metricId": "loss", "value": loss}]}
        return out

    return {
        "name": NAME,
        "displayName": "tune_20260101_000000_abcdef012345",
        "state": state,
        "createTime": "2026-01-01T00:00:00Z",
        "labels": {"aip_job_id": "tune_20260101_000000_abcdef012345"},
        "studySpec": {
            "metrics": [{"metricId": "loss", "goal": goal}],
            "parameters": [
                {
                    "parameterId": "lr",
                    "doubleValueSpec": {"minValue": 0.001, "maxValue": 1},
                    "scaleType": "UNIT_LOG_SCALE",
                },
                {"parameterId": "layers", "integerValueSpec": {"minValue": "1", "maxValue": "4"}},
            ],
        },
        "trialJobSpec": {"baseOutputDirectory": {"outputUriPrefix": "gs://b/out/"}},
        "trials": [
            trial("1", "SUCCEEDED", 0.5, 0.1, 2.0),
            trial("2", "INFEASIBLE", 0.01, 0.9, 3.0),  # a better metric, but the trial failed
            trial("3", "SUCCEEDED", 0.2, 0.01, 4.0),
            trial("4", "ACTIVE", None, 0.5, 1.0),
        ],
        **extra,
    }


def test_every_vertex_job_state_is_mapped_and_paused_or_expired_is_never_success() -> None:
    assert set(JOB_STATES) == set(ENUM_NUMBERS["GoogleCloudAiplatformV1CustomJob.state"])
    for name, number in ENUM_NUMBERS["GoogleCloudAiplatformV1CustomJob.state"].items():
        assert job_state(name) is job_state(number)  # a client that asked for enums as numbers
    assert job_state("JOB_STATE_PENDING") is JobState.PREPARING
    assert job_state("JOB_STATE_UPDATING") is JobState.RUNNING
    assert not job_state("JOB_STATE_CANCELLING").is_terminal
    for ended in ("JOB_STATE_PAUSED", "JOB_STATE_EXPIRED", "JOB_STATE_PARTIALLY_SUCCEEDED"):
        assert job_state(ended).is_terminal
        assert job_state(ended).is_failure
    assert job_state("JOB_STATE_SOMETHING_NEW") is JobState.STATE_UNSPECIFIED  # keeps waiting


def test_a_paused_job_ends_the_wait_as_a_failure() -> None:
    view = view_from_vertex(tuning_job("JOB_STATE_PAUSED"), project_id="p", region="europe-west4")
    event = job_event(view, "p")
    assert (event["status"], event["state"], event["job_name"]) == ("failed", "PAUSED", NAME)


def test_trials_read_as_ai_platform_and_infeasible_never_wins() -> None:
    view = view_from_vertex(tuning_job(), project_id="my-project", region="europe-west4")
    assert view["job_id"] == "tune_20260101_000000_abcdef012345"
    assert (view["name"], view["log_id"], view["output_dir"]) == (NAME, "456", "gs://b/out/")
    assert [t["state"] for t in view["trials"]] == ["SUCCEEDED", "FAILED", "SUCCEEDED", "RUNNING"]
    assert view["trials"][2]["hyperparameters"] == {"lr": "0.01", "layers": "4"}  # 4.0: an integer
    assert view["trials"][0]["finalMetric"] == {"trainingStep": "10", "objectiveValue": 0.5}
    summary = summarize_job(view)
    assert summary["best_trial"]["trialId"] == "3"  # MINIMIZE; trial 2's 0.01 was INFEASIBLE
    assert summary["parameters"] == [
        {"name": "lr", "type": "DOUBLE", "scale": "UNIT_LOG_SCALE"},
        {"name": "layers", "type": "INTEGER", "scale": None},
    ]
    assert summary["console_url"] == (
        "https://console.cloud.google.com/vertex-ai/locations/europe-west4/training/456/cpu?project=my-project"
    )
    assert "spec" not in summary
    assert json.loads(json.dumps(summary)) == summary


def test_both_backends_summarise_to_the_same_keys() -> None:
    vertex = summarize_job(view_from_vertex(tuning_job(), project_id="p", region="us-central1"))
    ml = summarize_job(view_from_ml({"jobId": "j", "state": "SUCCEEDED"}, "p"))
    assert list(vertex) == list(ml)
    assert (vertex["backend"], ml["backend"]) == ("vertex", "ai_platform")


def test_resource_names() -> None:
    assert parse_name(NAME) == ("123", "europe-west4", "hyperparameterTuningJobs", "456")
    for bad in ("projects/p/jobs/j", "projects/p/locations/l/models/1", "456"):
        with pytest.raises(ValueError, match="not a Vertex AI training job name"):
            parse_name(bad)


def test_the_endpoint_is_regional_and_a_region_vertex_does_not_serve_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    conn = {"conn_type": "google_cloud_platform", "extra": {"project": "p", "is_anonymous": True}}
    monkeypatch.setenv("AIRFLOW_CONN_AIP_ANON", json.dumps(conn))
    monkeypatch.delenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM", raising=False)
    hook = VertexJobHook("aip_anon", region="europe-west4")
    assert hook.root_url == "https://europe-west4-aiplatform.googleapis.com/"
    assert hook.parent() == "projects/p/locations/europe-west4"
    monkeypatch.setenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM", "http://127.0.0.1:9/")
    assert VertexJobHook("aip_anon", region="europe-west4").root_url == "http://127.0.0.1:9/"
    for region in ("global", "mars-central1"):
        with pytest.raises(ValidationError, match="region"):
            VertexJobHook("aip_anon", region=region)

"""Which Experiments run a job's trainer logged to (airflow_aip.jobs.experiments): the one rule, pure."""

from __future__ import annotations

from typing import Any

from airflow_aip.jobs.experiments import run_job_ids, runs_by_job, with_logged_runs

STORE = "projects/1/locations/us-central1/metadataStores/default/contexts"


def _run(context_id: str, metrics: dict[str, Any], schema: str = "system.ExperimentRun") -> dict[str, Any]:
    return {
        "name": f"{STORE}/{context_id}",
        "schemaTitle": schema,
        "parentContexts": [f"{STORE}/exp"],
        "metadata": {"_metrics": metrics, "_params": {"lr": 0.1}},
    }


def _tuning(*trial_jobs: str) -> dict[str, Any]:
    trials = [
        {"trialId": str(n), "customJob": f"projects/1/locations/us-central1/customJobs/{job}"}
        for n, job in enumerate(trial_jobs, 1)
    ]
    return {
        "is_hyperparameter_tuning_job": True,
        "name": "projects/1/locations/l/hyperparameterTuningJobs/9",
        "trials": trials,
    }


def test_a_trial_s_run_is_the_one_named_after_its_own_custom_job() -> None:
    summary = _tuning("111", "222", "333")
    contexts = [
        _run("exp-run-111", {"accuracy": 0.5}),
        _run("exp-222", {"accuracy": 0.7}),
        _run("exp-run-1111", {"accuracy": 0.0}),  # another job whose ID ends the same: not a match
        _run("exp-run-333", {"accuracy": 0.9}, schema="system.Experiment"),  # not a run
    ]

    runs = runs_by_job(contexts, run_job_ids(summary))
    shown = with_logged_runs(summary, runs)

    assert run_job_ids(summary) == ["111", "222", "333"]
    assert [t.get("experimentRun", {}).get("metrics") for t in shown["trials"]] == [
        {"accuracy": 0.5},
        {"accuracy": 0.7},
        None,
    ]
    assert shown["trials"][0]["experimentRun"]["experiment"] == "exp"
    assert shown["trials"][0]["experimentRun"]["params"] == {"lr": 0.1}
    assert "experimentRun" not in summary["trials"][0]  # the summary given is left as it was


def test_a_single_job_s_run_goes_on_the_summary_and_nothing_logged_changes_nothing() -> None:
    summary = {
        "is_hyperparameter_tuning_job": False,
        "name": "projects/1/locations/l/customJobs/42",
        "trials": [],
    }
    assert run_job_ids(summary) == ["42"]
    assert with_logged_runs(summary, {}) == summary
    shown = with_logged_runs(summary, runs_by_job([_run("exp-run-42", {"loss": 0.25})], ["42"]))
    assert shown["experiment_run"]["metrics"] == {"loss": 0.25}

"""`make demo`'s progress display, watching a real run under a real scheduler and triggerer."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import AirflowStack, TuningRun

pytestmark = pytest.mark.e2e

TASKS = ["local_capacity", "prepare_data", "build_trainer", "stage_trainer", "tune", "export_best_model"]


def test_progress_tells_tasks_job_states_and_each_trial_once_in_order(
    airflow_stack: AirflowStack, tuning_run: TuningRun
) -> None:
    lines = tuning_run.progress
    path = f"dags/{tuning_run.dag_id}/dagRuns/{tuning_run.run_id}/taskInstances/tune/xcomEntries/return_value"
    summary = airflow_stack.get(path)["value"]
    job = f"{summary['job_id']}"
    named = f" ({summary['name']})"  # the Vertex AI resource name, as `make demo` shows it

    for task in TASKS:  # each task's start, then its end
        assert lines.index(f"task {task} started") < lines.index(f"task {task} ended: success"), lines
    assert lines.index("task stage_trainer ended: success") < lines.index("task tune started")
    trial_lines = [line for line in lines if line.startswith("trial ")]
    assert len(trial_lines) == len(summary["trials"]) == 6, lines  # one line per trial
    assert "/hyperparameterTuningJobs/" in named
    assert lines.index(f"job {job}: RUNNING{named}") < lines.index(trial_lines[0])
    assert lines.index(trial_lines[-1]) < lines.index(f"job {job}: SUCCEEDED{named}")
    best = summary["best_trial"]["finalMetric"]["objectiveValue"]
    assert trial_lines[-1].endswith(f"best so far={best:.4f}")

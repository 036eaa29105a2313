"""What the runner derives from a job's plan: replicas, output dirs, TF_CONFIG's job, errors."""

from __future__ import annotations

import pytest

from airflow_aip.local.executor.plans import ml_plan
from airflow_aip.local.executor.runner import (
    AttemptOutcome,
    expand_env_value,
    logs_url,
    output_dirs,
    snake_case_keys,
)


@pytest.mark.parametrize(
    ("training_input", "expected"),
    [
        ({"scaleTier": "BASIC"}, {"master": 1}),
        ({}, {"master": 1}),
        ({"scaleTier": "STANDARD_1"}, {"master": 1}),
        (
            {"scaleTier": "CUSTOM", "workerCount": "2", "parameterServerCount": "1", "evaluatorCount": "0"},
            {"master": 1, "worker": 2, "ps": 1},
        ),
    ],
)
def test_replica_counts(training_input: dict[str, str], expected: dict[str, int]) -> None:
    ti = {"packageUris": ["gs://bkt/p.tar.gz"], "pythonModule": "t.task", **training_input}
    plan = ml_plan("p", {"jobId": "j", "trainingInput": ti})
    assert {pool.cluster_key: pool.count for pool in plan.pools} == expected
    assert plan.primary.task_name(0) == "master-replica-0"


def test_output_dirs_follow_job_dir_and_trial() -> None:
    assert output_dirs(None, None) == {}
    assert output_dirs("gs://b/run/", None)["AIP_MODEL_DIR"] == "gs://b/run/model/"
    trial = output_dirs("gs://b/run", "3")
    assert trial == {
        "AIP_MODEL_DIR": "gs://b/run/3/model/",
        "AIP_CHECKPOINT_DIR": "gs://b/run/3/checkpoints/",
        "AIP_TENSORBOARD_LOG_DIR": "gs://b/run/3/logs/",
    }


def test_tf_config_job_uses_proto_field_names() -> None:
    job = {"pythonModule": "t.task", "hyperparameters": {"maxTrials": 2, "params": [{"parameterName": "x"}]}}
    assert snake_case_keys(job) == {
        "python_module": "t.task",
        "hyperparameters": {"max_trials": 2, "params": [{"parameter_name": "x"}]},
    }


def test_error_message_names_replica_status_traceback_and_logs_as_google_does() -> None:
    link = logs_url("http://127.0.0.1:9/", "123", "456")
    stderr = "a warning on stderr\nTraceback (most recent call last):\n  File x\nValueError: bad"
    failed = AttemptOutcome(3, "workerpool0-0", stderr, link)
    quiet = AttemptOutcome(1, "worker-replica-1", "just a warning", link)
    killed = AttemptOutcome(-9, "master-replica-0", "")
    assert link == (
        "http://127.0.0.1:9/logs/viewer?project=123&resource=ml_job%2Fjob_id%2F456&advancedFilter="
        "resource.type%3D%22ml_job%22%0Aresource.labels.job_id%3D%22456%22"
    )
    assert failed.error_message() == (
        "The replica workerpool0-0 exited with a non-zero status of 3. Termination reason: Error. \n"
        "Traceback (most recent call last):\n  File x\nValueError: bad\n\n"
        f"To find out more about why your job exited please check the logs: {link}"
    )
    assert quiet.error_message() == (  # stderr without a traceback stays in the log only
        "The replica worker 1 exited with a non-zero status of 1. "
        f"To find out more about why your job exited please check the logs: {link}"
    )
    assert killed.error_message() == "The replica master 0 was terminated by signal 9."
    assert not failed.succeeded
    assert AttemptOutcome(0, "master-replica-0", "").succeeded


def test_env_values_expand_references_as_vertex_does() -> None:
    env = {"AIP_MODEL_DIR": "gs://b/out/model/", "MODE": "x"}
    assert expand_env_value("$(AIP_MODEL_DIR)export", env) == "gs://b/out/model/export"
    assert expand_env_value("$$(MODE) and $(MODE)", env) == "$(MODE) and x"
    assert expand_env_value("$(UNKNOWN)-$5", env) == "$(UNKNOWN)-$5"

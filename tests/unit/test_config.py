"""The [aip] options: one default each, the same in the provider info and in every signature."""

from __future__ import annotations

import inspect

import pytest

from airflow_aip import config, get_provider_info
from airflow_aip.operators import (
    CancelTrainingJobOperator,
    ExportArtifactsOperator,
    SubmitTrainingJobOperator,
)
from airflow_aip.sensors import TrainingJobSensor

DECLARED = get_provider_info()["config"]["aip"]["options"]


def _default(cls: type, argument: str) -> object:
    return inspect.signature(vars(cls)["__init__"]).parameters[argument].default


def test_the_provider_info_declares_every_option_with_its_one_default() -> None:
    assert {name: option["default"] for name, option in DECLARED.items()} == {
        name: option.default for name, option in config.OPTIONS.items()
    }


@pytest.mark.parametrize("cls", [TrainingJobSensor, CancelTrainingJobOperator, ExportArtifactsOperator])
def test_every_task_that_addresses_a_job_defaults_to_the_declared_region_and_backend(cls: type) -> None:
    # The connection's one signature (hooks/job_reference.py) reads them when the task is made.
    task = (
        cls(task_id="t", job_id="j", destination_uri="gs://b/m")
        if cls is ExportArtifactsOperator
        else cls(task_id="t", job_id="j")
    )
    assert task.region == DECLARED["region"]["default"] == config.region()
    assert task.backend == DECLARED["backend"]["default"] == config.backend()


def test_the_submit_operator_takes_the_same_defaults() -> None:
    # Its region argument stays None so that a config file's trainingInput.region can win; the
    # request falls back to config.region() after both (see jobs.backends.build_request).
    submit = SubmitTrainingJobOperator(task_id="t", training_input={})
    assert submit.region is None
    assert submit.backend == config.backend()
    assert _default(SubmitTrainingJobOperator, "poll_interval") == int(DECLARED["poll_interval"]["default"])
    assert _default(TrainingJobSensor, "poke_interval") == int(DECLARED["poll_interval"]["default"])
    lines = int(DECLARED["max_log_lines_per_minute"]["default"])
    assert _default(SubmitTrainingJobOperator, "max_log_lines_per_minute") == lines
    assert _default(TrainingJobSensor, "max_log_lines_per_minute") == lines


def test_an_option_set_in_airflow_s_config_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__AIP__REGION", "europe-west4")
    monkeypatch.setenv("AIRFLOW__AIP__LOG_READS_PER_MINUTE", "0")
    assert config.region() == "europe-west4"
    assert config.log_reads_per_minute() == 1  # at least one read a minute

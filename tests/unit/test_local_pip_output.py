"""pip's output: one summary line for the job's log; every line for the service's own log."""

from __future__ import annotations

import logging

import pytest

from airflow_aip.local.executor.pip_output import PipOutput

PIP = [
    ("stdout", "Processing ./packages/0/iris_trainer-0.1.0.tar.gz"),
    *[("stdout", f"Requirement already satisfied: dep{i} in /srv/site-packages") for i in range(38)],
    ("stderr", "  WARNING: the script foo is installed in '/x' which is not on PATH."),
    ("stdout", "Successfully installed iris-trainer-0.1.0 extra-2.0"),
]


def test_forty_lines_become_one(caplog: pytest.LogCaptureFixture) -> None:
    output = PipOutput("local-project/job1")
    with caplog.at_level(logging.INFO, logger="airflow_aip.local.pip"):
        for stream, line in PIP:
            output(stream, line)
    summary = output.summary()
    assert summary == (
        "installed iris-trainer-0.1.0, extra-2.0 (38 requirements already satisfied, 1 warning line); "
        "its 41 lines are in the service's log"
    )
    assert "\n" not in summary
    assert len(caplog.records) == len(PIP)
    assert caplog.records[1].getMessage().startswith("job local-project/job1 pip: Requirement already")
    assert caplog.records[-2].levelno == logging.WARNING


def test_nothing_installed_is_said_plainly() -> None:
    output = PipOutput("p/j")
    output("stdout", "Requirement already satisfied: x")
    assert output.summary().startswith("installed nothing new (1 requirement already satisfied)")


def test_uv_lines_are_read_too() -> None:
    output = PipOutput("p/j")
    for line in (
        "Using Python 3.10.13 environment at: abc",
        "Resolved 2 packages in 3ms",
        " Downloaded numpy",
        "Installed 2 packages in 4ms",
        " + numpy==2.2.6",
        " + iris-trainer==0.1.0 (from file:///x/iris_trainer-0.1.0.tar.gz)",
        "warning: something to read",
    ):
        output("stderr", line)
    assert output.summary().startswith(
        "installed numpy==2.2.6, iris-trainer==0.1.0 (from file:///x/iris_trainer-0.1.0.tar.gz) "
        "(0 requirements already satisfied, 1 warning line)"
    )

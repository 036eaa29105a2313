"""A replica's stderr in the task log at the level its content shows, not Google's blanket ERROR."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_aip.jobs.logs import After, ContentLevels, Level, LogStream, stderr_level

WARNING_LINE = (
    "/usr/lib/python3.10/site-packages/google/api_core/_python_version_support.py:266: FutureWarning: "
    "You are using a Python version (3.10.12) past its end of life."
)


@pytest.mark.parametrize(
    ("message", "after", "level", "begins"),
    [
        (WARNING_LINE, "", "warning", "warning"),
        ("  warnings.warn(message, FutureWarning)", "warning", "warning", ""),
        ("sklearn.exceptions.ConvergenceWarning: lbfgs failed to converge", "", "warning", "warning"),
        ("UserWarning: no GPU", "", "warning", "warning"),
        ("  an indented line after nothing", "", "info", ""),
        ("Traceback (most recent call last):", "", "error", "traceback"),
        ('  File "/app/trainer/task.py", line 3, in <module>', "traceback", "error", "traceback"),
        ("    main()", "traceback", "error", "traceback"),
        ("ValueError: bad --alpha", "traceback", "error", ""),
        ("During handling of the above exception, another exception occurred:", "", "error", "traceback"),
        ("ValueError: raised without a traceback", "", "error", ""),
        ("google.api_core.exceptions.NotFound: 404", "traceback", "error", ""),
        ("google.api_core.exceptions.InvalidArgumentError: 400", "", "error", ""),
        ("RuntimeError", "", "error", ""),
        ("WARNING:root:few rows", "", "warning", ""),
        ("ERROR:trainer:could not read the split", "", "error", ""),
        ("INFO:trainer:epoch 3", "", "info", ""),
        ("100%|##########| 12/12 [00:01<00:00]", "", "info", ""),
        ("Errors are expected in this epoch", "", "info", ""),
        ("", "", "info", ""),
    ],
)
def test_stderr_line_levels(message: str, after: After, level: Level, begins: After) -> None:
    assert stderr_level(message, after) == (level, begins)


def entry(
    message: str, severity: str = "ERROR", task: str = "workerpool0-0", trial: str = ""
) -> dict[str, Any]:
    labels = {"ml.googleapis.com/trial_id": trial} if trial else {}
    resource = {"type": "ml_job", "labels": {"job_id": "1", "task_name": task}}
    return {"severity": severity, "textPayload": message + "\n", "resource": resource, "labels": labels}


def test_only_replica_stderr_text_is_judged() -> None:
    """The service's own errors, a replica's stdout and structured entries keep their severity."""
    levels = ContentLevels()
    assert levels.level(entry("Job failed: replica exited 1", task="service")) == "error"
    assert levels.level(entry("Traceback (most recent call last):", severity="INFO")) == "info"
    structured = {**entry(""), "textPayload": None, "jsonPayload": {"message": "disk full"}}
    assert levels.level(structured) == "error"
    assert levels.level(entry("epoch 1")) == "info"


def test_a_warnings_source_line_follows_its_own_trial() -> None:
    """Trials interleave: what a line began is kept per replica and trial."""
    levels = ContentLevels()
    assert levels.level(entry(WARNING_LINE, trial="1")) == "warning"
    assert levels.level(entry("Traceback (most recent call last):", trial="2")) == "error"
    assert levels.level(entry("  warnings.warn(message, FutureWarning)", trial="1")) == "warning"
    assert levels.level(entry('  File "task.py", line 1', trial="2")) == "error"


def test_a_successful_trials_stderr_relays_without_an_error_line() -> None:
    """The issue's case: each trial's FutureWarning and its source line, 2 of 12 trials shown."""
    stamped = [
        {**e, "insertId": f"i{n}", "timestamp": f"2024-05-01T12:00:{n:02d}Z"}
        for n, e in enumerate(
            entry(text, trial=str(trial))
            for trial in (1, 2)
            for text in (WARNING_LINE, "  warnings.warn(message, FutureWarning)")
        )
    ]
    lines = LogStream("1").accept(stamped, now=0).lines
    assert [level for level, _ in lines] == ["warning"] * 4
    assert lines[1] == ("warning", "[workerpool0-0 trial 1]   warnings.warn(message, FutureWarning)")

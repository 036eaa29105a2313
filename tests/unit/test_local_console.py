"""The console's pages: everything a job or its trainer wrote is escaped (it runs submitted code);
a job is named by its display name and says where it ran; a model version shows its metric."""

from __future__ import annotations

from airflow_aip.local.console import ConsoleJob, render_job, render_missing

EVIL = '<script>alert("x")</script>'


def test_every_value_is_escaped() -> None:
    record = {
        "jobId": EVIL,
        "state": "FAILED",
        "createTime": EVIL,
        "errorMessage": EVIL,
        "trainingInput": {"hyperparameters": {"hyperparameterMetricTag": EVIL, "goal": "MAXIMIZE"}},
        "trainingOutput": {
            "trials": [
                {
                    "trialId": "1",
                    "state": EVIL,
                    "hyperparameters": {EVIL: EVIL},
                    "finalMetric": {"objectiveValue": EVIL, "trainingStep": "1"},
                }
            ]
        },
    }
    logs = [
        {"time": EVIL, "severity": f'" onmouseover="{EVIL}', "task": EVIL, "trial": EVIL, "message": EVIL}
    ]
    html = render_job(
        ConsoleJob(f"projects/p/jobs/{EVIL}", "AI Platform Training job (ml v1)", EVIL, record, logs)
    )
    assert EVIL not in html
    assert html.count("<script>") == 1  # the page's own (copy buttons), none of the job's
    assert '" onmouseover="' not in html
    assert html.count("&lt;script&gt;") >= 10
    assert EVIL not in render_missing(EVIL)


def test_an_active_job_page_refreshes_itself() -> None:
    record = {"jobId": "j", "state": "RUNNING", "createTime": "t"}
    assert 'http-equiv="refresh"' in render_job(
        ConsoleJob("projects/p/jobs/j", "ml v1", "RUNNING", record, [])
    )


def test_the_log_keeps_googles_severities_and_says_so() -> None:
    """A FutureWarning on stderr is ERROR here, as in Cloud Logging; the page says the task log differs."""
    record = {"jobId": "j", "state": "SUCCEEDED", "createTime": "t"}
    logs = [
        {"time": "t", "severity": "ERROR", "task": "workerpool0-0", "message": "x.py:1: FutureWarning: old"}
    ]
    html = render_job(ConsoleJob("projects/p/jobs/j", "ml v1", "SUCCEEDED", record, logs))
    assert '<span class="ERROR">t ERROR [workerpool0-0] x.py:1: FutureWarning: old</span>' in html
    assert "Severities as Google records them" in html

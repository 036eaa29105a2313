"""submit_job over the hook, with the fake ml v1 API at the HTTP boundary: it acts as the rule says.

The branches no real server produces on demand: a create applied but answered 503 (the hook
re-sends, meets 409 with ``first_sent`` set), and existing jobs with chosen createTimes and
labels. The same scenarios against the real local service: tests/integration/test_reliability_faults.py.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any

import pytest

from airflow_aip.exceptions import JobAlreadyExistsError
from airflow_aip.hooks.http_shared import clear_shared_auth
from airflow_aip.hooks.training import TrainingJobHook
from airflow_aip.jobs import airflow_labels, with_attempt
from airflow_aip.jobs.mlv1.backend import MLV1
from airflow_aip.jobs.request import JobRequest
from airflow_aip.operators.submission import submit_job
from tests.unit.ml_fake import FakeMlApi, sync_client

TRAINING_INPUT = {
    "packageUris": ["gs://bucket/trainer.tar.gz"],
    "pythonModule": "trainer.task",
    "region": "us-central1",
}
BODY = {"trainingInput": TRAINING_INPUT, "labels": airflow_labels("dag", "train", "manual__1")}
LOG = logging.getLogger(__name__)


@pytest.fixture(autouse=True)
def _fresh_shared_auth() -> Any:
    clear_shared_auth()
    yield
    clear_shared_auth()


def submit(api: FakeMlApi, if_exists: str, body: dict[str, Any] = BODY) -> dict[str, Any]:
    hook = TrainingJobHook("aip_missing_conn", project_id="proj", api_endpoint="http://127.0.0.1:9/")
    hook.retry_max_wait = 0.001
    client = sync_client(api)
    hook._sync_client = lambda: client  # type: ignore[method-assign]
    request = JobRequest(MLV1, "jobs", dict(body))
    return submit_job(hook, request, lambda n: with_attempt("j1", n), if_exists, LOG)


def lose_the_answer_of_the_first_create(api: FakeMlApi, create_time: str, **job: Any) -> None:
    """The first create is applied (the job exists, created at ``create_time``) but answered 503."""

    def applied_then_503(method: str, path: str) -> None:
        if method == "POST" and not api.jobs:
            api.jobs[("proj", "j1")] = {
                **BODY,
                "jobId": "j1",
                "state": "QUEUED",
                "createTime": create_time,
                **job,
            }
            api.errors.append((503, "backend error"))

    api.on_request = applied_then_503


@pytest.mark.parametrize("if_exists", ["adopt", "new", "fail"])
def test_a_create_whose_answer_was_lost_is_this_calls_job(if_exists: str) -> None:
    api = FakeMlApi()
    now = datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")
    lose_the_answer_of_the_first_create(api, now)
    assert submit(api, if_exists)["job_id"] == "j1"
    assert [(m, p.rsplit("/", 1)[-1]) for m, p, _ in api.requests] == [
        ("POST", "jobs"),
        ("POST", "jobs"),
        ("GET", "j1"),
    ]
    assert list(api.jobs) == [("proj", "j1")]  # one job


def test_an_older_identical_job_behind_a_resend_is_an_earlier_try() -> None:
    api = FakeMlApi()
    lose_the_answer_of_the_first_create(api, "2024-01-01T00:00:00.123456789Z", state="FAILED")
    assert submit(api, "adopt")["job_id"] == "j1_r2"  # a failed earlier try: never re-adopted
    api = FakeMlApi()
    lose_the_answer_of_the_first_create(api, "2024-01-01T00:00:00Z")
    with pytest.raises(JobAlreadyExistsError) as err:
        submit(api, "fail")
    assert err.value.first_sent is not None


def test_another_runs_job_behind_a_resend_is_not_this_call() -> None:
    api = FakeMlApi()
    now = datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")
    lose_the_answer_of_the_first_create(api, now, labels=airflow_labels("dag", "train", "manual__2"))
    assert submit(api, "adopt")["job_id"] == "j1_r2"
    assert api.jobs[("proj", "j1_r2")]["labels"] == BODY["labels"]

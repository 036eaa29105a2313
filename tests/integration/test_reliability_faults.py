"""Exactly one job per submit, whatever happens to the create call, on a real ``aip-local serve``.

The service runs with ``--fault-admin``: each test aims faults at the create (before the
service sees it, or after it applied it so the client cannot know), kills the submitting task
process between the create and its XCom push, or lets the job fail first. The count is the
service's own (``GET /_stats``: creates applied) and its job list. Two runs in the same
second, and another run's job under our ID, get jobs of their own.

Every case runs on both backends, because they keep the promise differently: ml v1 by the
client's job ID (a re-sent create meets 409), Vertex AI, which takes no client ID, by looking
the ID up (label and displayName) before a create and after an answer is lost.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.local_service import LocalService, StagedTrainer, ml_client, own_service
from tests.fixtures.operators import FakeTI, task_context
from tests.fixtures.reliability import RUN_ID, WHEN
from tests.fixtures.soak import soak_beyond
from tests.fixtures.vertex import LOCATION, aiplatform
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.integration
CREATE = {"vertex": "customJobs.create", "ai_platform": "jobs.create"}
PROJECT = "reliability-project"


@pytest.fixture(params=["vertex", "ai_platform"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test on each backend; Vertex AI's lookups after a lost create, shortened (not skipped)."""
    from airflow_aip.hooks.vertex import VertexJobHook

    monkeypatch.setattr(VertexJobHook, "settle_delays", (0.1, 0.2))
    return str(request.param)


faulty_service = own_service("faulty_service", ["--fault-admin"])  # no fault until a test asks


def jobs_named(service: LocalService, prefix: str, backend: str = "ai_platform") -> list[dict[str, Any]]:
    """The jobs whose ID (ml v1's jobId, Vertex AI's displayName) starts with ``prefix``, as
    ``{"jobId", "state", "labels"}`` in neutral states, read with Google's discovery clients."""
    if backend == "vertex":
        from airflow_aip.jobs.vertex.view import job_state

        jobs = aiplatform(service.url).projects().locations().customJobs()
        parent = f"projects/{PROJECT}/locations/us-central1"
        found = jobs.list(parent=parent, filter=f'display_name:"{prefix}*"').execute().get("customJobs", [])
        return [
            {"jobId": j["displayName"], "state": job_state(j["state"]).value, "labels": j.get("labels", {})}
            for j in sorted(found, key=lambda j: str(j["createTime"]))
        ]
    listed = (
        ml_client(service.url)
        .projects()
        .jobs()
        .list(parent=f"projects/{PROJECT}", filter=f"jobId:{prefix}*")
        .execute()
    )
    return list(listed.get("jobs", []))


def base_id(dag_id: str, run_id: str = RUN_ID) -> str:
    """The job ID every try of the submit task of ``dag_id``'s run ``run_id`` asks for first."""
    from airflow_aip.jobs import job_id_for_task

    job_id = job_id_for_task(None, WHEN, dag_id=dag_id, task_id="submit", run_id=run_id)
    assert job_id.startswith(f"{dag_id}_submit_20260309_070501_")
    return job_id


def submit(
    service: LocalService,
    trainer: StagedTrainer,
    dag_id: str,
    run_id: str = RUN_ID,
    **kwargs: Any,
) -> dict[str, Any]:
    from airflow_aip.operators.training import SubmitTrainingJobOperator

    operator = SubmitTrainingJobOperator(
        task_id="submit",
        project_id=PROJECT,
        training_input=trainer.training_input("succeed", job_dir=f"gs://{trainer.bucket}/out/{dag_id}"),
        api_endpoint=service.url,
        gcp_conn_id="aip_no_such_conn",
        wait_for_completion=False,
        **kwargs,
    )
    context = task_context(FakeTI(dag_id, "submit", run_id), WHEN)
    summary: dict[str, Any] = operator.execute(context)  # type: ignore[arg-type]
    return summary


@pytest.mark.parametrize("kind", soak_beyond([429, 500, 503, "drop", "reset"], keep=[503, "drop"]))
@pytest.mark.parametrize(
    ("when", "if_exists"),
    [("before", "adopt"), ("after", "adopt"), ("after", "new"), ("after", "fail")],
)
def test_a_faulty_create_makes_exactly_one_job(
    faulty_service: LocalService,
    staged_trainer: StagedTrainer,
    kind: int | str,
    when: str,
    if_exists: str,
    backend: str,
) -> None:
    dag_id = f"faults_{uuid.uuid4().hex[:8]}"
    created = faulty_service.admin("_stats")["created"]
    faulty_service.admin("_faults", {"method": CREATE[backend], "when": when, "kind": kind}, "POST")

    summary = submit(faulty_service, staged_trainer, dag_id, if_exists=if_exists, backend=backend)

    stats = faulty_service.admin("_stats")
    assert stats["rules"] == []  # the fault was injected
    assert summary["job_id"] == base_id(dag_id)  # no _r2: our own job, recognised
    assert [job["jobId"] for job in jobs_named(faulty_service, dag_id, backend)] == [summary["job_id"]]
    assert stats["created"] - created == 1


def test_every_attempt_of_a_create_failing_is_an_error_and_no_job(
    faulty_service: LocalService, staged_trainer: StagedTrainer, backend: str
) -> None:
    from airflow_aip.exceptions import ApiError

    dag_id = f"faults_{uuid.uuid4().hex[:8]}"
    faulty_service.admin("_faults", {"method": CREATE[backend], "kind": 503, "count": 6}, "POST")
    with pytest.raises(ApiError) as err:
        submit(faulty_service, staged_trainer, dag_id, backend=backend)
    assert err.value.status == 503
    assert jobs_named(faulty_service, dag_id, backend) == []
    faulty_service.admin("_faults", method="DELETE")  # Vertex AI sent 3 of the 6: no rule left over


CRASHING_TASK = """
import json, sys
from datetime import datetime, timezone
from types import SimpleNamespace
from tests.fixtures.operators import FakeTI, task_context
from tests.fixtures.reliability import RUN_ID, WHEN
from airflow_aip.operators.training import SubmitTrainingJobOperator

endpoint, project, dag_id, training_input, backend, xcom_file = sys.argv[1:]

class RecordingTI(FakeTI):
    def xcom_push(self, key, value):
        with open(xcom_file, "a") as out:
            out.write(json.dumps({key: value}) + "\\n")

op = SubmitTrainingJobOperator(
    task_id="submit", project_id=project, training_input=json.loads(training_input),
    api_endpoint=endpoint, gcp_conn_id="aip_no_such_conn", wait_for_completion=False, backend=backend,
)
op.execute(task_context(RecordingTI(dag_id, "submit", RUN_ID), WHEN))
"""


def run_task(
    service: LocalService, trainer: StagedTrainer, dag_id: str, xcom: Path, backend: str
) -> subprocess.Popen[bytes]:
    """The submit task in a process of its own, as a worker runs it."""
    training_input = trainer.training_input("succeed", job_dir=f"gs://{trainer.bucket}/out/{dag_id}")
    argv = [
        sys.executable,
        "-c",
        CRASHING_TASK,
        service.url,
        PROJECT,
        dag_id,
        json.dumps(training_input),
        backend,
    ]
    repo = Path(__file__).resolve().parents[2]
    return subprocess.Popen([*argv, str(xcom)], cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def test_task_killed_between_create_and_xcom_push_then_retried_adopts_its_job(
    faulty_service: LocalService, staged_trainer: StagedTrainer, tmp_path: Path, backend: str
) -> None:
    dag_id = f"crash_{uuid.uuid4().hex[:8]}"
    xcom = tmp_path / "xcom.jsonl"
    created = faulty_service.admin("_stats")["created"]
    # The service applies the create, then holds the answer: the task is killed while it waits.
    hold = {"method": CREATE[backend], "when": "after", "kind": "delay", "seconds": 120}
    faulty_service.admin("_faults", hold, "POST")
    task = run_task(faulty_service, staged_trainer, dag_id, xcom, backend)

    def created_while_the_task_waits() -> bool:
        if jobs_named(faulty_service, dag_id, backend):
            return True
        assert task.poll() is None, task.communicate()[0].decode()[-2000:]
        return False

    try:
        wait_until(created_while_the_task_waits, 120, "create reaching the service", every=0.1)
        task.send_signal(signal.SIGKILL)
    finally:
        task.kill()
        task.wait()
    assert task.returncode == -signal.SIGKILL
    assert not xcom.exists()  # the crash came before any XCom push: nobody knows the job

    retry = run_task(faulty_service, staged_trainer, dag_id, xcom, backend)
    output = retry.communicate(timeout=300)[0].decode()
    assert retry.returncode == 0, output[-3000:]

    jobs = jobs_named(faulty_service, dag_id, backend)
    assert [job["jobId"] for job in jobs] == [base_id(dag_id)]
    pushed = [json.loads(line) for line in xcom.read_text().splitlines()]
    assert {"training_job_id": jobs[0]["jobId"]} in pushed
    assert faulty_service.admin("_stats")["created"] - created == 1


def test_a_failed_job_then_a_retry_gives_r2(
    faulty_service: LocalService, staged_trainer: StagedTrainer, backend: str
) -> None:
    from airflow_aip.exceptions import JobFailedError
    from airflow_aip.operators.training import SubmitTrainingJobOperator

    dag_id = f"failed_{uuid.uuid4().hex[:8]}"
    context = task_context(FakeTI(dag_id, "submit", RUN_ID), WHEN)

    def attempt() -> dict[str, Any]:
        operator = SubmitTrainingJobOperator(
            task_id="submit",
            project_id=PROJECT,
            training_input=staged_trainer.training_input("fail"),
            api_endpoint=faulty_service.url,
            gcp_conn_id="aip_no_such_conn",
            poll_interval=0.5,
            backend=backend,
        )
        result: dict[str, Any] = operator.execute(context)  # type: ignore[arg-type]
        return result

    with pytest.raises(JobFailedError):
        attempt()
    with pytest.raises(JobFailedError):
        attempt()

    base = base_id(dag_id)
    jobs = {job["jobId"]: job["state"] for job in jobs_named(faulty_service, dag_id, backend)}
    assert jobs == {base: "FAILED", f"{base}_r2": "FAILED"}


def test_two_runs_in_the_same_second_each_get_their_own_job(
    faulty_service: LocalService, staged_trainer: StagedTrainer, backend: str
) -> None:
    dag_id = f"twice_{uuid.uuid4().hex[:8]}"
    runs = ["manual__2026-03-09T07:05:01.120000+00:00", "manual__2026-03-09T07:05:01.870000+00:00"]
    created = faulty_service.admin("_stats")["created"]
    first, second = (
        submit(faulty_service, staged_trainer, dag_id, run_id=run, backend=backend) for run in runs
    )
    # a retry of the first run finds its own job again
    again = submit(faulty_service, staged_trainer, dag_id, run_id=runs[0], backend=backend)

    assert first["job_id"] != second["job_id"]
    assert again["job_id"] == first["job_id"] == base_id(dag_id, runs[0])
    assert second["job_id"] == base_id(dag_id, runs[1])
    jobs = {
        job["jobId"]: job["labels"]["airflow-run-id"] for job in jobs_named(faulty_service, dag_id, backend)
    }
    assert jobs == {
        first["job_id"]: "manual__2026-03-09t07-05-01-120000-00-00",
        second["job_id"]: "manual__2026-03-09t07-05-01-870000-00-00",
    }
    assert faulty_service.admin("_stats")["created"] - created == 2


def test_another_runs_job_under_our_id_is_never_adopted(
    faulty_service: LocalService, staged_trainer: StagedTrainer, backend: str
) -> None:
    """A pinned ``job_id`` reused by the next run: that run gets a job of its own, ``_r2``."""
    dag_id = f"pinned_{uuid.uuid4().hex[:8]}"
    pinned = f"{dag_id}_nightly"
    kw: dict[str, Any] = {"job_id": pinned, "backend": backend}
    yesterday = submit(faulty_service, staged_trainer, dag_id, run_id="scheduled__1", **kw)
    today = submit(faulty_service, staged_trainer, dag_id, run_id="scheduled__2", **kw)
    retry = submit(faulty_service, staged_trainer, dag_id, run_id="scheduled__2", **kw)

    assert yesterday["job_id"] == pinned
    assert today["job_id"] == retry["job_id"] == f"{pinned}_r2"  # the retry adopts its own, _r2
    jobs = {
        job["jobId"]: job["labels"]["airflow-run-id"] for job in jobs_named(faulty_service, dag_id, backend)
    }
    assert jobs == {pinned: "scheduled__1", f"{pinned}_r2": "scheduled__2"}


def test_faults_reach_the_vertex_routes(faulty_service: LocalService, staged_trainer: StagedTrainer) -> None:
    """--fault-admin aims at aiplatform v1 methods too; the discovery client's retries ride them out."""
    from googleapiclient.errors import HttpError

    from tests.fixtures.vertex import worker_pool

    jobs = aiplatform(faulty_service.url).projects().locations().customJobs()
    parent = f"projects/{PROJECT}/locations/{LOCATION}"
    label = uuid.uuid4().hex[:8]
    body = {
        "displayName": "faulty",
        "labels": {"run": label},
        "jobSpec": {"workerPoolSpecs": [worker_pool(staged_trainer, "fail", [])]},
    }
    before = faulty_service.admin("_stats")["faults"].get("customJobs.create", {}).get("after:503", 0)
    faulty_service.admin("_faults", {"method": "customJobs.create", "when": "after", "kind": 503}, "POST")
    with pytest.raises(HttpError) as failed:
        jobs.create(parent=parent, body=body).execute()
    assert failed.value.resp.status == 503
    # Vertex has no client-chosen ID nor requestId: the job exists, and only a label finds it.
    listed = jobs.list(parent=parent, filter=f'labels.run="{label}"').execute()["customJobs"]
    assert len(listed) == 1
    rules = [
        {"method": "customJobs.get", "kind": 429, "count": 2},
        {"method": "customJobs.list", "kind": 500},
    ]
    faulty_service.admin("_faults", {"rules": rules}, "POST")
    assert jobs.get(name=listed[0]["name"]).execute(num_retries=3)["name"] == listed[0]["name"]
    assert jobs.list(parent=parent).execute(num_retries=3)["customJobs"]
    stats = faulty_service.admin("_stats")
    assert stats["rules"] == []
    assert stats["faults"]["customJobs.get"] == {"before:429": 2}
    assert stats["faults"]["customJobs.create"]["after:503"] == before + 1

"""A minute of API outage while tasks wait never harms their jobs, in every waiting mode.

Five ``dag.test()`` runs wait at once on ``aip-local serve --fault-admin``, each on its own job:
the submit operator in the worker and deferred (the trigger runs in-line, as ``dag.test()`` runs
triggers), and the sensor in poke, reschedule and deferrable mode. Once every waiter has seen its
job RUNNING, every ``jobs.get`` and ``jobs.list`` answers 503 for 60 s (timed fault rules: a
worker reads its job with a get, the triggerer's shared poller lists the jobs it watches). Each
task must ride it out and succeed, with no retry (``retries=0``), its job never cancelled, one
job per run.

The runs are processes of their own, started together, so the five waits share one outage
and the test takes about one outage plus a job, not five. Each job waits at a gate (a file) until
the outage starts, then runs for ``JOB_SECONDS`` and ends while the API is still out: however
long the five runs took to start, every job is still running when the last waiter is ready (a
fixed 75 s job ended before the slowest of them was, beside the whole suite). Each has its own copy of the
migrated metadata DB: five writers on one SQLite file would meet "database is locked".

``AIP_RELIABILITY_REPORT`` (a JSON file) receives, per mode, the outage as the task logged it
(its seconds and failed reads) and the seconds from the outage's end to the task's end:
figures for RELIABILITY.md, never assertions.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.local_service import LocalService, StagedTrainer, ml_client, own_service
from tests.fixtures.operators import write_report
from tests.fixtures.reliability import collect_lines, start_dag_process
from tests.fixtures.waiting import wait_until

# A 60 s outage beside five Airflow processes. make test: the wait step's outage rules
# (tests/unit/test_jobs_waiting.py) and the e2e waits in every mode (tests/e2e/test_standalone.py).
pytestmark = [pytest.mark.integration, pytest.mark.soak]
PROJECT = "outage-project"
OUTAGE_SECONDS = 60
POLL_INTERVAL = 2
JOB_SECONDS = 15  # from the gate's opening, with the outage: ended before the outage is over
READY_BOUND = 420  # seconds for five Airflow processes to start and see their jobs: a bound, never a measure
MODES = ("worker", "deferred", "sensor_poke", "sensor_reschedule", "sensor_deferrable")
DEFERRED = {"deferred", "sensor_deferrable"}

DAG = """\
from datetime import datetime
from airflow.sdk import DAG
from airflow_aip.operators import SubmitTrainingJobOperator
from airflow_aip.sensors import TrainingJobSensor

MODE = {mode!r}
with DAG({name!r}, schedule=None, start_date=datetime(2026, 1, 1)) as dag:
    submit = SubmitTrainingJobOperator(
        task_id="submit", project_id={project!r}, job_id_prefix={name!r}, backend="ai_platform",
        training_input={training_input!r}, poll_interval={poll}, wait_timeout=900, retries=0,
        deferrable=MODE == "deferred", wait_for_completion=MODE in ("worker", "deferred"),
    )
    if MODE.startswith("sensor_"):
        submit >> TrainingJobSensor(
            task_id="wait", project_id={project!r}, backend="ai_platform",
            job_id="{{{{ ti.xcom_pull(task_ids='submit')['job_id'] }}}}",
            poke_interval={poll}, timeout=900, retries=0,
            mode="reschedule" if MODE == "sensor_reschedule" else "poke",
            deferrable=MODE == "sensor_deferrable",
        )
"""
OUTAGE_ENDED = re.compile(r"the API outage lasted (\d+)s \((\d+) failed reads\)")


outage_service = own_service("outage_service", ["--fault-admin"], jobs=len(MODES))  # the five jobs at once


def jobs_of(service: LocalService, prefix: str) -> list[dict[str, Any]]:
    """Through jobs.list, once the outage is over."""
    listed = ml_client(service.url).projects().jobs().list(parent=f"projects/{PROJECT}").execute()
    return [job for job in listed.get("jobs", []) if job["jobId"].startswith(prefix)]


class Waiter:
    """One mode's ``dag.test()`` process and everything it printed."""

    def __init__(
        self, mode: str, tmp_path: Path, trainer: StagedTrainer, env: dict[str, str], gate: Path
    ) -> None:
        self.mode = mode
        self.name = f"aip_outage_{mode}_{uuid.uuid4().hex[:6]}"
        home = tmp_path / mode
        bundle = home / "bundle"
        bundle.mkdir(parents=True)
        job_args = ["--gate", str(gate), "--lines", "3", "--seconds", str(JOB_SECONDS)]
        training_input = trainer.training_input("gated", job_args)
        source = DAG.format(
            mode=mode, name=self.name, project=PROJECT, training_input=training_input, poll=POLL_INTERVAL
        )
        (bundle / f"{self.name}.py").write_text(source)
        shutil.copy(Path(env["AIRFLOW_HOME"]) / "airflow.db", home / "airflow.db")
        own_db = {"AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}"}
        self.process = start_dag_process(bundle, self.name, {**env, **own_db})
        self.lines: list[str] = []
        self.reader = threading.Thread(target=collect_lines, args=(self.process, self.lines), daemon=True)
        self.reader.start()
        self.ended_at: float | None = None

    @property
    def output(self) -> str:
        return "".join(list(self.lines))

    def waiting(self, service: LocalService) -> bool:
        """Its job is RUNNING and the waiter itself saw it so (for deferred modes: the trigger)."""
        jobs = jobs_of(service, self.name)
        if not jobs or jobs[0]["state"] != "RUNNING":
            return False
        output = self.output
        if self.mode in DEFERRED:
            _, deferred, output = output.rpartition("running trigger in line")
            if not deferred:
                return False
        return f"{jobs[0]['jobId']} is RUNNING" in output


def wait_for_waiters(condition: Callable[[], bool], what: str, waiters: list[Waiter], timeout: float) -> None:
    """Until ``condition()``; a waiter's process that ended unnoticed (``ended_at`` unset) before
    it fails the test at once, with what that process printed."""

    def held() -> bool:
        if condition():
            return True
        for waiter in waiters:
            if waiter.process.poll() is not None and waiter.ended_at is None:
                pytest.fail(f"{waiter.mode} ended before {what}:\n{waiter.output[-4000:]}")
        return False

    wait_until(held, timeout, what, every=0.5)


@pytest.mark.timeout(1200)  # five Airflow starts beside the suite, the outage, the jobs' ends: bounds
def test_an_api_outage_while_waiting_never_harms_the_job_in_any_mode(
    outage_service: LocalService, staged_trainer: StagedTrainer, airflow_db: Path, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(airflow_db),
        "STORAGE_EMULATOR_HOST": outage_service.gcs_url,
        "CLOUDSDK_API_ENDPOINT_OVERRIDES_ML": outage_service.url,
    }
    started = time.monotonic()
    gate = tmp_path / "gate"
    waiters = [Waiter(mode, tmp_path, staged_trainer, env, gate) for mode in MODES]
    try:
        wait_for_waiters(
            lambda: all(w.waiting(outage_service) for w in waiters),
            "waiter seeing its job RUNNING",
            waiters,
            READY_BOUND,
        )
        for method in ("jobs.get", "jobs.list"):
            rule = {"method": method, "kind": 503, "for_seconds": OUTAGE_SECONDS}
            outage_service.admin("_faults", rule, "POST")
        outage_started = time.monotonic()
        gate.touch()  # the jobs go on, and end while the API is out
        ready_seconds = round(outage_started - started, 1)

        def all_ended() -> bool:
            for waiter in waiters:
                if waiter.ended_at is None and waiter.process.poll() is not None:
                    waiter.ended_at = time.monotonic()
            return all(w.ended_at is not None for w in waiters)

        wait_for_waiters(all_ended, "end of every task", waiters, OUTAGE_SECONDS + JOB_SECONDS + 180)
    finally:
        for waiter in waiters:
            if waiter.process.poll() is None:
                waiter.process.kill()
            waiter.process.wait()
            waiter.reader.join(timeout=30)

    stats = outage_service.admin("_stats")
    assert stats["faults"]["jobs.get"]["before:503"] > 0
    assert stats["requests"].get("jobs.cancel", 0) == 0  # nothing ever asked to cancel
    figures: dict[str, Any] = {}
    for waiter in waiters:
        output = waiter.output
        jobs = jobs_of(outage_service, waiter.name)
        assert [job["state"] for job in jobs] == ["SUCCEEDED"], (
            waiter.mode,
            jobs,
        )  # one job, never cancelled
        assert "RUN STATE: success" in output, (waiter.mode, output[-4000:])
        job_id = jobs[0]["jobId"]
        read = "jobs.list" if waiter.mode in DEFERRED else "jobs.get"
        assert f"Cannot read training job {job_id} (ApiError: {read}: HTTP 503" in output, waiter.mode
        if waiter.mode in DEFERRED:
            # the trigger rode the outage out: its lines come after the task deferred
            assert "Cannot read training job" in output.rpartition("running trigger in line")[2]
        ended = OUTAGE_ENDED.findall(output)
        if waiter.mode == "sensor_reschedule":
            # each poke is one read: an outage is one line per poke that met it, and no end line
            assert not ended
            failed_reads = output.count(f"Cannot read training job {job_id}")
            assert failed_reads > 1
            figures[waiter.mode] = {"pokes_that_met_the_outage": failed_reads}
        else:
            assert len(ended) == 1, (waiter.mode, ended)  # logged once when it ends
            assert output.count(f"Cannot read training job {job_id}") == 1  # ... and once when it starts
            figures[waiter.mode] = {"outage_seconds": int(ended[0][0]), "failed_reads": int(ended[0][1])}
        assert waiter.ended_at is not None
        figures[waiter.mode]["task_end_after_outage_end_s"] = round(
            waiter.ended_at - outage_started - OUTAGE_SECONDS, 1
        )
    report = {"outage_seconds": OUTAGE_SECONDS, "poll_interval": POLL_INTERVAL, "modes": figures}
    report["start_to_all_waiting_s"] = ready_seconds
    report["jobs_get_503s"] = stats["faults"]["jobs.get"]["before:503"]
    write_report(report)

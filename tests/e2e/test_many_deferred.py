"""Many deferred tasks under a real triggerer cost one list call per poll round, not one get each.

The acceptance test of the shared poller: the ``TrainingJobTrigger``s of one triggerer process
that watch jobs of the same project, region, endpoint and identity share one poller, which
reads all their jobs with one filtered list call per round (per 100 jobs), gets a job only when
the list did not answer for it, and reads their log lines with one shared ``entries.list``.

One run of ``aip_e2e_many`` (tests/stack_dags/aip_e2e_many.py): 10 mapped tasks in ``make test``
(the rule is per round: a list call answers for up to 100 jobs), 50 in ``make test-soak``
(``aip_e2e_many_soak``), each deferring on its own Vertex AI job; some of the jobs fail on
purpose. The jobs wait at a gate (a file) until the test opens it, so all are watched at once
however long submitting them took. The local service counts every API request about the run's
project by method (``GET /_stats?project=``: other tests share the stack meanwhile), read
before the run, at both ends of a steady window, and after the run:

- the steady window, from when every task is deferred and its trigger has read its job, for
  three poll intervals, before the gate opens: nothing is submitted, nothing ends, nobody
  registers; only the poller calls. It may make at most one ``customJobs.list`` and one
  ``entries.list`` per round (``Calls.rounds``: wall seconds bound how many rounds fit, they
  are never a measure of speed) and no get at all; triggers polling on their own make one get
  and one ``entries.list`` a task and a round;
- the whole run: one create per task, and at most one get per job (one a list missed);
- every task ends as its job did, and its log (the task try's part and the triggerer's
  ``.trigger.*.log`` part, read through Airflow's REST API) holds each of the job's numbered
  lines exactly once.

``AIP_MANY_DEFERRED_REPORT`` (a JSON file) receives the counts of both windows and their
seconds: figures for the benchmarks' notes, never assertions.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from aip_e2e_many import LAST_BURST, LINES, POLL_INTERVAL, SIZES, failing

from airflow_aip.jobs.labels import MAP_INDEX_LABEL
from airflow_aip.jobs.vertex.view import job_state
from tests.e2e.conftest import BROWSE_READS, AirflowStack
from tests.fixtures.airflow_stack import TERMINAL_RUN_STATES
from tests.fixtures.shared import exclusively
from tests.fixtures.vertex import LOCATION, cancel_vertex
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.e2e

TIMEOUT = 300  # seconds for each phase: every task watched, then the run's end
STEADY_POLLS = 3  # poll intervals the steady window lasts
EXTRA_GETS = 5  # beyond one per job, over the whole run
# The UI tests share the stack, and Browse reads each waiting job of every Dag once per view (one get
# a job, ui/browse.py): one view during this run adds one get per job. Reading jobs one by one at
# each poll round would still be many times over (a get a job a round: about 13 rounds).
BROWSE_VIEWS = 1
# A job's line as a task relays it: "[<replica>] <message>", the logger adding time and level.
JOB_LINE = re.compile(r"^\[workerpool0-0\] (chatty line \d{4})$")
EXPECTED_LINES = Counter(f"chatty line {n:04d}" for n in range(1, LINES + LAST_BURST + 1))
TRIGGER_LOGGER = "airflow_aip.triggers.training.TrainingJobTrigger"
JOB_ERROR = "The replica workerpool0-0 exited with a non-zero status of 1"  # the service's errorMessage


@dataclass(frozen=True)
class Calls:
    """The API requests the service counted between two looks at its counters, per method."""

    counts: Counter[str]
    seconds: float  # at least the time between the two looks

    def __getitem__(self, method: str) -> int:
        return self.counts[method]

    def rounds(self) -> int:
        """The most poll rounds that fit: one per poll interval once the watches are in step, plus
        one for watches registered apart (a round takes every watch due within half an interval,
        so the next round reads them together) and one under way at the first look."""
        return math.ceil(self.seconds / POLL_INTERVAL) + 2

    def __str__(self) -> str:
        return (
            f"{dict(self.counts)} in {self.seconds:.1f}s (poll {POLL_INTERVAL}s, <= {self.rounds()} rounds)"
        )


@dataclass
class ManyRun:
    """The finished run: its task states by map index, its jobs, what the waits cost."""

    dag_id: str
    jobs_expected: int
    run_id: str
    state: str
    task_states: dict[int, str | None]
    jobs: list[dict[str, Any]]  # the project's CustomJobs, as the service lists them
    whole: Calls  # the whole run: submits, waits, resumes
    steady: Calls  # all fifty watched, none submitting or ending: the poller alone


class Counters:
    """The service's request counters for one project (its fault middleware's ``GET /_stats``),
    looked at in turn."""

    def __init__(self, stack: AirflowStack, project: str) -> None:
        self.url = stack.ml_url + "_stats"
        self.project = project
        self.looks: list[tuple[float, float, Counter[str]]] = []  # (asked, answered, counts)

    def look(self) -> None:
        asked = time.monotonic()
        answer = httpx.get(self.url, params={"project": self.project}, timeout=30).raise_for_status()
        self.looks.append((asked, time.monotonic(), Counter(answer.json()["requests"])))

    def between(self, first: int, last: int) -> Calls:
        """From the ``first`` look to the ``last``; its seconds from asking the one to the other's answer."""
        (asked, _, before), (_, answered, after) = self.looks[first], self.looks[last]
        return Calls(after - before, answered - asked)


def project_jobs(stack: AirflowStack, project: str) -> list[dict[str, Any]]:
    """Every CustomJob of the project, every page (a list gives 20 a page unless asked)."""
    url = f"{stack.ml_url}v1/projects/{project}/locations/{LOCATION}/customJobs"
    jobs: list[dict[str, Any]] = []
    token = ""
    while True:
        page = httpx.get(url, params={"pageSize": 100, "pageToken": token}, timeout=30)
        listed = page.raise_for_status().json()
        jobs += listed.get("customJobs", [])
        token = listed.get("nextPageToken", "")
        if not token:
            return jobs


def by_map_index(jobs: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {int(job["labels"][MAP_INDEX_LABEL]): job for job in jobs}


def task_states(stack: AirflowStack, dag_id: str, run_id: str) -> dict[int, str | None]:
    listed = stack.get(f"dags/{dag_id}/dagRuns/{run_id}/taskInstances", limit=max(SIZES.values()) + 10)
    return {int(ti["map_index"]): ti["state"] for ti in listed["task_instances"] if ti["task_id"] == "train"}


def task_records(stack: AirflowStack, run: ManyRun | tuple[str, str], map_index: int) -> list[dict[str, Any]]:
    """One mapped task's log as Airflow stored it, the triggerer's part included."""
    dag_id, run_id = (run.dag_id, run.run_id) if isinstance(run, ManyRun) else run
    return stack.task_records(dag_id, run_id, "train", map_index=map_index)


def wait_until_all_watched(stack: AirflowStack, dag_id: str, run_id: str, jobs: int) -> None:
    """Every task deferred, and its trigger (in the triggerer) has read its job and logged."""
    watched: set[int] = set()
    states: dict[int, str | None] = {}

    def all_watched() -> bool:
        states.update(task_states(stack, dag_id, run_id))
        if len(states) == jobs and all(state == "deferred" for state in states.values()):
            for map_index in sorted(set(range(jobs)) - watched):
                records = task_records(stack, (dag_id, run_id), map_index)
                if any(r.get("logger") == TRIGGER_LOGGER for r in records):
                    watched.add(map_index)
        elif any(state in ("success", "failed", "upstream_failed") for state in states.values()):
            pytest.fail(f"a task ended before the gate opened: {states}")
        return len(watched) == jobs

    wait_until(
        all_watched,
        TIMEOUT,
        "every task watched",
        every=1,
        state=lambda: (Counter(states.values()), len(watched)),
    )


@pytest.fixture(
    scope="module",
    params=[pytest.param("aip_e2e_many"), pytest.param("aip_e2e_many_soak", marks=pytest.mark.soak)],
)
def many_run(airflow_stack: AirflowStack, request: pytest.FixtureRequest) -> Iterator[ManyRun]:
    stack, dag_id = airflow_stack, str(request.param)
    jobs = SIZES[dag_id]
    project = f"e2e-many-{uuid.uuid4().hex[:6]}"
    gate = stack.home / f"gate-{project}"
    wait_until(lambda: stack.api.get(f"dags/{dag_id}").status_code == 200, 120, f"{dag_id} parsed", every=1)
    conf = {
        "project_id": project,
        "package_uri": stack.package_uri,
        "job_dir": f"gs://{stack.bucket}/many",
        "gate": str(gate),
    }
    counters = Counters(stack, project)
    run_id = ""
    try:
        with exclusively(BROWSE_READS):  # from the first look at the counters to the last
            counters.look()
            run_id = stack.trigger(dag_id, conf)
            wait_until_all_watched(stack, dag_id, run_id, jobs)
            counters.look()
            time.sleep(STEADY_POLLS * POLL_INTERVAL)  # the poller's rounds happen meanwhile
            counters.look()
            gate.touch()
            state = stack.wait_for_run(dag_id, run_id, timeout=TIMEOUT)
            counters.look()
        whole, steady = counters.between(0, 3), counters.between(1, 2)
        if os.environ.get("AIP_MANY_DEFERRED_REPORT"):
            figures = {
                name: {"requests": dict(calls.counts), "seconds": round(calls.seconds, 1)}
                for name, calls in (("whole", whole), ("steady", steady))
            }
            Path(os.environ["AIP_MANY_DEFERRED_REPORT"]).write_text(json.dumps(figures, indent=2))
        listed = project_jobs(stack, project)  # after the last look: the test's own list is not counted
        yield ManyRun(dag_id, jobs, run_id, state, task_states(stack, dag_id, run_id), listed, whole, steady)
    finally:  # a run that did not end is failed, its jobs cancelled: they would slow the next tests
        if run_id and stack.run_state(dag_id, run_id) not in TERMINAL_RUN_STATES:
            stack.api.patch(f"dags/{dag_id}/dagRuns/{run_id}", json={"state": "failed"}).raise_for_status()
        for job in project_jobs(stack, project):
            if job_state(job["state"]).value in ("QUEUED", "PREPARING", "RUNNING"):
                cancel_vertex(stack.ml_url, job["name"])


def test_every_task_ends_as_its_job_did(many_run: ManyRun) -> None:
    run, count = many_run, many_run.jobs_expected
    expected_jobs = {i: "FAILED" if i in failing(count) else "SUCCEEDED" for i in range(count)}
    assert len(run.jobs) == count  # one job per task
    assert {i: job_state(job["state"]).value for i, job in by_map_index(run.jobs).items()} == expected_jobs
    expected_tasks = {i: "failed" if i in failing(count) else "success" for i in range(count)}
    assert run.task_states == expected_tasks
    assert run.state == "failed"  # the failed tasks fail the run


def test_many_waits_make_one_list_call_per_poll_round(many_run: ManyRun) -> None:
    steady = many_run.steady
    assert steady["customJobs.create"] == 0, steady  # the window held nothing but the waits
    # Each trigger reading its own job makes one get a task a round: the poller makes none while its
    # list answers for every job.
    assert steady["customJobs.get"] == 0, f"jobs read one by one, not by one list per round: {steady}"
    assert 1 <= steady["customJobs.list"] <= steady.rounds(), steady
    assert steady["entries.list"] <= steady.rounds(), f"logs read job by job, not shared: {steady}"


def test_the_whole_run_reads_no_job_one_by_one(many_run: ManyRun) -> None:
    whole = many_run.whole
    count = many_run.jobs_expected
    assert whole["customJobs.create"] == count, whole  # and one lookup list before each create
    gets = count * (1 + BROWSE_VIEWS) + EXTRA_GETS
    assert whole["customJobs.get"] <= gets, f"jobs read one by one: {whole}"


def test_each_task_log_holds_every_job_line_exactly_once(
    airflow_stack: AirflowStack, many_run: ManyRun
) -> None:
    for map_index in range(many_run.jobs_expected):
        records = task_records(airflow_stack, many_run, map_index)
        events = [str(r.get("event", "")) for r in records]
        assert "Pausing task as DEFERRED. " in events, map_index  # the trigger watched the job
        lines = Counter(m[1] for m in map(JOB_LINE.match, events) if m)
        assert lines == EXPECTED_LINES, (map_index, sorted(lines.items()))
        if map_index in failing(many_run.jobs_expected):  # failed with the job's own error
            job_id = by_map_index(many_run.jobs)[map_index]["displayName"]  # our job ID
            error = f"Training job {job_id} ended FAILED: {JOB_ERROR}"
            assert error in json.dumps(records), (map_index, events[-20:])

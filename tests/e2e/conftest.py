"""The e2e tier: a real Airflow (``airflow standalone``: scheduler, triggerer, dag-processor,
api-server) on the local training service, driven through Airflow's REST API.

What ``dag.test()`` cannot prove is proved here: the trigger loads from the installed package in
the real triggerer, a user's kill reaches the job through the supervisor and the triggerer, and
the task logs Airflow stores are masked. One stack for the whole pytest run (tests/e2e/stack.py),
started by the first worker that needs it and shared by every e2e module, whichever worker runs
it: each test works in a project of its own. The controller stops it once the tier's last test
ran (an idle scheduler and dag-processor still take CPU from the rest of the suite).
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import stack as e2e_stack
from tests.fixtures.airflow_stack import STACK_DAGS, TERMINAL_RUN_STATES, AirflowApi, login
from tests.fixtures.shared import once, pid_file, shared_dir
from tests.fixtures.waiting import wait_until

sys.path.append(str(STACK_DAGS))  # as Airflow does with a bundle's root: the tests read the Dags' numbers
SERVER = "airflow-e2e"  # its PID file's name: tests/fixtures/shared.py stops it
# Browse → Training jobs reads every waiting job of every Dag with a get (test_ui.py opens it);
# test_many_deferred.py counts its run's calls: the two hold this lock, so they never overlap.
BROWSE_READS = "browse-reads"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: runs a real Airflow (airflow standalone) on the local services")


class AirflowStack(AirflowApi):
    """The running stack: Airflow's REST API (logged in as admin), the training service, the
    staged test trainer, and where its files are."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.passwords: dict[str, str] = state["passwords"]
        super().__init__(state["base_url"], login(state["base_url"], "admin", self.passwords["admin"]))
        self.home = Path(state["home"])
        self.log = Path(state["log"])
        self.ml_url: str = state["ml_url"]
        self.gcs_url: str = state["gcs_url"]
        self.bucket: str = state["bucket"]
        self.package_uri: str = state["package_uri"]

    def token(self, user: str) -> str:
        """A JWT for ``user``, from Airflow's own login endpoint (what the login page does)."""
        return login(self.base_url, user, self.passwords[user])


def _start_stack() -> dict[str, Any]:
    """Spawn the stack and wait until it has published its state (or failed)."""
    publish, log = shared_dir() / f"{SERVER}.state", shared_dir() / f"{SERVER}.log"
    e2e_stack.spawn(publish, pid_file(SERVER), log)

    def published() -> dict[str, Any] | None:
        return json.loads(publish.read_text()) if publish.exists() and publish.stat().st_size else None

    state = wait_until(
        published, e2e_stack.READY_BOUND + 60, "e2e Airflow stack", every=1, state=lambda: f"see {log}"
    )
    if "error" in state:
        raise RuntimeError(f"the e2e Airflow stack did not start:\n{state['error']}")
    return state


@pytest.fixture(scope="session")
def airflow_stack() -> Iterator[AirflowStack]:
    stack = AirflowStack(once(SERVER, _start_stack))
    try:
        yield stack
    finally:
        stack.close()


@dataclass
class TuningRun:
    """A finished run of the example pipeline: its tuning job's trials are in XCom.

    ``progress`` is what `make demo`'s progress display told while the run went (plain lines).
    """

    dag_id: str
    run_id: str
    project: str
    state: str
    progress: list[str]


@pytest.fixture(scope="session")
def tuning_run(airflow_stack: AirflowStack) -> TuningRun:
    """One pipeline run (6 trials, 3 at a time) for the whole run, shared by the pipeline, progress
    and UI tests whichever worker runs them."""
    return TuningRun(**once("tuning-run", lambda: _run_pipeline(airflow_stack)))


def _run_pipeline(stack: AirflowStack) -> dict[str, Any]:
    from airflow_aip.hooks.vertex import VertexJobHook
    from scripts.progress import ProgressTracker, Snapshot

    dag_id, project = "aip_training_pipeline", f"e2e-{uuid.uuid4().hex[:8]}"
    conf = {"bucket": stack.bucket, "project_id": project, "max_trials": 6, "max_parallel_trials": 3}
    run_id = stack.trigger(dag_id, conf)
    hook = VertexJobHook(project_id=project, region="us-central1", api_endpoint=stack.ml_url)
    tracker, progress = ProgressTracker(), list[str]()

    def ended() -> str | None:  # looks at the run as `make demo` does, until it ended, and once more after
        state = stack.run_state(dag_id, run_id)
        listed = [hook.read(str(job["name"])) for job in hook.list_jobs("hyperparameterTuningJobs")]
        progress.extend(e.text for e in tracker.update(Snapshot(stack.task_states(dag_id, run_id), listed)))
        return state if state in TERMINAL_RUN_STATES else None

    state = wait_until(
        ended, 300, f"end of {dag_id} {run_id}", every=1, state=lambda: stack.task_states(dag_id, run_id)
    )
    return {"dag_id": dag_id, "run_id": run_id, "project": project, "state": state, "progress": progress}

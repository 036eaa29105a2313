"""The e2e tier: a real Airflow (``airflow standalone``: scheduler, triggerer, dag-processor,
api-server) on the local training service, driven through Airflow's REST API.

What ``dag.test()`` cannot prove is proved here: the trigger loads from the installed package in
the real triggerer, a user's kill reaches the job through the supervisor and the triggerer, and
the task logs Airflow stores are masked. One stack for the tier, in a temporary AIRFLOW_HOME,
on 127.0.0.1 and free ports; stopped by PID (whole process groups) once the tier's last test
ran (package scope: an idle scheduler and dag-processor still take CPU from the rest of the suite).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from airflow_aip.local.storage.gcs import free_port
from scripts.stack import REPO, airflow_env, local_service, migrate, stop_group
from tests.fixtures import servers
from tests.fixtures.local_service import stage_trainer, storage_client

E2E_DAGS = Path(__file__).resolve().parent / "dags"
TOKEN_SECRET = "token-marker-e2e-41d7a2"
FLAGGED_SECRET = "flagged-marker-e2e-93c0b5"
KEY_SECRET = "PRIVATE-KEY-MARKER-e2e-6f1e0d"
PROJECT = "e2e-project"
TERMINAL_RUN_STATES = {"success", "failed"}
# The stack starts beside the suite's other stacks (the longest scopes start first, together):
# 212 s was seen. A bound to fail on rather than hang, never a measure.
READY_BOUND = 420
# Real logins (no all-admins shortcut), so the UI plugin's 401 and 403 can be proved: "outsider"
# has no role, hence no access to any Dag. Passwords are written before Airflow starts.
USERS = {"admin": "admin", "viewer": "viewer", "outsider": ""}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: runs a real Airflow (airflow standalone) on the local services")


def wait_until(condition: Any, what: str, state: Any = None, timeout: float = 360) -> Any:
    """``condition()``'s first truthy answer, polled every 0.5 s; the test fails after ``timeout``
    naming ``what`` and, if given, ``state()`` (what the stack looked like then)."""
    deadline = time.monotonic() + timeout
    while not (found := condition()):
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {timeout}s" + (f": {state()}" if state else ""))
        time.sleep(0.5)
    return found


class RetryWhenBusy(httpx.HTTPTransport):
    """Send a request again when Airflow answers 5xx, and a read again when it times out.

    Two cores run the whole suite beside this stack, so now and then the api-server answers late
    or, on SQLite, "database is locked" (a 5xx: the request rolled back). A timed-out write is
    never resent: it may have been applied. Only the tests' own REST calls (triggers, task states,
    marking a task failed) go through this transport.
    """

    ATTEMPTS = 5

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        for _ in range(self.ATTEMPTS - 1):
            try:
                response = super().handle_request(request)
            except httpx.TimeoutException:
                if request.method != "GET":
                    raise
                continue
            if response.status_code < 500:
                return response
            response.close()
            time.sleep(1)
        return super().handle_request(request)


@dataclass
class AirflowStack:
    """The running stack: Airflow's REST API, the training service, the staged test trainer."""

    api: httpx.Client
    base_url: str
    passwords: dict[str, str]
    home: Path
    log: Path
    ml_url: str
    gcs_url: str
    bucket: str
    package_uri: str

    def token(self, user: str) -> str:
        """A JWT for ``user``, from Airflow's own login endpoint (what the login page does)."""
        body = {"username": user, "password": self.passwords[user]}
        answer = httpx.post(f"{self.base_url}/auth/token", json=body, timeout=30)
        return str(answer.raise_for_status().json()["access_token"])

    def get(self, path: str, **params: Any) -> Any:
        return self.api.get(path, params=params).raise_for_status().json()

    def trigger(self, dag_id: str, conf: dict[str, Any]) -> str:
        """Unpause the DAG (DAGs start paused: no scheduled run sneaks in) and trigger one run."""
        self.api.patch(f"dags/{dag_id}", json={"is_paused": False}).raise_for_status()
        body = {"logical_date": None, "conf": conf}
        run = self.api.post(f"dags/{dag_id}/dagRuns", json=body).raise_for_status().json()
        return str(run["dag_run_id"])

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str | None]:
        listed = self.get(f"dags/{dag_id}/dagRuns/{run_id}/taskInstances")
        return {ti["task_id"]: ti["state"] for ti in listed["task_instances"]}

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float = 300) -> str:
        deadline = time.monotonic() + timeout
        while (state := self.get(f"dags/{dag_id}/dagRuns/{run_id}")["state"]) not in TERMINAL_RUN_STATES:
            if time.monotonic() > deadline:
                pytest.fail(
                    f"{dag_id} {run_id} still {state} after {timeout}s: {self.task_states(dag_id, run_id)}"
                )
            time.sleep(1)
        return str(state)

    def task_records(
        self, dag_id: str, run_id: str, task_id: str, try_number: int = 1
    ) -> list[dict[str, Any]]:
        """The task's log as Airflow stored it (what a user reads in the UI), trigger's part included."""
        path = f"dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}"
        answer = self.api.get(path, params={"full_content": True}, headers={"Accept": "application/json"})
        content = answer.raise_for_status().json()["content"]
        return [item if isinstance(item, dict) else {"event": str(item)} for item in content]

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1) -> str:
        return "\n".join(json.dumps(r) for r in self.task_records(dag_id, run_id, task_id, try_number))


def _wait_until_ready(
    api: httpx.Client, dag_ids: list[str], proc: subprocess.Popen[bytes], log: Path, admin_password: str
) -> None:
    """Wait for every component and the Dags; log the REST client in as admin on the way."""
    deadline = time.monotonic() + READY_BOUND
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"airflow standalone exited ({proc.returncode}); see {log}")
        try:
            if "authorization" not in api.headers:
                login = {"username": "admin", "password": admin_password}
                token = api.post(str(api.base_url.join("/auth/token")), json=login).raise_for_status()
                api.headers["authorization"] = f"Bearer {token.json()['access_token']}"
            health = api.get("monitor/health").json()
            healthy = all(
                (health.get(part) or {}).get("status") == "healthy"
                for part in ("metadatabase", "scheduler", "triggerer", "dag_processor")
            )
            parsed = all(api.get(f"dags/{dag_id}").status_code == 200 for dag_id in dag_ids)
            if healthy and parsed:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"airflow standalone not ready within {READY_BOUND}s; see {log}")
        time.sleep(1)


@contextlib.contextmanager
def metadata_db(home: Path) -> Iterator[str]:
    """Airflow's metadata DB: a PostgreSQL of the tier's own, as deployments have; SQLite (with
    its lock waits under load) only where Debian's postgresql is not installed."""
    if servers.missing(redis=False):
        yield f"sqlite:///{home / 'airflow.db'}"
    else:
        with servers.postgres(home / "postgres.log") as url:
            yield url


@pytest.fixture(scope="package")
def airflow_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowStack]:
    home = tmp_path_factory.mktemp("airflow-e2e")
    log = home / "stack.log"
    # the kill test keeps five jobs running at once, test_many_deferred fifty; GET /_stats counts
    # the API calls (test_many_deferred: one list call per poll round)
    with (
        metadata_db(home) as db_url,
        local_service(home / "aip-local", log, max_running_jobs=50, fault_admin=True) as service_env,
    ):
        gcs_url = service_env["STORAGE_EMULATOR_HOST"]
        trainer = stage_trainer(gcs_url, home / "sdist")
        bucket = storage_client(gcs_url).create_bucket(f"aip-e2e-{os.getpid()}-{int(time.time())}")
        port = free_port()
        passwords = {user: f"{user}-{uuid.uuid4().hex[:12]}" for user in USERS}
        passwords_file = home / "passwords.json"
        bundles = [
            {
                "name": "dags-folder",
                "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                "kwargs": {},
            },
            {
                "name": "aip-e2e",
                "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                "kwargs": {"path": str(E2E_DAGS)},
            },
        ]
        keyfile = {
            "type": "service_account",
            "project_id": PROJECT,
            "private_key": f"-----BEGIN PRIVATE KEY-----\n{KEY_SECRET}\n-----END PRIVATE KEY-----\n",
            "client_email": "trainer@e2e-project.iam.gserviceaccount.com",
        }
        connection = {
            "conn_type": "google_cloud_platform",
            "extra": {"project": PROJECT, "keyfile_dict": keyfile},
        }
        env = {
            **airflow_env(home),
            **service_env,
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": db_url,
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{u}:{r}" for u, r in USERS.items()),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords_file),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps(bundles),
            "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT": json.dumps(
                {"conn_type": "google_cloud_platform", "extra": {"project": PROJECT}}
            ),
            "AIRFLOW_CONN_AIP_SECRET_CONN": json.dumps(connection),
            "AIRFLOW_VAR_AIP_API_TOKEN": TOKEN_SECRET,
            "AIP_E2E_FLAGGED_SECRET": FLAGGED_SECRET,
            "AIP_EXAMPLE_BUCKET": bucket.name,
        }
        migrate(env, log)
        passwords_file.write_text(json.dumps(passwords))
        with log.open("ab") as out:
            proc = subprocess.Popen(
                ["airflow", "standalone"],
                env=env,
                cwd=REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        api = httpx.Client(base_url=f"http://127.0.0.1:{port}/api/v2/", timeout=30, transport=RetryWhenBusy())
        try:
            dag_ids = ["aip_training_pipeline", "aip_e2e_kill", "aip_e2e_secrets", "aip_e2e_tuning"]
            _wait_until_ready(api, dag_ids, proc, log, passwords["admin"])
            yield AirflowStack(
                api=api,
                base_url=f"http://127.0.0.1:{port}",
                passwords=passwords,
                home=home,
                log=log,
                ml_url=service_env["CLOUDSDK_API_ENDPOINT_OVERRIDES_ML"],
                gcs_url=gcs_url,
                bucket=bucket.name,
                package_uri=trainer.package_uri,
            )
        finally:
            api.close()
            stop_group(proc, timeout=60)


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


@pytest.fixture(scope="package")
def tuning_run(airflow_stack: AirflowStack) -> TuningRun:
    """One pipeline run (6 trials, 3 at a time) for the tier, shared by the pipeline and UI tests."""
    from scripts.progress import ProgressTracker, Snapshot

    stack, dag_id = airflow_stack, "aip_training_pipeline"
    project = f"e2e-{uuid.uuid4().hex[:8]}"
    conf = {"bucket": stack.bucket, "project_id": project, "max_trials": 6, "max_parallel_trials": 3}
    run_id = stack.trigger(dag_id, conf)
    from airflow_aip.hooks.vertex import VertexJobHook

    hook = VertexJobHook(project_id=project, region="us-central1", api_endpoint=stack.ml_url)
    tracker, progress = ProgressTracker(), []
    deadline = time.monotonic() + 300
    while True:  # looks at the run as `make demo` does, until it ended, and once more after
        state = stack.get(f"dags/{dag_id}/dagRuns/{run_id}")["state"]
        # as `make demo` looks: the jobs' neutral views, with their trials
        listed = [hook.read(str(job["name"])) for job in hook.list_jobs("hyperparameterTuningJobs")]
        progress += [e.text for e in tracker.update(Snapshot(stack.task_states(dag_id, run_id), listed))]
        if state in TERMINAL_RUN_STATES:
            return TuningRun(dag_id, run_id, project, state, progress)
        if time.monotonic() > deadline:
            pytest.fail(f"{dag_id} {run_id} still {state} after 300s: {stack.task_states(dag_id, run_id)}")
        time.sleep(1)

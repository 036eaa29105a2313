"""The local training service: the jobs API's semantics over the store, a queue and runner threads.

A bounded number of jobs run at once (``max_running_jobs``); the rest wait QUEUED, ordered by
``scheduling.priority`` then submission, with ``jobPosition`` telling where they stand.
At start-up the records on disk are taken back: QUEUED jobs are queued again, and jobs that
were PREPARING, RUNNING or CANCELLING when the previous service died are marked FAILED with a
message saying so (their orphaned processes are stopped, by PID and start time, the containers
labelled with this data dir are removed: :mod:`.executor.containers`, and the ``/gcs/`` mounts their
container replicas left are unmounted: :func:`.executor.gcs_mount.unmount_left_over`). On a clean
stop, running jobs are stopped and marked FAILED the same way; queued jobs stay queued.

The region can be made to lack things (:mod:`.capacity`): a queued job whose quota is not free
stays QUEUED, saying why once in its log, while jobs behind it that fit start; it is looked at
again whenever capacity may have grown (a job ended, ``/_capacity`` changed). A create the model
refuses is answered 429 RESOURCE_EXHAUSTED before anything is stored.
"""

from __future__ import annotations

import base64
import bisect
import copy
import fcntl
import functools
import hashlib
import json
import logging
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from airflow_aip.exceptions import JobNotFoundError, ValidationError
from airflow_aip.jobs import JobState, validate_job
from airflow_aip.jobs.permissions import ml_service_agent
from airflow_aip.local import pages
from airflow_aip.local.capacity import CapacitySettings, RegionCapacity
from airflow_aip.local.capacity_needs import Needs, needs_of
from airflow_aip.local.capacity_queue import QuotaGate
from airflow_aip.local.clock import rfc3339
from airflow_aip.local.deployment import check_private_tmp, no_engine
from airflow_aip.local.executor.containers import find_engine
from airflow_aip.local.executor.environments import EnvironmentCache
from airflow_aip.local.executor.execution import ACTIVE_STATES, ExecutionSettings, JobControl, JobExecution
from airflow_aip.local.executor.gcs_mount import unmount_left_over
from airflow_aip.local.executor.plans import VERTEX_KINDS
from airflow_aip.local.executor.prebuilt import PrebuiltImages
from airflow_aip.local.executor.processes import kill_group
from airflow_aip.local.executor.replica_network import remove_left_over_networks
from airflow_aip.local.executor.trials import without_report_times
from airflow_aip.local.log_entries import JobLog
from airflow_aip.local.logs.filter_pruning import FilterPlan
from airflow_aip.local.logs.filters import ML_JOB_FILTER_FIELDS, parse_filter
from airflow_aip.local.permissions import Permissions, PermissionSettings
from airflow_aip.local.store import JOB_ID_FIELD, JobStore, JobView, project_number, validate_project

if TYPE_CHECKING:
    from airflow_aip.local.egress.passthrough import PassThrough

_log = logging.getLogger(__name__)
_REPLICAS = ("masterConfig", "workerConfig", "parameterServerConfig", "evaluatorConfig")


class FailedPreconditionError(Exception):
    """The request is valid but the job's state forbids it (cancelling a finished job)."""


class DataDirBusyError(RuntimeError):
    """Another service already serves this data dir."""


@dataclass(frozen=True)
class ServiceConfig:
    """How the service runs; every field has a CLI flag in ``aip-local serve``."""

    data_dir: Path
    storage_url: str | None
    max_running_jobs: int = 2
    offline: bool = False
    runtime: str = "isolated"  # or "host": see local/executor/environments.py
    python: str = sys.executable
    poll_interval: float = 0.2
    capacity: CapacitySettings = field(default_factory=CapacitySettings)  # --quota...: local/capacity.py
    capacity_admin: bool = False  # --fault-admin: POST/DELETE /_capacity allowed
    capacity_admin_loopback: bool = False  # --capacity-admin: ... allowed from loopback clients only
    model_upload_seconds: float = 1.0  # --model-upload-seconds: a model upload's import (vertex/models.py)
    public_url: str = ""  # where clients reach the API (a failed job's message links its logs there)
    grpc_address: str = ""  # --grpc-port: the gRPC face, ``host:port`` (a replica's gapic clients reach it)
    allow_python_mismatch: bool = False  # --allow-python-mismatch: local/executor/builders.py
    permissions: PermissionSettings = field(default_factory=PermissionSettings)  # --disable-api...
    # --container-engine (default auto there): podman, docker, auto or none (executor/containers.py).
    # None here, so a service built in-process (the unit tests) never runs an engine's CLI.
    container_engine: str = "none"
    # --prebuilt-images: present (default), pull or never (executor/prebuilt.py).
    prebuilt_images: str = "present"
    # --pass-through-host: Google API hosts a trainer reaches with the developer's ADC (egress/passthrough.py)
    pass_through_hosts: tuple[str, ...] = ()
    # --deployment: a deployment made for others names itself; jobs it cannot run as Vertex would are
    # refused at create, naming it (local/deployment.py). "": a developer's own service.
    deployment: str = ""
    # --pass-env: this machine's variables every replica gets on purpose (executor/host_env.py).
    pass_env: tuple[str, ...] = ()
    machine_limits: bool = True  # --machine-limits: each replica held to its machine (executor/limits.py)


def _etag(job: dict[str, Any]) -> str:
    return base64.b64encode(hashlib.sha256(json.dumps(job, sort_keys=True).encode()).digest()[:8]).decode()


NO_ENGINE = (
    "custom containers need a container engine, and none was found on this machine (podman or docker, "
    "working as this service's user; see aip-local serve --container-engine)"
)


def _passing(hosts: tuple[str, ...]) -> PassThrough | None:
    """The pass-through of ``hosts`` (validated by the CLI: :func:`.egress.routes.pass_through_refusal`)."""
    if not hosts:
        return None
    from airflow_aip.local.egress.passthrough import PassThrough

    return PassThrough(frozenset(h.lower().rstrip(".") for h in hosts))


def _reject_containers(job: dict[str, Any], deployment: str) -> None:
    for replica in _REPLICAS:
        if (job["trainingInput"].get(replica) or {}).get("imageUri"):
            raise ValidationError(
                f"trainingInput.{replica}.imageUri",
                f"{no_engine(deployment, NO_ENGINE)}: submit packageUris and pythonModule instead",
            )


def _check_deployment(job: dict[str, Any], deployment: str) -> None:
    """An ml v1 tuning job with process replicas, where the named deployment has no private /tmp."""
    training_input = job["trainingInput"]
    images = [(training_input.get(replica) or {}).get("imageUri") for replica in _REPLICAS]
    if training_input.get("hyperparameters") and not images[0]:
        check_private_tmp(deployment, "trainingInput.hyperparameters")


class TrainingService:
    """Create, get, list and cancel jobs; run them in background threads."""

    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        config.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock_file: IO[str] | None = (config.data_dir / "service.lock").open("a")
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            self._lock_file.close()
            raise DataDirBusyError(f"{config.data_dir} is already served by another aip-local") from exc
        self.store = JobStore(config.data_dir)
        self.envs = EnvironmentCache(
            config.data_dir / "envs",
            config.python,
            offline=config.offline,
            runtime=config.runtime,
            allow_python_mismatch=config.allow_python_mismatch,
        )
        self.capacity = RegionCapacity(config.capacity)
        self.permissions = Permissions(config.permissions)  # local/permissions.py
        self.engine = find_engine(config.container_engine, config.data_dir)
        self.settings = ExecutionSettings(
            config.storage_url,
            config.poll_interval,
            self.capacity,
            config.public_url,
            self.engine,
            PrebuiltImages(self.engine, config.prebuilt_images, offline=config.offline),
            config.grpc_address,
            passing=_passing(config.pass_through_hosts),
            pass_env=config.pass_env,
            machine_limits=config.machine_limits,
        )
        self._cond = threading.Condition()
        self._queue: list[tuple[int, int, str, str]] = []  # (-priority, seq, project, job_id)
        self._quota = QuotaGate(self.capacity, self.store)
        self.capacity.subscribe(self._capacity_changed)
        self._controls: dict[tuple[str, str], JobControl] = {}
        self._stopping = False
        self._workers: list[threading.Thread] = []
        self._recover()

    # -- lifecycle ------------------------------------------------------------------------

    def _recover(self) -> None:
        if self.engine is not None:  # a killed service's replicas may still run in containers
            for name in self.engine.remove_left_over():
                _log.warning("removed container %s, left behind by this data dir's last service", name)
            for name in remove_left_over_networks(self.engine):
                _log.warning("removed network %s, left behind by this data dir's last service", name)
        for record in self.store.records():
            state = JobState.parse(record.job.get("state"))
            if state is JobState.QUEUED:
                self._enqueue(record.project, record.job, record.seq)
            elif state in ACTIVE_STATES:
                for ref in record.processes:
                    kill_group(ref["pid"], ref["ticks"] if ref["ticks"] >= 0 else None)
                message = (
                    f"The local training service stopped while this job was {state.value}; "
                    "the job was not resumed. Submit it again under a new job id."
                )
                fail = functools.partial(_fail_stale, message=message)
                self.store.update(record.project, record.job_id, fail)
                self.store.set_processes(record.project, record.job_id, [])
                JobLog(self.store, record.project, record.job_id).service(message, severity="ERROR")
        for point in unmount_left_over(self.config.data_dir):  # their /gcs/, once their rclone is gone
            _log.warning("unmounted %s, left behind by this data dir's last service", point)

    def start(self) -> TrainingService:
        for index in range(max(1, self.config.max_running_jobs)):
            worker = threading.Thread(target=self._work, name=f"aip-local-runner-{index}", daemon=True)
            worker.start()
            self._workers.append(worker)
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop running jobs (they end FAILED, saying why), leave queued ones for the next start."""
        with self._cond:
            self._stopping = True
            for control in self._controls.values():
                control.cancel(
                    "The local training service was stopped while this job was running.", JobState.FAILED
                )
            self._cond.notify_all()
        for worker in self._workers:
            worker.join(timeout)
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None

    def _work(self) -> None:
        while True:
            with self._cond:
                picked = None
                while not self._stopping and (picked := self._quota.pick(self._queue)) is None:
                    self._cond.wait()  # woken by a submit, or when capacity may have grown
                if self._stopping or picked is None:
                    return
                self._queue.remove(picked)
                _, _, project, job_id = picked
                control = self._controls[(project, job_id)] = JobControl()
                waited = self._quota.forget((project, job_id))
            try:
                if waited:
                    self._quota.leaving((project, job_id))
                JobExecution(self.store, self.envs, self.settings, project, job_id, control).run()
            finally:
                with self._cond:
                    self._controls.pop((project, job_id), None)
                self.capacity.release((project, job_id))

    def _capacity_changed(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def _enqueue(self, project: str, job: dict[str, Any], seq: int, needs: Needs | None = None) -> None:
        # ml v1's scheduling.priority; Vertex jobs (no trainingInput) queue in submission order.
        priority = int(((job.get("trainingInput") or {}).get("scheduling") or {}).get("priority", 0))
        with self._cond:
            self._quota.queued((project, job["jobId"]), needs or needs_of(job))
            bisect.insort(self._queue, (-priority, seq, project, job["jobId"]))
            self._cond.notify()

    def _queue_positions(self) -> dict[tuple[str, str], int]:
        """``(project, job_id) -> 1-based place`` in the queue."""
        with self._cond:
            return {(p, j): place for place, (_, _, p, j) in enumerate(self._queue, start=1)}

    def _with_position(
        self, project: str, job: dict[str, Any], positions: dict[tuple[str, str], int] | None = None
    ) -> dict[str, Any]:
        """``job`` with its ``jobPosition`` if QUEUED ("0" once it left the queue); ``positions`` if known."""
        if job.get("state") == JobState.QUEUED.value:
            places = self._queue_positions() if positions is None else positions
            job["jobPosition"] = str(places.get((project, job["jobId"]), 0))
        if "trainingOutput" in job:
            job["trainingOutput"] = without_report_times(job["trainingOutput"])
        return job

    # -- the API ----------------------------------------------------------------------------

    def create_job(self, project: str, body: Any) -> dict[str, Any]:
        validate_project(project)
        job = validate_job(body)
        if self.engine is None:
            _reject_containers(job, self.config.deployment)
        _check_deployment(job, self.config.deployment)
        training_input = job["trainingInput"]
        self.permissions.check_create(
            ml_service_agent(project_number(project)),
            training_input.get("serviceAccount"),
            training_input.get("packageUris") or [],
        )
        job.update(state=JobState.QUEUED.value, createTime=rfc3339())
        job["etag"] = _etag(job)
        return self.submit(project, job)

    def submit(self, project: str, job: dict[str, Any]) -> dict[str, Any]:
        """Store a QUEUED job (of either API) and queue it for the one executor.

        ResourceExhaustedError (429) first if the region's model refuses it (nothing is stored).
        """
        needs = needs_of(job)
        self.capacity.check_create(project, needs)
        with self._cond:  # a cancel must see the job either queued or running, never in between
            seq, created = self.store.create(project, job)
            JobLog(self.store, project, job["jobId"]).service("Job created; waiting in the queue.")
            self._enqueue(project, created, seq, needs)
            return self._with_position(project, created)

    def get_job(self, project: str, job_id: str) -> dict[str, Any]:
        validate_project(project)
        job = self.store.get(project, job_id)
        if job.get("kind") in VERTEX_KINDS:  # the aiplatform face's, not an ml v1 Job
            message = f"Field: name Error: Job projects/{project}/jobs/{job_id} does not exist."
            raise JobNotFoundError(404, message)
        return self._with_position(project, job)

    def list_jobs(
        self, project: str, filter_text: str | None, page_size: int | None, page_token: str | None
    ) -> dict[str, Any]:
        validate_project(project)
        node = parse_filter(filter_text, ML_JOB_FILTER_FIELDS)
        size = pages.page_size(page_size)
        plan = FilterPlan(node, JOB_ID_FIELD)  # a poller's jobId="a" OR ...: those jobs, their branches
        positions = self._queue_positions()

        def shown(view: JobView) -> dict[str, Any] | None:
            if view.job.get("kind") in VERTEX_KINDS:
                return None
            job = self._with_position(project, dict(view.job), positions)
            return copy.deepcopy(job) if plan.matches(job) else None

        views = reversed(self.store.job_views([project], JOB_ID_FIELD, plan.candidates))
        return pages.newest_stored_page(views, "jobs", page_token, size, shown)

    def cancel_job(self, project: str, job_id: str) -> dict[str, Any]:
        validate_project(project)
        with self._cond:
            job = self.store.get(project, job_id)
            state = JobState.parse(job.get("state"))
            if state.is_terminal:
                raise FailedPreconditionError(f"Cannot cancel job {job_id}: it is already {state.value}.")
            log = JobLog(self.store, project, job_id)
            queued = [entry for entry in self._queue if entry[2:] == (project, job_id)]
            if queued:
                self._queue.remove(queued[0])
                self._quota.forget((project, job_id))
                self.store.update(project, job_id, _cancel_queued)
                log.service("Job cancelled by the user while queued.")
                return {}
            if state is JobState.CANCELLING:
                return {}
            self.store.update(project, job_id, lambda j: j.update(state=JobState.CANCELLING.value))
            log.service("Job state: CANCELLING (cancel requested by the user)")
            control = self._controls.get((project, job_id))
            if control is not None:
                control.cancel("Job cancelled by the user.")
        return {}


def _fail_stale(job: dict[str, Any], message: str) -> None:
    job.update(state=JobState.FAILED.value, errorMessage=message, endTime=rfc3339())
    for trial in (job.get("trainingOutput") or {}).get("trials", []):
        if not JobState.parse(trial.get("state")).is_terminal:
            trial.update(state=JobState.FAILED.value, endTime=job["endTime"])


def _cancel_queued(job: dict[str, Any]) -> None:
    job.pop("jobPosition", None)
    job.update(state=JobState.CANCELLED.value, endTime=rfc3339(), errorMessage="Job cancelled by the user.")

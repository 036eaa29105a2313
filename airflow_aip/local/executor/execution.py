"""One job from PREPARING to its end: fetch, install, run (or tune), record the outcome.

One executor for both APIs: it runs the job's :class:`~.plans.ExecutionPlan` and records
neutral states (ml v1's names) that each API face renders in its own words. The lifecycle:
PREPARING (packages fetched and installed) -> RUNNING -> SUCCEEDED or FAILED, or CANCELLING ->
CANCELLED when the user cancels. When the run limit runs out (ml v1 ``scheduling.maxRunningTime``:
CANCELLED; Vertex ``scheduling.timeout``: FAILED) the reason goes to errorMessage. A FAILED job's
errorMessage names the replica and its exit code, carries its Python traceback if it ended with
one, and links the job's logs, in Google's words (:meth:`.runner.AttemptOutcome.error_message`);
the rest of its stderr is in the job's log only. Every change is
persisted at once, so a GET sees it. The region's capacity (:mod:`.provisioning`) may hold a job
in PENDING (Flex-Start), fail it there (stockout) or restart its replicas (Spot); a tuning job
meets it again at each trial (:mod:`.trials`).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_aip.jobs import JobState, duration_seconds
from airflow_aip.local.capacity import RegionCapacity
from airflow_aip.local.clock import now, parse_rfc3339, rfc3339
from airflow_aip.local.executor.accelerators import accelerator_notes
from airflow_aip.local.executor.containers import ContainerEngine, ImagePullError
from airflow_aip.local.executor.environments import (
    Environment,
    EnvironmentCache,
    PreparationError,
    download_packages,
)
from airflow_aip.local.executor.gcs_mount import mount_failure, mount_unavailable
from airflow_aip.local.executor.host_env import PassedEnv
from airflow_aip.local.executor.limits import host_cpus, host_memory, pool_notes, this_machine_cgroups
from airflow_aip.local.executor.pip_output import PipOutput
from airflow_aip.local.executor.plans import ExecutionPlan, execution_plan
from airflow_aip.local.executor.prebuilt import PrebuiltImages, choose_paths
from airflow_aip.local.executor.private_tmp import private_tmp_unavailable
from airflow_aip.local.executor.provisioning import Provisioning
from airflow_aip.local.executor.replica_network import shared_network_note
from airflow_aip.local.executor.runner import Attempt, AttemptOutcome, AttemptSpec, logs_url
from airflow_aip.local.executor.trainer_io import TrainerIO
from airflow_aip.local.executor.trials import TuningRun
from airflow_aip.local.log_entries import JobLog
from airflow_aip.local.store import JobStore

if TYPE_CHECKING:
    from airflow_aip.local.egress.passthrough import PassThrough

ACTIVE_STATES = frozenset({JobState.PREPARING, JobState.RUNNING, JobState.CANCELLING})


class JobControl:
    """How the API and the clock tell a running job to stop, and why."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason = ""
        self.final_state = JobState.CANCELLED
        self._deadline: float | None = None
        self._limit = ""
        self._limit_field = ""
        self._limit_state = JobState.CANCELLED

    def cancel(self, reason: str, final_state: JobState = JobState.CANCELLED) -> None:
        """Stop the job; it ends in ``final_state`` (FAILED when the service itself shuts down)."""
        if not self._event.is_set():
            self.reason = reason
            self.final_state = final_state
            self._event.set()

    def start_clock(self, plan: ExecutionPlan) -> None:
        """From RUNNING on, the plan's run limit counts (default 7 days, as Google)."""
        limit = plan.run_limit or "604800s"
        self._limit, self._limit_field, self._limit_state = limit, plan.run_limit_field, plan.run_limit_state
        self._deadline = time.monotonic() + float(duration_seconds(limit))

    def should_stop(self) -> bool:
        if self._deadline is not None and time.monotonic() >= self._deadline:
            verb = "cancelled" if self._limit_state is JobState.CANCELLED else "failed"
            self.cancel(
                f"Job {verb}: it ran longer than {self._limit_field} ({self._limit}) "
                "and was stopped by the service.",
                self._limit_state,
            )
        return self._event.is_set()


@dataclass(frozen=True)
class ExecutionSettings:
    """Service-wide settings a job run needs."""

    storage_url: str | None
    poll_interval: float = 0.2
    capacity: RegionCapacity | None = None  # quotas, stockouts, Flex-Start, Spot: local/capacity.py
    public_url: str = ""  # the service's own URL: a failed job's message links its logs there
    engine: ContainerEngine | None = None  # runs custom containers (.containers); None: there is none
    prebuilt: PrebuiltImages | None = None  # package pools in their pre-built image (.prebuilt); None: never
    grpc_address: str = ""  # its gRPC face, ``host:port``: where a replica's gapic clients end up
    passing: PassThrough | None = None  # --pass-through-host: Google hosts passed with the developer's ADC
    pass_env: tuple[str, ...] = ()  # this machine's variables every replica gets on purpose (.host_env)
    machine_limits: bool = True  # each replica held to its machine's memory and vCPUs (.limits)


class JobExecution:
    """Runs one stored job in the calling thread."""

    def __init__(
        self,
        store: JobStore,
        envs: EnvironmentCache,
        settings: ExecutionSettings,
        project: str,
        job_id: str,
        control: JobControl,
    ) -> None:
        self.store = store
        self.envs = envs
        self.settings = settings
        self.project = project
        self.job_id = job_id
        self.control = control
        self.log = JobLog(store, project, job_id)
        self.dir = store.job_dir(project, job_id)
        # Read once, when the job starts: every replica and trial gets the same, and the log says it.
        self.host_env = PassedEnv.of(settings.pass_env, os.environ)

    def _transition(self, state: JobState, **fields: Any) -> bool:
        """Move to ``state`` unless the job is already cancelling or over; True if it moved."""
        moved = False

        def change(job: dict[str, Any]) -> None:
            nonlocal moved
            current = JobState.parse(job.get("state"))
            if current.is_terminal or (current is JobState.CANCELLING and state is not JobState.CANCELLED):
                return
            job["state"] = state.value
            job.pop("jobPosition", None)
            job.update(fields)
            moved = True

        self.store.update(self.project, self.job_id, change)
        if moved:
            self.log.service(f"Job state: {state.value}")
        return moved

    def _finish(self, state: JobState, error_message: str = "", **extra: Any) -> None:
        if state is JobState.CANCELLED:
            self._transition(JobState.CANCELLING)
        if self.settings.capacity is not None:  # its machines are free before anyone reads its end
            self.settings.capacity.release((self.project, self.job_id))
        fields: dict[str, Any] = {"endTime": rfc3339(), **extra}
        if error_message:
            fields["errorMessage"] = error_message
            self.log.service(error_message, severity="ERROR" if state is JobState.FAILED else "WARNING")
        self._transition(state, **fields)
        self.store.set_processes(self.project, self.job_id, [])

    def _refused(self, host: str, why: str) -> None:
        """A replica's call to a Google host was refused: said once per host, as a warning."""
        self.log.service(f"A replica's HTTPS was refused: {why}.", severity="WARNING")

    def _passed(self, host: str, request: str) -> None:
        """A replica's request to a host named by --pass-through-host: each one, in the job's log."""
        self.log.service(
            f"Passed to Google with the developer's credentials (not the job's service account): {request}",
        )

    def _cancelled(self) -> None:
        self._finish(self.control.final_state, self.control.reason)

    def run(self) -> None:
        """Never raises: whatever happens ends as a job state with a message."""
        try:
            self._run()
        except Exception as exc:
            self.log.service(traceback.format_exc(), severity="ERROR")
            self._finish(JobState.FAILED, f"Internal error in the local training service: {exc!r}")

    def _wait_expired(self, job: dict[str, Any], plan: ExecutionPlan) -> bool:
        limit = plan.max_wait_time
        if not limit:
            return False
        waited = now() - parse_rfc3339(job["createTime"])
        if waited <= timedelta(seconds=float(duration_seconds(limit))):
            return False
        self.control.cancel(
            f"Job cancelled: it did not start running within scheduling.maxWaitTime ({limit})."
        )
        return True

    def _run(self) -> None:
        job = self.store.get(self.project, self.job_id)
        plan = execution_plan(self.project, job)
        if self._wait_expired(job, plan) or self.control.should_stop():
            return self._cancelled()
        if not self._transition(JobState.PREPARING, startTime=rfc3339()):
            return self._cancelled()
        gate = Provisioning(self.settings.capacity, job, self.store, self.log, self.settings.poll_interval)
        failure = gate.before_start(self.control.should_stop)  # Flex-Start wait, stockout
        if failure is not None:
            return self._finish(JobState.FAILED, failure[0], **failure[1])
        if self.control.should_stop():
            return self._cancelled()
        prepared = self._prepare(plan)
        if prepared is None:
            return None
        plan, pythons = prepared
        if self._wait_expired(job, plan) or self.control.should_stop():
            return self._cancelled()
        running_since = {plan.running_since_field: rfc3339()} if plan.running_since_field else {}
        if not self._transition(JobState.RUNNING, **running_since):
            return self._cancelled()
        self.control.start_clock(plan)
        # The job's metadata server and proxy live as long as its replicas; their variables join theirs.
        trainer_io = TrainerIO(
            plan,
            self.dir,
            self.settings.public_url,
            self.settings.storage_url,
            self._refused,
            self.store.data_dir / "egress",
            self.settings.grpc_address,
            self.settings.passing,
            self._passed,
        )
        with trainer_io:
            plan = dataclasses.replace(plan, extra_env=(*plan.extra_env, *trainer_io.env()))
            if plan.tuning is not None:
                return self._tune(plan, pythons, gate)
            return self._train(plan, pythons, gate)

    def _prepare(self, plan: ExecutionPlan) -> tuple[ExecutionPlan, dict[str, Path]] | None:
        """The plan as it runs (package pools in their pre-built image where it can be had) and each
        process pool's Python, saying in the log what differs from Vertex; None once the job ended.

        A custom container's image is pulled here, before RUNNING; a pull failure fails the job.
        A package pool's image that cannot be had is no failure: the pool runs in its environment.
        """
        for note in plan.notes:
            self.log.service(note)
        downloaded = self._download(plan)
        if downloaded is None:
            return None
        plan, paths = choose_paths(plan, self.settings.prebuilt, downloaded, self.dir / "packages")
        for note in paths:
            self.log.service(note)
        unmountable = mount_unavailable() if plan.gcs_mount else None
        if plan.gcs_mount and plan.images and self.settings.engine is not None and unmountable is None:
            unmountable = self.settings.engine.gcs_unavailable()
        processes = any(not p.image_uri for p in plan.pools)
        shared_tmp = private_tmp_unavailable() if plan.tuning is not None and processes else None
        gpus = accelerator_notes(plan.pools, self.settings.engine) + self._machine_notes(plan)
        shared_network = shared_network_note(plan.pools, self.settings.engine)
        for note in [
            self.host_env.note(),
            *(n for n in (unmountable, shared_tmp, shared_network) if n),
            *gpus,
        ]:
            self.log.service(note)
        if plan.images and not self._pull(plan.images):
            return None
        pythons: dict[str, Path] = {}
        for uris in plan.package_sets:
            pools = [p.cluster_key for p in plan.pools if not p.image_uri and p.package_uris == uris]
            env = self._environment(plan, [downloaded[u] for u in uris], pools)
            if env is None:
                return None
            pythons.update(dict.fromkeys(pools, env.python))
        return plan, pythons

    def _machine_notes(self, plan: ExecutionPlan) -> list[str]:
        """How each pool's replicas are held to their machine (:mod:`.limits`), or that none is."""
        if not self.settings.machine_limits:
            return ["Machine sizes are not enforced (aip-local serve --machine-limits off)"]
        pools = [
            (p.cluster_key, p.machine_type, bool(p.image_uri and self.settings.engine)) for p in plan.pools
        ]
        return pool_notes(pools, this_machine_cgroups(), host_cpus(), host_memory())

    def _download(self, plan: ExecutionPlan) -> dict[str, Path] | None:
        """Every pool's packages, each URI once: ``uri -> file``; None once the job failed."""
        uris = list(dict.fromkeys(u for p in plan.pools for u in p.package_uris))
        if not uris:
            return {}
        try:
            paths = download_packages(uris, self.dir / "packages", self.settings.storage_url)
        except PreparationError as exc:
            self._preparation_failed(exc)
            return None
        self.log.service(f"Downloaded {len(paths)} package(s): {', '.join(uris)}")
        return dict(zip(uris, paths, strict=True))

    def _preparation_failed(self, exc: PreparationError) -> None:
        """A download or an environment that failed: the job fails, unless a cancel caused it."""
        if self.control.should_stop():
            self._cancelled()
        else:
            self._finish(JobState.FAILED, f"Preparing the job failed: {exc}")

    def _pull(self, images: tuple[str, ...]) -> bool:
        """Every image the engine will run, pulled unless it has it; False once the job failed.

        [U] unverified: Vertex AI's message and error code when a replica's image cannot be pulled.
        """
        engine = self.settings.engine
        for image in images:
            try:
                if engine is None:
                    raise ImagePullError("no container engine (podman or docker) runs on this machine")
                pulled = engine.ensure_image(image)
            except ImagePullError as exc:
                self._finish(JobState.FAILED, f"Unable to pull the container image {image}: {exc}")
                return False
            self.log.service(f"Image {image} {'pulled' if pulled else 'found locally'} ({engine.name})")
        return True

    def _environment(self, plan: ExecutionPlan, packages: list[Path], pools: list[str]) -> Environment | None:
        """The environment of one set of packages (the pools installing just these); None once failed."""
        whose = ", ".join(pools)
        try:
            pip = PipOutput(f"{self.project}/{self.job_id}")
            env = self.envs.prepare(packages, pip, self.control.should_stop, plan.runtime)
        except PreparationError as exc:
            self._preparation_failed(exc)
            return None
        for note in env.notes:
            self.log.service(note)
        if env.cache_hit:
            self.log.service(f"Package environment {env.key} of {whose} reused from the cache (cache hit)")
        else:
            self.log.service(f"Package environment {env.key} of {whose} built (cache miss): {pip.summary()}")
        return env

    def _spec(
        self, plan: ExecutionPlan, pythons: dict[str, Path], trial: str | None, hp: dict[str, str] | None
    ) -> AttemptSpec:
        work = self.dir / "work" / (f"trial-{trial}" if trial else "job")
        base = self.settings.public_url
        link = logs_url(base, self.project, self.job_id) if base else ""
        engine, project, python = self.settings.engine, self.project, Path(sys.executable)
        return AttemptSpec(
            plan,
            python,
            work,
            self.settings.storage_url,
            trial,
            hp,
            link,
            engine,
            project,
            pythons,
            host_env=self.host_env.values,
            machine_limits=self.settings.machine_limits,
        )

    def _train(self, plan: ExecutionPlan, pythons: dict[str, Path], gate: Provisioning | None = None) -> None:
        attempt = Attempt(self._spec(plan, pythons, None, None), self.log.replica)
        self.store.set_processes(self.project, self.job_id, attempt.refs())
        spot = gate.spot_watch(self.job_id) if gate is not None else None
        while (outcome := attempt.poll()) is None:
            if self.control.should_stop():
                attempt.stop()
                return self._cancelled()
            if spot is not None and spot.due():  # Spot VMs reclaimed: restart, or fail past the limit
                attempt.stop()
                failure = spot.preempted(attempt.primary, len(attempt.processes))
                if failure is not None:
                    return self._finish(JobState.FAILED, failure[0], **failure[1])
                attempt = Attempt(self._spec(plan, pythons, None, None), self.log.replica)
                self.store.set_processes(self.project, self.job_id, attempt.refs())
            time.sleep(self.settings.poll_interval)
        for note in outcome.notes:
            self.log.service(note)
        if outcome.succeeded:
            return self._finish(JobState.SUCCEEDED)
        return self._finish(JobState.FAILED, self._failure_message(attempt, outcome))

    @staticmethod
    def _failure_message(attempt: Attempt, outcome: AttemptOutcome) -> str:
        """The trainer's failure in Google's words, or the platform's own when ``/gcs/`` was never mounted."""
        unmounted = mount_failure(attempt.spec.work_dir / outcome.task)
        if unmounted is None:
            return outcome.error_message()
        link = outcome.logs_url
        return f"{unmounted}." + (f" To find out more please check the logs: {link}" if link else "")

    def _tune(self, plan: ExecutionPlan, pythons: dict[str, Path], gate: Provisioning | None = None) -> None:
        spec, tag = plan.tuning or {}, plan.metric_tag

        def start(trial_id: str, hp: dict[str, str]) -> Attempt:
            return Attempt(self._spec(plan, pythons, trial_id, hp), self.log.replica)

        def publish(output: dict[str, Any]) -> None:
            self.store.update(self.project, self.job_id, lambda job: job.update(trainingOutput=output))

        def track(processes: list[dict[str, int]]) -> None:
            self.store.set_processes(self.project, self.job_id, processes)

        try:
            run = TuningRun(
                spec,
                tag,
                f"{self.project}/{self.job_id}",
                start,
                publish,
                track,
                self.log,
                plan.trial_limit,
                gate,
            )
        except ValueError as exc:
            return self._finish(JobState.FAILED, f"Hyperparameter search cannot start: {exc}")
        state, message = run.run(self.control.should_stop, self.settings.poll_interval)
        if state is JobState.CANCELLED:
            return self._cancelled()
        return self._finish(state, message, **run.error_fields)

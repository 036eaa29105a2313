"""Run one training attempt (a whole job, or one tuning trial) as the real service runs it.

Each replica of every pool of the :class:`~.plans.ExecutionPlan` (ml v1's master, workers,
parameter servers and evaluators; Vertex's workerpool0..3) is ``python -m <module> <args>
[--name=value ...] [--job-dir <jobDir>]`` in a fresh working directory, with the environment
the service sets: the cluster's variables (CLUSTER_SPEC; TF_CONFIG and PyTorch's rendezvous on
distributed jobs, :mod:`.cluster_env`), CLOUD_ML_JOB_ID (a Vertex trial's is its own CustomJob's:
:func:`.plans.trial_job_id`), CLOUD_ML_PROJECT_ID, CLOUD_ML_TRIAL_ID for trials,
STORAGE_EMULATOR_HOST (so the trainer's own Cloud Storage calls reach the emulator), AIP_MODEL_DIR
/ AIP_CHECKPOINT_DIR / AIP_TENSORBOARD_LOG_DIR under the output directory, and the pool's own
``env``. A process replica inherits nothing of the service's environment: it starts from what its
image would hold and what ``--pass-env`` passes (:mod:`.host_env`), and sees exactly the GPUs it
leased for its pool (``CUDA_VISIBLE_DEVICES``, :mod:`.accelerators`). Each replica has a private
``/tmp/hypertune`` and ``TMPDIR`` (:mod:`.private_tmp`): cloudml-hypertune's reports and a direct
write to ``/tmp/hypertune/output.metrics`` both land where this replica's metrics are read. A
Vertex AI replica also sees Cloud Storage at ``/gcs/`` (:mod:`.gcs_mount`). A custom container's
replica runs in its image (:mod:`.containers`) with the same variables (passed by name), as does
a package pool run in its pre-built image (:mod:`.prebuilt`); one that asks for GPUs gets the
same lease of this machine's GPUs a process would, as devices its engine passes by index
(:mod:`.accelerators`); when every pool runs in a container, each replica is a host of its own
named as in ``CLUSTER_SPEC``, ``workerpoolN-i:2222`` (:mod:`.replica_network`). A process replica
runs its own pool's environment (``AttemptSpec.pythons``).
Each replica is held to its machine type's memory and vCPUs (:mod:`.limits`); a process replica
killed past its memory fails the attempt in Google's words (a container's kill cannot be told from
another SIGKILL: its exit status).

As on the real service, the primary replica's exit decides: when it ends, the other replicas
are stopped; a replica that fails first fails the attempt.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from airflow_aip.local import trainer_site
from airflow_aip.local.executor import private_tmp
from airflow_aip.local.executor.accelerators import (
    GpuLedger,
    engine_gpus,
    gpu_count,
    gpu_devices,
    machine_ledger,
    visible_devices,
)
from airflow_aip.local.executor.cluster_env import ClusterLayout
from airflow_aip.local.executor.containers import CA_VARIABLES, HOST_ONLY, SITE_MOUNT, ContainerEngine
from airflow_aip.local.executor.gcs_mount import (
    MOUNT_POINT,
    mount_unavailable,
    unmount_left_over,
    with_gcs_mount,
)
from airflow_aip.local.executor.host_env import image_env
from airflow_aip.local.executor.limits import (
    MemoryUse,
    ReplicaLimit,
    container_limits,
    gigabytes,
    host_cpus,
    machine_size,
    this_machine_cgroups,
)
from airflow_aip.local.executor.plans import ExecutionPlan, PoolPlan, snake_case_keys
from airflow_aip.local.executor.processes import ManagedProcess
from airflow_aip.local.executor.replica_network import ReplicaNetwork, networked
from airflow_aip.local.ports import free_port

__all__ = [
    "Attempt",
    "AttemptOutcome",
    "AttemptSpec",
    "expand_env_value",
    "logs_url",
    "output_dirs",
    "python_traceback",
    "snake_case_keys",
]

_SITE_DIR = str(Path(trainer_site.__file__).resolve().parent)
# (task name, trial id or None, stream, line)
ReplicaLog = Callable[[str, str | None, str, str], None]
# Variables of the service a container engine's CLI must not pass on (a process replica inherits nothing).
_NOT_INHERITED = (
    "PYTHONPATH",
    "PYTHONHOME",
    "VIRTUAL_ENV",
    "CLOUDSDK_API_ENDPOINT_OVERRIDES_ML",
    "CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM",
    # Vertex does not set it (python-aiplatform initializer.py: "...or Vertex AI starts setting
    # GOOGLE_CLOUD_PROJECT env variable"): a trainer's Cloud clients must not find ours.
    "GOOGLE_CLOUD_PROJECT",
    # Nor these: a trainer's credentials and project come from its metadata server (.trainer_io).
    "GCLOUD_PROJECT",
    "GOOGLE_APPLICATION_CREDENTIALS",
)


_ENV_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def expand_env_value(value: str, env: Mapping[str, str]) -> str:
    """Vertex's ``EnvVar.value``: ``$(NAME)`` takes a variable defined before it (or by the service);
    an unknown reference stays as written, and ``$$`` is a literal ``$`` (so ``$$(NAME)`` escapes).
    """

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env[name] if name in env else match.group(0)

    return _ENV_REFERENCE.sub(replace, value)


def output_dirs(job_dir: str | None, trial_id: str | None) -> dict[str, str]:
    """AIP_* directories under the output base (``<base>/<trial>/`` for a trial), as Vertex lays them out."""
    if not job_dir:
        return {}
    base = job_dir.rstrip("/") + "/" + (f"{trial_id}/" if trial_id else "")
    return {
        "AIP_MODEL_DIR": base + "model/",
        "AIP_CHECKPOINT_DIR": base + "checkpoints/",
        "AIP_TENSORBOARD_LOG_DIR": base + "logs/",
    }


@dataclass(frozen=True)
class AttemptSpec:
    """What one attempt needs; ``trial_id`` and ``hyperparameters`` only for tuning trials."""

    plan: ExecutionPlan
    python: Path
    work_dir: Path
    storage_url: str | None
    trial_id: str | None = None
    hyperparameters: Mapping[str, str] | None = None
    logs_url: str = ""  # where a failed job's error message sends the reader (:func:`logs_url`)
    engine: ContainerEngine | None = None  # runs the pools that name an image
    project: str = ""  # the job's, as the service stores it (names and labels its containers)
    # A process pool's own environment's Python, by cluster key (each pool installs its own packages);
    # a pool not listed runs ``python``.
    pythons: Mapping[str, Path] | None = None
    # This machine's variables passed on purpose (``aip-local serve --pass-env``: :mod:`.host_env`).
    host_env: Mapping[str, str] = field(default_factory=dict)
    gpus: GpuLedger | None = None  # whose GPUs replicas lease (None: this machine's)
    machine_limits: bool = False  # hold each replica to its machine's memory and vCPUs (.limits)


def logs_url(base: str, project: str, job_id: str) -> str:
    """The job's logs, linked as Google's error messages link them (on this service's host).

    Google's: ``https://console.cloud.google.com/logs/viewer?project=<number>&resource=ml_job%2Fjob_id%2F<id>
    &advancedFilter=resource.type%3D%22ml_job%22%0Aresource.labels.job_id%3D%22<id>%22`` [O two real
    jobs' messages, AI Platform 2020 and Vertex AI 2026]. Locally the same path and query, on the
    local service, which redirects it to the job's page (:mod:`airflow_aip.local.api`).
    """
    query = (
        f"project={project}&resource=ml_job%2Fjob_id%2F{job_id}&advancedFilter="
        f"resource.type%3D%22ml_job%22%0Aresource.labels.job_id%3D%22{job_id}%22"
    )
    return f"{base.rstrip('/')}/logs/viewer?{query}"


_TRACEBACK = "Traceback (most recent call last):"


def python_traceback(stderr_tail: str) -> str:
    """The Python traceback that ends the replica's stderr, or ``""``: what Google's message carries of it."""
    lines = stderr_tail.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(_TRACEBACK)]
    return "\n".join(lines[starts[0] :]).rstrip() if starts else ""


@dataclass(frozen=True)
class AttemptOutcome:
    """How an attempt ended: ``task`` is the replica that decided it."""

    exit_code: int
    task: str
    stderr_tail: str
    logs_url: str = ""
    memory: MemoryUse | None = None  # the deciding replica's, where its machine's memory held it
    notes: tuple[str, ...] = ()  # for the job's log: each held replica's peak memory (.limits)

    @property
    def succeeded(self) -> bool:
        return self.exit_code == 0

    def error_message(self) -> str:
        """In the real service's words: which replica, which status, its traceback, where its logs are.

        AI Platform said "The replica master 0 exited ..."; Vertex says "The replica workerpool0-0 ...".
        Two real messages [O] show the form: with a Python traceback, "The replica workerpool0-0 exited
        with a non-zero status of 1. Termination reason: Error. \nTraceback ...\n\nTo find out more
        about why your job exited please check the logs: <link>"; without one, the status sentence
        and the link only. The rest of the stderr (warnings, prints) is in the job's log only, never
        in the message. [U] unverified: the wording for a replica killed by a signal.
        """
        role, legacy, index = self.task.partition("-replica-")
        replica = f"{role} {index}" if legacy else self.task
        if self.memory is not None and self.memory.killed:
            return self._out_of_memory(replica)
        if self.exit_code < 0:
            status = f"was terminated by signal {-self.exit_code}"
        else:
            status = f"exited with a non-zero status of {self.exit_code}"
        traceback = python_traceback(self.stderr_tail)
        message = f"The replica {replica} {status}."
        if traceback:
            message += f" Termination reason: Error. \n{traceback}\n\n"
        if self.logs_url:
            message += ("" if traceback else " ") + (
                f"To find out more about why your job exited please check the logs: {self.logs_url}"
            )
        return message.rstrip()

    def _out_of_memory(self, replica: str) -> str:
        """Killed past its machine's memory: Google's words [O] "The replica master 0 ran out-of-memory
        and exited with a non-zero status of 9(SIGKILL)" (AI Platform jobs in tensorflow/models#5591
        and #9352); [U] unverified: the same words on Vertex AI, with its replica names. Then its peak
        against the machine's (ours), then the logs link."""
        status = "9(SIGKILL)" if self.exit_code == -9 else str(abs(self.exit_code))
        message = f"The replica {replica} ran out-of-memory and exited with a non-zero status of {status}."
        if self.memory is not None and self.memory.peak is not None:
            size = self.memory.size
            message += (
                f" Its peak memory was {gigabytes(self.memory.peak)}, of the {size.memory} of its "
                f"{size.machine_type} machine."
            )
        if self.logs_url:
            message += f" To find out more about why your job exited please check the logs: {self.logs_url}"
        return message


def _replica_network(spec: AttemptSpec) -> ReplicaNetwork | None:
    """The attempt's own network when every pool is a container (:mod:`.replica_network`), else None."""
    if spec.engine is None or not networked(spec.plan.pools, spec.engine):
        return None
    return ReplicaNetwork(spec.engine, f"{spec.project}/{spec.plan.job_id}", spec.trial_id, spec.plan.pools)


class Attempt:
    """All replicas of one attempt, started at construction."""

    def __init__(self, spec: AttemptSpec, log: ReplicaLog) -> None:
        self.spec = spec
        pools = spec.plan.pools
        self.primary = pools[0].task_name(0)
        self.network = _replica_network(spec)
        hosts = {p.cluster_key: [f"127.0.0.1:{free_port()}" for _ in range(p.count)] for p in pools}
        if self.network is not None:  # each replica its own host, named as in CLUSTER_SPEC
            hosts = self.network.hosts
        self._cluster = ClusterLayout(pools, hosts, spec.plan.job_json, spec.plan.tf_config_always)
        self._ledger = spec.gpus  # this machine's, read when a replica first asks for a GPU
        self._leases: list[tuple[int, ...]] = []
        self.processes: dict[str, ManagedProcess] = {}
        self.containers: list[str] = []
        self.limits: dict[str, ReplicaLimit] = {}  # the process replicas held to their machine
        try:
            for pool in pools:
                for index in range(pool.count):
                    self._start(pool, index, log)
        except BaseException:
            self.stop()
            raise

    @property
    def master_metric_file(self) -> Path:
        """Where the primary replica's metric reports land (cloudml-hypertune's, or written directly)."""
        return private_tmp.metric_file(self._private_dir(self.primary))

    def _private_dir(self, task_name: str) -> Path:
        """The replica's own ``/tmp/hypertune`` and temporary directory (beside its work dir, not in it)."""
        return self.spec.work_dir / "private" / task_name

    def _start(self, pool: PoolPlan, index: int, log: ReplicaLog) -> None:
        spec, plan = self.spec, self.spec.plan
        task_name = pool.task_name(index)
        cwd = spec.work_dir / task_name
        if cwd.exists():
            shutil.rmtree(cwd)
        cwd.mkdir(parents=True)
        private = self._private_dir(task_name)
        args = [*pool.args, *(f"--{name}={value}" for name, value in (spec.hyperparameters or {}).items())]
        if plan.job_dir_arg:
            args += ["--job-dir", plan.job_dir_arg]
        if pool.image_uri:
            env = self._replica_env(pool, index, private, dict(spec.host_env))
            if self.network is not None:
                env = self.network.replica_env(env)
            argv = self._container_argv(pool, task_name, env, args, private)
            if self._container_gcs():  # the container's /gcs/ is bound from this mount namespace's
                at = self._gcs_dir(task_name)  # or, on a network of its own, from a directory of its own
                argv = with_gcs_mount(argv, spec.storage_url, cwd / "gcs-mount.log", at=at)
            # The engine's CLI runs with this machine's environment; the container gets ``env`` only.
            process_env = {**{k: v for k, v in os.environ.items() if k not in _NOT_INHERITED}, **env}
        else:
            python = (spec.pythons or {}).get(pool.cluster_key, spec.python)
            gpus = self._lease(pool)
            base = {**image_env(python, cwd), **spec.host_env, **visible_devices(gpus)}
            process_env = env = self._replica_env(pool, index, private, base)
            argv = self._held(pool, task_name, [str(python), "-m", pool.python_module, *args])
            if plan.gcs_mount:
                argv = with_gcs_mount(argv, spec.storage_url, cwd / "gcs-mount.log")
            argv = private_tmp.with_private_tmp(argv, private)

        def sink(stream: str, line: str) -> None:
            log(task_name, spec.trial_id, stream, line)

        self.processes[task_name] = ManagedProcess(argv, cwd=cwd, env=process_env, sink=sink)

    def _lease(self, pool: PoolPlan) -> tuple[int, ...]:
        """This machine's GPUs a replica of ``pool`` gets (none for a CPU or TPU pool), held until
        :meth:`stop`: a process sees them as ``CUDA_VISIBLE_DEVICES``, a container as its devices."""
        count = gpu_count(pool.accelerators)
        if not count:
            return ()
        if self._ledger is None:
            self._ledger = machine_ledger()
        gpus = self._ledger.lease(count)
        self._leases.append(gpus)
        return gpus

    def _held(self, pool: PoolPlan, task_name: str, argv: list[str]) -> list[str]:
        """The trainer's own argv, inside what holds it to its machine (:mod:`.limits`)."""
        size = machine_size(pool.machine_type) if self.spec.machine_limits else None
        if size is None:
            return argv
        name = f"{self.spec.project}-{self.spec.plan.job_id}-{task_name}-{self.spec.trial_id or ''}"
        limit = ReplicaLimit(size, this_machine_cgroups(), name, host_cpus())
        self.limits[task_name] = limit
        return limit.wrap(argv)

    def _replica_env(
        self, pool: PoolPlan, index: int, private: Path, base: Mapping[str, str]
    ) -> dict[str, str]:
        """What the service sets for one replica over ``base`` (a container gets exactly these, by name)."""
        spec, plan = self.spec, self.spec.plan
        env: dict[str, str] = dict(
            base,
            PYTHONUNBUFFERED="1",
            CLOUD_ML_JOB_ID=plan.job_id_of(spec.trial_id),
            CLOUD_ML_PROJECT_ID=plan.project_env,
            **self._cluster.variables(pool, index, spec.trial_id),
            **output_dirs(plan.output_base, spec.trial_id),
        )
        env.update(private_tmp.prepare(private))
        env.update(plan.extra_env)
        if pool.image_uri:  # this machine's paths mean nothing in the image
            env = {k: v for k, v in env.items() if k not in HOST_ONLY}
            env["PYTHONPATH"] = self._image_pythonpath(pool.image_uri)
        for name, value in pool.env:
            env[name] = expand_env_value(value, env)
        if pool.image_uri and not env["PYTHONPATH"].startswith(SITE_MOUNT):  # the pool's env set its own
            env["PYTHONPATH"] = f"{SITE_MOUNT}:{env['PYTHONPATH']}".rstrip(":")
        if spec.storage_url:
            env["STORAGE_EMULATOR_HOST"] = spec.storage_url
        if spec.trial_id:
            env["CLOUD_ML_TRIAL_ID"] = spec.trial_id
        return env

    def _image_pythonpath(self, image: str) -> str:
        """The Vertex AI SDK's redirection (bound read-only), then the image's own ``PYTHONPATH``."""
        engine = self.spec.engine
        own = engine.image_env(image).get("PYTHONPATH", "") if engine is not None else ""
        return f"{SITE_MOUNT}:{own}" if own else SITE_MOUNT

    def _container_argv(
        self, pool: PoolPlan, task_name: str, env: Mapping[str, str], args: Sequence[str], private: Path
    ) -> list[str]:
        """``<engine> run`` of one replica in its pool's image, its variables passed by name."""
        spec, plan = self.spec, self.spec.plan
        if spec.engine is None:
            raise RuntimeError("a pool names an image, but the service has no container engine")
        mounts = {
            str(private_tmp.metric_file(private).parent): "/tmp/hypertune",
            _SITE_DIR: f"{SITE_MOUNT}:ro",
        }
        mounts.update({env[name]: f"{env[name]}:ro" for name in CA_VARIABLES if env.get(name)})
        if self._container_gcs():
            mounts[str(self._gcs_dir(task_name) or MOUNT_POINT)] = str(MOUNT_POINT)
        mounts.update(dict(pool.mounts))
        engine = spec.engine
        name = engine.container_name(spec.project, plan.job_id, task_name, spec.trial_id)
        self.containers.append(name)
        job = f"{spec.project}/{plan.job_id}"
        devices: list[str] = []
        if gpu_count(pool.accelerators):  # the same lease a process would get, as host indices
            access = engine_gpus(engine.name, engine.binary)
            devices = gpu_devices(access, self._lease(pool) if access.passed else ())
        size = machine_size(pool.machine_type) if spec.machine_limits else None
        devices += container_limits(size, host_cpus())
        network = self.network.run_flags(task_name) if self.network is not None else ()
        return engine.run_argv(
            name, job, pool.image_uri, pool.command, args, sorted(env), mounts, devices, network
        )

    def _gcs_dir(self, task_name: str) -> Path | None:
        """Where a container replica on a network of its own gets Cloud Storage mounted (None: at
        ``/gcs`` in a mount namespace of its own, as a process replica)."""
        return self.spec.work_dir / task_name / "gcs" if self.network is not None else None

    def _container_gcs(self) -> bool:
        """Whether a container replica gets ``/gcs/``: a Vertex AI job, mountable here, on podman."""
        spec = self.spec
        if not (spec.plan.gcs_mount and spec.storage_url and mount_unavailable() is None):
            return False
        return spec.engine is not None and spec.engine.gcs_unavailable() is None

    def refs(self) -> list[dict[str, int]]:
        return [p.ref() for p in self.processes.values()]

    def poll(self) -> AttemptOutcome | None:
        """The outcome once the primary replica exits or another replica fails; None while running."""
        for name, limit in self.limits.items():  # the watchdog, where no cgroup holds the replica
            limit.check(self.processes[name].pid)
        master = self.processes[self.primary]
        code = master.poll()
        if code is not None:
            self.stop()
            return self._outcome(code, self.primary)
        for name, process in self.processes.items():
            other = process.poll()
            if other not in (None, 0):
                self.stop()
                return self._outcome(other, name)
        return None

    def _outcome(self, code: int, name: str) -> AttemptOutcome:
        limit = self.limits.get(name)
        memory = limit.finish() if limit is not None else None
        tail, notes = self.processes[name].stderr_tail(), tuple(self.memory_notes())
        return AttemptOutcome(code, name, tail, self.spec.logs_url, memory, notes)

    def memory_notes(self) -> list[str]:
        """Each held replica's peak memory against its machine's (the log's lines, once it ended)."""
        return [limit.finish().note(name) for name, limit in self.limits.items()]

    def stop(self) -> None:
        """Containers first (the engine stops them; their clients then exit), then the processes;
        then their GPUs are free for others."""
        if self.spec.engine is not None:
            for name in self.containers:
                self.spec.engine.remove(name)
        for process in self.processes.values():
            process.stop()
        if self.network is not None:  # a container replica's /gcs/ is mounted here: see it gone
            unmount_left_over(self.spec.work_dir)
        for limit in self.limits.values():  # its processes are gone: its groups can go
            limit.finish()
        leases, self._leases = self._leases, []
        for gpus in leases:
            if self._ledger is not None:
                self._ledger.release(gpus)
        if self.network is not None:
            self.network.remove()
            self.network = None

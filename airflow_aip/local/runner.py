"""Run one training attempt (a whole job, or one tuning trial) as the real service runs it.

Each replica of the cluster (master, workers, parameter servers, evaluators of a CUSTOM
scale tier; the master alone otherwise) is ``python -m <pythonModule> <args> [--name=value
...] --job-dir <jobDir>`` in a fresh working directory, with the environment the service
sets: TF_CONFIG and CLUSTER_SPEC (cluster, task incl. trial, job, environment "cloud"),
CLOUD_ML_JOB_ID, CLOUD_ML_PROJECT_ID, CLOUD_ML_TRIAL_ID and CLOUD_ML_HP_METRIC_FILE for
trials, STORAGE_EMULATOR_HOST (so the trainer's own Cloud Storage calls reach the emulator)
and AIP_MODEL_DIR / AIP_CHECKPOINT_DIR / AIP_TENSORBOARD_LOG_DIR under jobDir.

As on the real service, the master's exit decides: when it ends, the other replicas are
stopped; a replica that fails first fails the attempt.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_aip.local.gcs import free_port
from airflow_aip.local.processes import ManagedProcess

# (task name, trial id or None, stream, line)
ReplicaLog = Callable[[str, str | None, str, str], None]
# Variables of the service process a trainer must not inherit.
_NOT_INHERITED = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CLOUDSDK_API_ENDPOINT_OVERRIDES_ML")
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")
_ROLES = (("master", "master"), ("worker", "worker"), ("ps", "parameterServer"), ("evaluator", "evaluator"))


def snake_case_keys(value: Any) -> Any:
    """TF_CONFIG's ``job`` uses the proto field names (``package_uris``), not JSON's camelCase."""
    if isinstance(value, Mapping):
        return {_CAMEL.sub("_", str(k)).lower(): snake_case_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [snake_case_keys(v) for v in value]
    return value


def replica_counts(training_input: Mapping[str, Any]) -> dict[str, int]:
    """``{"master": 1, "worker": n, "ps": n, "evaluator": n}``; replica counts exist in CUSTOM only."""
    counts = {"master": 1}
    if training_input.get("scaleTier") == "CUSTOM":
        for role, field in _ROLES[1:]:
            count = int(training_input.get(f"{field}Count", "0") or 0)
            if count:
                counts[role] = count
    return counts


def output_dirs(job_dir: str | None, trial_id: str | None) -> dict[str, str]:
    """AIP_* directories under jobDir (under ``jobDir/<trial>/`` for a trial), as Vertex lays them out."""
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

    project: str
    job_id: str
    training_input: Mapping[str, Any]
    python: Path
    work_dir: Path
    storage_url: str | None
    trial_id: str | None = None
    hyperparameters: Mapping[str, str] | None = None


@dataclass(frozen=True)
class AttemptOutcome:
    """How an attempt ended: ``task`` is the replica that decided it."""

    exit_code: int
    task: str
    stderr_tail: str

    @property
    def succeeded(self) -> bool:
        return self.exit_code == 0

    def error_message(self) -> str:
        """Like the real service: which replica, which status, then the end of its stderr."""
        role, _, index = self.task.partition("-replica-")
        if self.exit_code < 0:
            status = f"was terminated by signal {-self.exit_code}"
        else:
            status = f"exited with a non-zero status of {self.exit_code}"
        tail = f"\n{self.stderr_tail}" if self.stderr_tail else ""
        return f"The replica {role} {index} {status}.{tail}"


class Attempt:
    """All replicas of one attempt, started at construction."""

    def __init__(self, spec: AttemptSpec, log: ReplicaLog) -> None:
        self.spec = spec
        ti = spec.training_input
        counts = replica_counts(ti)
        master_key = "chief" if ti.get("useChiefInTfConfig") else "master"
        cluster = {
            role: [f"127.0.0.1:{free_port()}" for _ in range(n)]
            for role, n in counts.items()
            if role != "evaluator"
        }
        tf_cluster = {master_key if role == "master" else role: hosts for role, hosts in cluster.items()}
        job = snake_case_keys(dict(ti))
        job["job_name"] = f"projects/{spec.project}/jobs/{spec.job_id}"
        self.processes: dict[str, ManagedProcess] = {}
        try:
            for role, n in counts.items():
                for index in range(n):
                    self._start(role, index, cluster, tf_cluster, master_key, job, log)
        except BaseException:
            self.stop()
            raise

    @property
    def master_metric_file(self) -> Path:
        return self.spec.work_dir / "master-replica-0" / "hypertune" / "output.metrics"

    def _start(
        self,
        role: str,
        index: int,
        cluster: Mapping[str, Sequence[str]],
        tf_cluster: Mapping[str, Sequence[str]],
        master_key: str,
        job: Mapping[str, Any],
        log: ReplicaLog,
    ) -> None:
        spec, ti = self.spec, self.spec.training_input
        task_name = f"{role}-replica-{index}"
        cwd = spec.work_dir / task_name
        if cwd.exists():
            shutil.rmtree(cwd)
        cwd.mkdir(parents=True)
        task: dict[str, Any] = {"type": role, "index": index}
        if spec.trial_id:
            task["trial"] = spec.trial_id
        tf_task = dict(task, type=master_key if role == "master" else role)
        env = {k: v for k, v in os.environ.items() if k not in _NOT_INHERITED}
        env.update(
            PYTHONUNBUFFERED="1",
            TF_CONFIG=json.dumps(
                {"cluster": tf_cluster, "task": tf_task, "job": job, "environment": "cloud"}
            ),
            CLUSTER_SPEC=json.dumps({"cluster": cluster, "task": task, "job": job, "environment": "cloud"}),
            CLOUD_ML_JOB_ID=spec.job_id,
            CLOUD_ML_PROJECT_ID=spec.project,
            GOOGLE_CLOUD_PROJECT=spec.project,
            **output_dirs(ti.get("jobDir"), spec.trial_id),
        )
        if spec.storage_url:
            env["STORAGE_EMULATOR_HOST"] = spec.storage_url
        if spec.trial_id:
            env["CLOUD_ML_TRIAL_ID"] = spec.trial_id
            env["CLOUD_ML_HP_METRIC_FILE"] = str(cwd / "hypertune" / "output.metrics")
        argv = [str(spec.python), "-m", str(ti["pythonModule"]), *ti.get("args", [])]
        argv += [f"--{name}={value}" for name, value in (spec.hyperparameters or {}).items()]
        if ti.get("jobDir"):
            argv += ["--job-dir", str(ti["jobDir"])]

        def sink(stream: str, line: str) -> None:
            log(task_name, spec.trial_id, stream, line)

        self.processes[task_name] = ManagedProcess(argv, cwd=cwd, env=env, sink=sink)

    def refs(self) -> list[dict[str, int]]:
        return [p.ref() for p in self.processes.values()]

    def poll(self) -> AttemptOutcome | None:
        """The outcome once the master exits or another replica fails; None while running."""
        master = self.processes["master-replica-0"]
        code = master.poll()
        if code is not None:
            self.stop()
            return AttemptOutcome(code, "master-replica-0", master.stderr_tail())
        for name, process in self.processes.items():
            other = process.poll()
            if other not in (None, 0):
                self.stop()
                return AttemptOutcome(other, name, process.stderr_tail())
        return None

    def stop(self) -> None:
        for process in self.processes.values():
            process.stop()

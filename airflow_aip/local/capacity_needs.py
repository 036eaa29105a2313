"""What one job asks of its region, read from its stored record (either API) for :mod:`.capacity`.

A Vertex AI job needs, per quota metric, replicas x accelerators of every worker pool that runs
(``custom_model_training_nvidia_t4_gpus``...) and replicas x vCPUs (``custom_model_training_cpus``;
[U] unverified: Google also has per-family CPU metrics), times ``parallelTrialCount`` for a tuning
job (its trials run at once); SPOT and FLEX_START draw on the ``preemptible`` twins, as Google's
Dynamic Workload Scheduler page says. Machine vCPUs and metric names come from the hardware table
(:mod:`airflow_aip.jobs.vertex.hardware`). An ml v1 job names only its machine and accelerator
types (for stockouts): AI Platform's quotas are not modelled here.

A pool whose ``machineSpec.reservationAffinity`` is SPECIFIC_RESERVATION also names its
reservations (``reservations``): a reservation listed as a stockout fails the job as a machine
type would (all its VMs taken). Only for stockouts: a reservation's VMs still count
against the project's quota here. ``values`` are reservation names or resource names
(``projects/p/zones/z/reservations/NAME``, or a block under it): the NAME is what is matched.
A job on specific reservations meets only their stockouts, not its machine type's: a
reservation's capacity is held for it, which is why a capacity ladder puts a reservation first.
[U] unverified: that Google never answers a stockout for a reserved machine.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_aip.exceptions import ValidationError

DEFAULT_MAX_WAIT_SECONDS = 24 * 3600.0  # Scheduling.maxWaitDuration: "The default is 24 hours."
_VERTEX_KINDS = ("customJobs", "hyperparameterTuningJobs")


@dataclass(frozen=True)
class Needs:
    """What one job asks of its region; ``amounts`` is empty for an ml v1 job (it has no quotas here)."""

    region: str
    amounts: Mapping[str, int] = field(default_factory=dict)
    hardware: frozenset[str] = frozenset()
    reservations: frozenset[str] = frozenset()  # SPECIFIC_RESERVATION names, matched for stockouts
    strategy: str = ""
    max_wait: float = DEFAULT_MAX_WAIT_SECONDS  # FLEX_START; 0: for ever
    restart_job: bool = False  # scheduling.restartJobOnWorkerRestart
    custom_job: bool = True
    vertex: bool = True  # False: an ml v1 job

    @property
    def flex_start(self) -> bool:
        return self.strategy == "FLEX_START"

    @property
    def spot(self) -> bool:
        return self.strategy == "SPOT"

    @property
    def stock_keys(self) -> frozenset[str]:
        """What a ``--stockout`` may name to stop this job: its reservations, else its machine types;
        and, for a Vertex AI job, its scheduling strategy (``SPOT``: the region has no Spot VMs to
        give, which is how a capacity ladder's Spot rung runs out while its STANDARD rung runs)."""
        strategy = {self.strategy or "STANDARD"} if self.vertex else set()
        return (self.reservations or self.hardware) | strategy


def seconds(duration: Any) -> float:
    """A proto3 JSON Duration (``"3.5s"``) in seconds."""
    return float(str(duration).removesuffix("s"))


def reservation_name(value: str) -> str:
    """``projects/p/zones/z/reservations/NAME`` (or ``.../NAME/reservationBlocks/B``, or ``NAME``) -> NAME."""
    parts = value.strip("/").split("/")
    if "reservations" in parts[:-1]:
        return parts[parts.index("reservations") + 1]
    return parts[-1]


def _reservations(machine: Mapping[str, Any]) -> set[str]:
    affinity = machine.get("reservationAffinity") or {}
    if affinity.get("reservationAffinityType") != "SPECIFIC_RESERVATION":
        return set()  # ANY_RESERVATION falls back to on-demand; NO_RESERVATION is on-demand
    return {reservation_name(str(value)) for value in affinity.get("values") or [] if value}


def _vertex_needs(record: Mapping[str, Any]) -> Needs:
    from airflow_aip.jobs.vertex.body import job_spec_of
    from airflow_aip.jobs.vertex.hardware import gpu_quota_resource, vcpus

    resource = record["resource"]
    custom = record.get("kind") == "customJobs"
    spec = job_spec_of(resource)
    scheduling = spec.get("scheduling") or {}
    strategy = str(scheduling.get("strategy") or "")
    preemptible = strategy in ("SPOT", "FLEX_START")
    times = 1 if custom else int(resource.get("parallelTrialCount") or 1)
    amounts: Counter[str] = Counter()
    hardware: set[str] = set()
    reservations: set[str] = set()
    for index, pool in enumerate(spec.get("workerPoolSpecs") or []):
        machine = pool.get("machineSpec") or {}
        replicas = int(pool.get("replicaCount", "1" if index == 0 else "0") or 0)
        if not replicas or not machine.get("machineType"):
            continue
        hardware.add(str(machine["machineType"]))
        reservations |= _reservations(machine)
        accelerator, count = machine.get("acceleratorType"), int(machine.get("acceleratorCount") or 0)
        try:
            amounts[gpu_quota_resource(None, preemptible=preemptible)] += (
                vcpus(machine["machineType"]) * replicas
            )
            if accelerator and count and accelerator != "ACCELERATOR_TYPE_UNSPECIFIED":
                hardware.add(str(accelerator))
                amounts[gpu_quota_resource(accelerator, preemptible=preemptible)] += count * replicas
        except ValidationError:  # not in the table: nothing to count (the create checks the table)
            continue
    wait = scheduling.get("maxWaitDuration")
    return Needs(
        region=str(record.get("location", "")),
        amounts={metric: amount * times for metric, amount in amounts.items()},
        hardware=frozenset(hardware),
        reservations=frozenset(reservations),
        strategy=strategy,
        max_wait=DEFAULT_MAX_WAIT_SECONDS if wait is None else seconds(wait),
        restart_job=bool(scheduling.get("restartJobOnWorkerRestart")),
        custom_job=custom,
    )


def _ml_needs(record: Mapping[str, Any]) -> Needs:
    """ml v1: the machine and accelerator types its replicas name (for stockouts; no quotas here)."""
    spec = record.get("trainingInput") or {}
    hardware: set[str] = set()
    for role in ("master", "worker", "parameterServer", "evaluator"):
        if spec.get(f"{role}Type"):
            hardware.add(str(spec[f"{role}Type"]))
        accelerator = ((spec.get(f"{role}Config") or {}).get("acceleratorConfig") or {}).get("type")
        if accelerator:
            hardware.add(str(accelerator))
    region = str(spec.get("region", ""))
    return Needs(region=region, hardware=frozenset(hardware), custom_job=False, vertex=False)


def needs_of(record: Mapping[str, Any]) -> Needs:
    """What a stored job (of either API) needs from its region."""
    if record.get("kind") in _VERTEX_KINDS:
        return _vertex_needs(record)
    return _ml_needs(record)

"""What a Vertex AI job bills for, read off its body or resource: the neutral ``usage`` of a job.

Vertex AI bills a custom job's worker pools: each pool's machine type, its accelerators and its
boot disk, per replica, for the time the job ran, at its scheduling strategy's rates (Spot and
Flex-Start have their own; a reservation's machines are paid for by the reservation). A tuning
job bills each trial as such a job, so its usage is one trial's, with the study's trial counts.

The cost model (:mod:`airflow_aip.jobs.cost`) reads this shape only, never a wire format:

- ``pools``: ``[{machine_type, accelerator_type, accelerator_count, replicas, disk_type, disk_gb}]``;
- ``strategy``: ``STANDARD``, ``SPOT`` or ``FLEX_START`` (Vertex's ``STRATEGY_UNSPECIFIED``,
  ``ON_DEMAND`` and ``LOW_COST`` bill as standard VMs);
- ``reserved``: the pools consume a reservation (any pool's ``reservationAffinity`` other than
  ``NO_RESERVATION``);
- ``timeout_seconds``: ``scheduling.timeout`` (Vertex's default: 7 days);
- ``max_trials``, ``parallel_trials``: a tuning job's (1 and 1 for a custom job).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_aip.jobs.vertex.body import job_spec_of

# [API] Scheduling.timeout: "The maximum job running time. The default is 7 days."
DEFAULT_TIMEOUT_SECONDS = 7 * 24 * 3600.0
# [API] DiskSpec: bootDiskType "Default is pd-ssd", bootDiskSizeGb "Default is 100GB".
DEFAULT_DISK_TYPE = "pd-ssd"
DEFAULT_DISK_GB = 100
_STANDARD = ("STRATEGY_UNSPECIFIED", "ON_DEMAND", "LOW_COST", "STANDARD")


def _seconds(value: object) -> float | None:
    try:
        return float(str(value).removesuffix("s"))
    except ValueError:
        return None


def _pool(pool: Mapping[str, Any]) -> dict[str, Any]:
    machine: Mapping[str, Any] = pool.get("machineSpec") or {}
    disk: Mapping[str, Any] = pool.get("diskSpec") or {}
    accelerator = machine.get("acceleratorType")
    if accelerator == "ACCELERATOR_TYPE_UNSPECIFIED":
        accelerator = None
    return {
        "machine_type": str(machine.get("machineType") or ""),
        "accelerator_type": str(accelerator) if accelerator else None,
        "accelerator_count": int(machine.get("acceleratorCount") or 0) if accelerator else 0,
        "replicas": int(pool.get("replicaCount") or 1),
        "disk_type": str(disk.get("bootDiskType") or DEFAULT_DISK_TYPE),
        "disk_gb": int(disk.get("bootDiskSizeGb") or DEFAULT_DISK_GB),
        "reserved": (machine.get("reservationAffinity") or {}).get("reservationAffinityType")
        not in (None, "NO_RESERVATION", "TYPE_UNSPECIFIED"),
    }


def usage_of(body: Mapping[str, Any]) -> dict[str, Any]:
    """The usage of a CustomJob or HyperparameterTuningJob body (or resource), as the module says."""
    spec = job_spec_of(body)
    pools = [_pool(pool) for pool in spec.get("workerPoolSpecs") or [] if pool]
    scheduling: Mapping[str, Any] = spec.get("scheduling") or {}
    strategy = str(scheduling.get("strategy") or "STANDARD")
    timeout = _seconds(scheduling["timeout"]) if scheduling.get("timeout") else None
    tuning = "studySpec" in body or "trialJobSpec" in body
    return {
        "pools": [{k: v for k, v in pool.items() if k != "reserved"} for pool in pools],
        "strategy": "STANDARD" if strategy in _STANDARD else strategy,
        "reserved": any(pool["reserved"] for pool in pools),
        "timeout_seconds": timeout or DEFAULT_TIMEOUT_SECONDS,
        "max_trials": int(body.get("maxTrialCount") or 1) if tuning else 1,
        "parallel_trials": int(body.get("parallelTrialCount") or 1) if tuning else 1,
    }

"""Why a job did not get its machines, read from what Vertex AI says: the ladder's one classifier, pure.

Vertex AI reports a lack of capacity as ``google.rpc.Code`` 8, RESOURCE_EXHAUSTED, in the failed
job's ``error`` (a stockout in PENDING, Flex-Start's ``maxWaitDuration`` passed, Spot VMs
reclaimed more often than it restarts them), and a create refused for a resource quota as HTTP
429 naming the quota metrics. A trainer's failure carries any other code. The request-rate 429
(``... requests per minute ...``) is throttling: retried, never a reason to climb.

Messages are matched only to say *which* capacity failure it was, for the task log and the
summary; the code alone decides that it was one. [U] unverified: Google's exact wording for a
Flex-Start wait that ran out and for the last Spot reclaim; the local service's is used.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_aip.jobs.states import JobState
from airflow_aip.jobs.times import queued_seconds
from airflow_aip.jobs.vertex.body import job_spec_of
from airflow_aip.jobs.vertex.hardware import gpu_quota_resource
from airflow_aip.jobs.vertex.ladder import Rung

RESOURCE_EXHAUSTED = 8  # google.rpc.Code
STOCKOUT = "stockout"
FLEX_START_WAIT = "flex_start_wait"
PREEMPTED = "preempted"
QUOTA = "quota"
QUEUED = "queued_limit"
EXHAUSTED = "resources_exhausted"
_QUOTA_METRICS = re.compile(r"quota metrics exceed quota limits:?\s*(.+)", re.IGNORECASE)
_REASONS = (
    (FLEX_START_WAIT, ("flex-start", "flex_start", "maxwaitduration", "dynamic workload scheduler")),
    (PREEMPTED, ("preempt", "reclaim", "spot")),
    (STOCKOUT, ("insufficient", "stockout", "out of stock", "does not have enough resources")),
)


@dataclass(frozen=True)
class Ending:
    """A rung that ended for capacity: ``reason`` (one of this module's names) and the detail."""

    reason: str
    detail: str

    def to_json(self) -> dict[str, str]:
        return {"reason": self.reason, "detail": self.detail}


def quota_refusal(status: int, message: str) -> str | None:
    """The quota metrics a create's 429 names when it was refused for a resource quota, else None.

    A request-rate 429 (``Quota exceeded for quota metric '... requests'``) is not one: it passes
    with a retry, and the same rung is tried again.
    """
    if status != 429:
        return None
    found = _QUOTA_METRICS.search(message or "")
    lowered = (message or "").lower()
    if found is None or ("requests" in lowered and "per minute" in lowered):
        return None
    return found.group(1).strip().rstrip(".")


def rung_ending(view: Mapping[str, Any], rung: Rung, now: float) -> Ending | None:
    """The capacity failure that ended this rung's job, or None (live, succeeded, or the trainer's fault).

    A job cancelled before it ever started, after at least the rung's ``queued_limit`` in the
    queue, is the ladder's own give-up: the next rung's, not a user's cancel.
    """
    state = JobState.parse(view.get("state"))
    if state is JobState.FAILED and view.get("error_code") == RESOURCE_EXHAUSTED:
        message = str(view.get("error_message") or "")
        lowered = message.lower()
        reason = next((name for name, words in _REASONS if any(w in lowered for w in words)), EXHAUSTED)
        return Ending(reason, message)
    if state in (JobState.CANCELLED, JobState.CANCELLING) and not view.get("start_time"):
        waited = queued_seconds(view, now)
        if rung.queued_limit is not None and waited is not None and waited >= rung.queued_limit:
            return Ending(QUEUED, f"QUEUED {waited / 60:.0f} min, past the rung's queued_limit")
    return None


def why_waiting(view: Mapping[str, Any]) -> str | None:
    """Why a Vertex AI job that has not started waits, in one sentence; None once it runs or ended.

    QUEUED names the quota: "Vertex AI keeps the job queued until you have sufficient quotas"
    (understanding-training-service), so the metric is the one its primary pool draws on.
    PENDING is a search for machines: Flex-Start's up to its ``maxWaitDuration``.
    """
    state = JobState.parse(view.get("state"))
    job_spec = job_spec_of(view.get("spec") or {})
    scheduling = job_spec.get("scheduling") or {}
    if state is JobState.QUEUED:
        return _queued_for(view, job_spec, scheduling.get("strategy"))
    if state is not JobState.PREPARING:
        return None
    if scheduling.get("strategy") == "FLEX_START":
        limit = scheduling.get("maxWaitDuration")
        return "Flex-Start: waiting for capacity" + (f" (up to {limit})" if limit else "")
    return "Pending capacity: Vertex AI is finding machines for the job"


def _queued_for(view: Mapping[str, Any], job_spec: Mapping[str, Any], strategy: object) -> str:
    pools = [p for p in job_spec.get("workerPoolSpecs") or [] if p]
    machine = (pools[0].get("machineSpec") or {}) if pools else {}
    where = f" in {view['region']}" if view.get("region") else ""
    try:
        metric = gpu_quota_resource(
            machine.get("acceleratorType"), preemptible=strategy in ("SPOT", "FLEX_START")
        )
    except ValueError:
        return f"QUEUED{where}"
    return f"QUEUED for quota {metric}{where}"

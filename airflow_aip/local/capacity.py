"""What the local region lacks, on purpose: quotas, stockouts, Flex-Start capacity, Spot reclaims, 429s.

A first GPU job on a new project meets a quota, a busy region runs out of A100s, a Flex-Start job
waits for the Dynamic Workload Scheduler, a Spot VM is reclaimed: code that waits on jobs has to
handle all of it, and a laptop never produces any of it. ``aip-local serve`` flags (and
``/_capacity`` at run time, :mod:`.capacity_admin`) set these; this model decides, the scheduler
(:mod:`.service`) and the executor (:mod:`.executor.provisioning`) apply it. Thread-safe, no I/O.

- **Quota**, per project, region and metric (Google's quotas are per project and region); what a
  job needs is :mod:`.capacity_needs`'. In use: the jobs that left the queue and have not ended.
  Mode ``queue`` (default): a job that does not fit waits in JOB_STATE_QUEUED ("if your Google
  Cloud project does not have sufficient remaining custom training quotas for your job, then
  Vertex AI keeps the job queued until you have sufficient quotas", understanding-training-service),
  even past the limit (it starts once the limit is raised). Mode ``reject``: a job that needs more
  than a limit allows at all gets 429 RESOURCE_EXHAUSTED at create, "The following quota metrics
  exceed quota limits: aiplatform.googleapis.com/<metric>" [O stable-diffusion-on-gcp#12].
  [U] unverified: when Google does which; both are observed.
- **Stockout** of an accelerator or machine type, or of a reservation (by name), in a region: a
  job asking for it fails in PENDING with code 8 and :data:`STOCKOUT_MESSAGE` [O
  openreview-expertise#401], and so does a Vertex tuning job about to start a trial (a stockout set
  at run time meets the trials after it). FLEX_START jobs wait instead.
- **Flex-Start**: capacity comes ``flex_start_after`` seconds after a job starts waiting (default
  at once; None: never, until granted at run time).
- **Spot**: ``preempt_spot_after`` seconds into a SPOT job's first attempt (each trial's, for a
  tuning job) its replicas are reclaimed (and any time through ``/_capacity``); see
  :mod:`.executor.provisioning` for the restart rule.
- **429 at create**: the next N creates fail, for the request rate ([O] Google's CRUD-rate text) or
  for quota. ml v1 creates meet the rate ones; only Vertex AI jobs have quotas, Flex-Start and Spot.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.local.capacity_needs import Needs

RESOURCE_EXHAUSTED = 8  # google.rpc.Code
MAX_SPOT_RESTARTS = 6  # [U] "Compute Engine tries to restart the job up to six times" (Spot VMs page)
QUOTA_MODES = ("queue", "reject")
CREATE_429_KINDS = ("rate", "quota")
# [O] what users report for Vertex AI and AI Platform stockouts (openreview-expertise#401).
STOCKOUT_MESSAGE = (
    "Resources are insufficient in region: {region}. Please try a different region. "
    "If you use K80, please consider using P100 or V100 instead."
)
# [O] Google's request-rate 429 (Service Usage's wording for a per-minute per-region limit).
RATE_MESSAGE = (
    "Quota exceeded for quota metric 'Resource management (CRUD) requests' and limit 'Resource "
    "management (CRUD) requests per minute per region' of service '{service}' for consumer "
    "'project_number:{project}'."
)
QUOTA_MESSAGE = "The following quota metrics exceed quota limits: {metrics}"
_CPUS = "custom_model_training_cpus"


class ResourceExhaustedError(Exception):
    """429 RESOURCE_EXHAUSTED at create: nothing was stored."""


@dataclass(frozen=True)
class CapacitySettings:
    """The region as ``aip-local serve``'s flags leave it (:mod:`.capacity_admin` parses them)."""

    quotas: tuple[tuple[str, str, int], ...] = ()  # (region, metric, limit)
    quota_mode: str = "queue"
    stockouts: tuple[tuple[str, str], ...] = ()  # (region, machine or accelerator type, or reservation)
    flex_start_after: float | None = 0.0  # None: never (until granted at run time)
    preempt_spot_after: float | None = None
    create_429: tuple[tuple[str, int], ...] = ()  # (kind, how many creates)


class RegionCapacity:
    """The live model: limits, what running jobs hold, and the one-off events tests ask for."""

    def __init__(self, settings: CapacitySettings | None = None, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self._lock = threading.RLock()
        self._listeners: list[Callable[[], None]] = []
        self._running: dict[tuple[str, str], Needs] = {}
        self.reset(settings or CapacitySettings())

    # -- configuration (flags at start, /_capacity at run time) -----------------------------------

    def reset(self, settings: CapacitySettings | None = None) -> None:
        """Back to ``settings`` (an unconstrained region without)."""
        settings = settings or CapacitySettings()
        with self._lock:
            self.quota_mode = settings.quota_mode
            self._limits = {(region, metric): limit for region, metric, limit in settings.quotas}
            self._stockouts = set(settings.stockouts)
            self.flex_start_after = settings.flex_start_after
            self._flex_granted: float | None = None
            self.preempt_spot_after = settings.preempt_spot_after
            self._preempt_now: set[str] = set()
            self._create_429: list[tuple[str, int]] = list(settings.create_429)
        self.changed()

    def subscribe(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (without this model's lock held) whenever capacity may have grown."""
        self._listeners.append(listener)

    def changed(self) -> None:
        for listener in self._listeners:
            listener()

    def set_quota(self, region: str, metric: str, limit: int | None) -> None:
        with self._lock:
            if limit is None:
                self._limits.pop((region, metric), None)
            else:
                self._limits[(region, metric)] = limit

    def set_stockouts(self, stockouts: set[tuple[str, str]]) -> None:
        with self._lock:
            self._stockouts = set(stockouts)

    def change_stockouts(self, added: set[tuple[str, str]], removed: set[tuple[str, str]]) -> None:
        """Take ``removed`` out, then put ``added`` in, in one step: two clients changing different
        regions at once each keep their own (a read, then a whole set, would lose one)."""
        with self._lock:
            self._stockouts = (self._stockouts - removed) | added

    def grant_flex_start(self) -> None:
        """Capacity arrives now for every FLEX_START job waiting."""
        with self._lock:
            self._flex_granted = self.clock()

    def add_create_429(self, kind: str, count: int) -> None:
        with self._lock:
            self._create_429.append((kind, count))

    def preempt(self, job_id: str) -> None:
        """Reclaim the Spot VMs of a running SPOT job now (of one running trial, for a tuning job).

        ValidationError if there is no such job.
        """
        with self._lock:
            running = [n for (_, j), n in self._running.items() if j == job_id and n.spot]
            if not running:
                raise ValidationError("preempt", f"{job_id} is not a running SPOT CustomJob or tuning job")
            self._preempt_now.add(job_id)

    # -- create ---------------------------------------------------------------------------------

    def check_create(self, project: str, needs: Needs) -> None:
        """ResourceExhaustedError if this create is to get 429 (a ``--create-429`` or ``reject`` mode)."""
        with self._lock:
            for index, (kind, count) in enumerate(self._create_429):
                if kind == "quota" and not needs.vertex:
                    continue  # an ml v1 create: it has no quotas here
                if count > 1:
                    self._create_429[index] = (kind, count - 1)
                else:
                    del self._create_429[index]
                if kind == "rate":
                    service = "aiplatform.googleapis.com" if needs.vertex else "ml.googleapis.com"
                    raise ResourceExhaustedError(RATE_MESSAGE.format(service=service, project=project))
                gpus = [m for m in needs.amounts if not m.endswith("_cpus")]
                raise ResourceExhaustedError(_quota_message(gpus[:1] or list(needs.amounts)[:1] or [_CPUS]))
            if self.quota_mode == "reject":
                over = [m for m, n in needs.amounts.items() if n > self._limits.get((needs.region, m), n)]
                if over:
                    raise ResourceExhaustedError(_quota_message(over))

    # -- the scheduler ----------------------------------------------------------------------------

    def acquire(self, key: tuple[str, str], needs: Needs) -> str | None:
        """Hold ``needs`` for job ``key`` = (project, job ID) and answer None, or say what is short."""
        with self._lock:
            for metric, amount in needs.amounts.items():
                limit = self._limits.get((needs.region, metric))
                if limit is None:
                    continue
                used = sum(
                    n.amounts.get(metric, 0)
                    for (project, _), n in self._running.items()
                    if project == key[0] and n.region == needs.region
                )
                if amount > limit - used:
                    free = max(limit - used, 0)
                    return f"quota {metric} in {needs.region}: needs {amount}, {free} of {limit} free"
            self._running[key] = needs
            return None

    def release(self, key: tuple[str, str]) -> None:
        with self._lock:
            self._running.pop(key, None)
            self._preempt_now.discard(key[1])
        self.changed()

    # -- the executor -----------------------------------------------------------------------------

    def stocked_out(self, needs: Needs) -> str | None:
        """The first machine or accelerator type, or reservation, of ``needs`` its region is out of."""
        with self._lock:
            out = sorted(name for name in needs.stock_keys if (needs.region, name) in self._stockouts)
            return out[0] if out else None

    def flex_start_ready(self, waiting_since: float) -> bool:
        """Whether Flex-Start capacity has come for a job waiting since ``waiting_since`` (clock time)."""
        with self._lock:
            if self._flex_granted is not None and self._flex_granted >= waiting_since:
                return True
            after = self.flex_start_after
            return after is not None and self.clock() - waiting_since >= after

    def preemption_due(self, job_id: str, running_since: float, first_attempt: bool) -> bool:
        """Whether a SPOT job's replicas are reclaimed now (asked at run time, or by the schedule)."""
        with self._lock:
            if job_id in self._preempt_now:
                self._preempt_now.discard(job_id)
                return True
            after = self.preempt_spot_after
            return first_attempt and after is not None and self.clock() - running_since >= after

    def snapshot(self) -> dict[str, Any]:
        """What ``GET /_capacity`` answers."""
        with self._lock:
            in_use: dict[tuple[str, str], Counter[str]] = {}
            for (project, _), needs in self._running.items():
                in_use.setdefault((project, needs.region), Counter()).update(needs.amounts)
            return {
                "quotaMode": self.quota_mode,
                "quotas": {f"{r}:{m}": limit for (r, m), limit in sorted(self._limits.items())},
                "inUse": {f"{p} {r}": dict(c) for (p, r), c in sorted(in_use.items()) if c},
                "stockouts": sorted(f"{r}:{name}" for r, name in self._stockouts),
                "flexStartCapacityAfter": self.flex_start_after,
                "preemptSpotAfter": self.preempt_spot_after,
                "create429": [f"{kind}:{count}" for kind, count in self._create_429],
                "running": sorted(job_id for _, job_id in self._running),
            }


def _quota_message(metrics: list[str]) -> str:
    return QUOTA_MESSAGE.format(metrics=", ".join(f"aiplatform.googleapis.com/{m}" for m in metrics))

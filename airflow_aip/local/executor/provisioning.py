"""What the region's capacity (:mod:`airflow_aip.local.capacity`) does to one job once it left the queue.

Hooks of :class:`~.execution.JobExecution` and :class:`~.trials.TuningRun`, so a pipeline meets
locally what it meets on Vertex:

- :meth:`Provisioning.before_start`, in PENDING (before packages are fetched, as Google provisions
  VMs before the container starts): a FLEX_START job waits for capacity, up to
  ``scheduling.maxWaitDuration`` (default 24 hours; 0 waits for ever), then fails with code 8
  (RESOURCE_EXHAUSTED). [U] unverified: Google's wording, and whether the wait counts from create;
  it counts from PENDING here. Any other job whose machine or accelerator type (or SPECIFIC
  reservation) the region is out of fails there with code 8 and Google's stockout message: the
  job never ran (Prefect#22727). A FLEX_START job waiting holds one of the service's
  ``--max-running-jobs`` slots.
- :meth:`Provisioning.before_trial`, for each trial of a Vertex tuning job: on Vertex each trial
  is a CustomJob of its own, provisioned when the trial starts, so a stockout set at run time
  (``/_capacity``) meets the next trial: it does not start and the tuning job fails with the same
  code 8 and message, once the trials already running have ended (they are not stopped). The
  trials that ended keep their state and measurements, so a client can go on with the rest of its
  trial budget elsewhere. [U] unverified: what Google does when a trial's CustomJob meets a
  stockout (retry it, mark it INFEASIBLE and go on, or fail the job) and what it says; the trial
  is not listed here (it never ran). FLEX_START tuning jobs waited for capacity once, in PENDING:
  their trials are not checked. ml v1 tuning jobs are not checked per trial.
- :class:`SpotWatch`, in RUNNING, for a SPOT job (one per trial of a tuning job, as each trial has
  its own VMs): when its VMs are reclaimed the replicas are stopped and started again, the job
  stays RUNNING and the log says so, counting restarts (``spotPreemptions``: all trials' for a
  tuning job; ``/_capacity``'s ``preempt`` of a tuning job reclaims one running trial's VMs).
  Vertex restarts the reclaimed worker, or the whole job with ``restartJobOnWorkerRestart``;
  locally every replica of the job restarts either way (one replica cannot restart alone here).
  [U] unverified: the limit. Google documents for Spot VMs that "Compute Engine tries to restart
  the job up to six times" after a STOCKOUT error: the 7th reclaim fails the job with code 8 (the
  7th of one trial fails its tuning job, as a stockout does; [U] unverified for tuning jobs).

Only Vertex AI records get ``errorCode`` (ml v1's Job has no such field, and shows its record).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from airflow_aip.local.capacity import (
    MAX_SPOT_RESTARTS,
    RESOURCE_EXHAUSTED,
    STOCKOUT_MESSAGE,
    RegionCapacity,
)
from airflow_aip.local.capacity_needs import Needs, needs_of
from airflow_aip.local.log_entries import JobLog
from airflow_aip.local.store import JobStore

# (message, extra fields of the FAILED record)
Failure = tuple[str, dict[str, Any]]


class Provisioning:
    """One job's dealings with the region; every method is a no-op without a capacity model."""

    def __init__(
        self,
        capacity: RegionCapacity | None,
        record: dict[str, Any],
        store: JobStore,
        log: JobLog,
        poll_interval: float,
    ) -> None:
        self.capacity = capacity
        self.needs: Needs = needs_of(record) if capacity is not None else Needs(region="")
        self.store = store
        self.log = log
        self.poll_interval = poll_interval

    def _failure(self, message: str) -> Failure:
        return message, ({"errorCode": RESOURCE_EXHAUSTED} if self.needs.vertex else {})

    def _note(self, waiting_for: str | None) -> None:
        """``waitingFor`` on the record, for the console page (Vertex records only)."""
        if not self.needs.vertex:
            return

        def change(job: dict[str, Any]) -> None:
            if waiting_for:
                job["waitingFor"] = waiting_for
            else:
                job.pop("waitingFor", None)

        self.store.update(self.log.project, self.log.job_id, change)

    def before_start(self, should_stop: Callable[[], bool]) -> Failure | None:
        """In PENDING: wait for Flex-Start capacity, or fail on a stockout; None to go on (or stop)."""
        capacity, needs = self.capacity, self.needs
        if capacity is None:
            return None
        if needs.flex_start:
            return self._flex_start_wait(capacity, should_stop)
        return self._stockout(capacity)

    def before_trial(self, trial: str) -> Failure | None:
        """Before a Vertex tuning job's trial starts (its own CustomJob): the stockout it meets, if any."""
        if self.capacity is None or self.needs.flex_start or not self.needs.vertex:
            return None
        return self._stockout(self.capacity, trial)

    def _stockout(self, capacity: RegionCapacity, trial: str | None = None) -> Failure | None:
        needs = self.needs
        out = capacity.stocked_out(needs)
        if out is None:
            return None
        what = f"reservation {out}" if out in needs.reservations else out
        also = f" for trial {trial}" if trial else ""
        self.log.service(
            f"Stockout: {needs.region} has no {what} to provision{also} (aip-local --stockout)",
            "WARNING",
            trial,
        )
        return self._failure(STOCKOUT_MESSAGE.format(region=needs.region))

    def _flex_start_wait(self, capacity: RegionCapacity, should_stop: Callable[[], bool]) -> Failure | None:
        needs = self.needs
        limit = f"{needs.max_wait:g}s" if needs.max_wait else "0s: no limit"
        what = ", ".join(sorted(needs.hardware)) or "its machines"
        waiting = f"Flex-Start (Dynamic Workload Scheduler) capacity for {what} in {needs.region}"
        self.log.service(f"PENDING: waiting for {waiting}; scheduling.maxWaitDuration {limit}")
        self._note(waiting)
        since = capacity.clock()
        try:
            while not capacity.flex_start_ready(since):
                if should_stop():
                    return None
                if needs.max_wait and capacity.clock() - since >= needs.max_wait:
                    return self._failure(
                        "Flex-Start (Dynamic Workload Scheduler) could not provision the requested "
                        f"resources in {needs.region} within scheduling.maxWaitDuration "
                        f"({needs.max_wait:g}s); the job was stopped."
                    )
                time.sleep(self.poll_interval)
        finally:
            self._note(None)
        self.log.service(f"Flex-Start capacity arrived after {capacity.clock() - since:.1f}s; provisioning")
        return None

    def spot_watch(self, job_id: str, trial: str | None = None) -> SpotWatch | None:
        """A watch on the Spot VMs of a SPOT job (or of one trial of a SPOT tuning job); None otherwise."""
        if self.capacity is None or not self.needs.spot:
            return None
        return SpotWatch(self, job_id, trial)


class SpotWatch:
    """When a SPOT job's VMs are reclaimed, and how many restarts it had."""

    def __init__(self, provisioning: Provisioning, job_id: str, trial: str | None = None) -> None:
        assert provisioning.capacity is not None
        self.capacity = provisioning.capacity
        self.provisioning = provisioning
        self.job_id = job_id
        self.trial = trial
        self.restarts = 0
        self.since = self.capacity.clock()

    def due(self) -> bool:
        return self.capacity.preemption_due(self.job_id, self.since, first_attempt=self.restarts == 0)

    def preempted(self, replica: str, replicas: int) -> Failure | None:
        """Log and count a reclaim of ``replica``; the failure once past the restart limit, else None."""
        log, trial = self.provisioning.log, self.trial
        self.restarts += 1
        count = self.restarts

        def counted(job: dict[str, Any]) -> None:  # a tuning job's counts all its trials' reclaims
            job["spotPreemptions"] = int(job.get("spotPreemptions") or 0) + 1

        self.provisioning.store.update(log.project, log.job_id, counted)
        if count > MAX_SPOT_RESTARTS:
            reclaimed = f"Replica {replica} was preempted (Spot VM reclaimed) for the {count}th time"
            log.service(reclaimed, "WARNING", trial)
            whose = f"Trial {trial}'s" if trial else "The job's"
            return self.provisioning._failure(
                f"{whose} Spot VMs were preempted {count} times; Vertex AI restarts a job at most "
                f"{MAX_SPOT_RESTARTS} times (STOCKOUT), so the job was stopped."
            )
        whole = (
            " the whole job (scheduling.restartJobOnWorkerRestart)"
            if self.provisioning.needs.restart_job
            else ""
        )
        also = f"; locally all {replicas} replicas restart with it" if replicas > 1 and not whole else ""
        log.service(
            f"Replica {replica} was preempted (Spot VM reclaimed); restarting{whole} "
            f"(restart {count} of at most {MAX_SPOT_RESTARTS}){also}",
            "WARNING",
            trial,
        )
        self.since = self.capacity.clock()
        return None

"""Which queued job may leave the queue now, given the region's quotas (:mod:`.capacity`).

The scheduler (:class:`~.service.TrainingService`) takes the first queued job whose quota is free;
a job that does not fit stays JOB_STATE_QUEUED without blocking the jobs behind it that do. Its log
says why once per reason ("QUEUED for quota custom_model_training_nvidia_t4_gpus in us-central1:
needs 1, 0 of 0 free"), not on every look, and its record's ``waitingFor`` (on the console page)
says it while it waits. Called with the scheduler's lock held, except :meth:`QuotaGate.leaving`.
"""

from __future__ import annotations

from typing import Any

from airflow_aip.local.capacity import RegionCapacity
from airflow_aip.local.capacity_needs import Needs
from airflow_aip.local.log_entries import JobLog
from airflow_aip.local.store import JobStore

Key = tuple[str, str]  # (project, job ID)
Entry = tuple[int, int, str, str]  # the scheduler's queue entry: (-priority, seq, project, job ID)


class QuotaGate:
    """The needs of the queued jobs, and the shortage each waiting one was last logged for."""

    def __init__(self, capacity: RegionCapacity, store: JobStore) -> None:
        self.capacity = capacity
        self.store = store
        self._needs: dict[Key, Needs] = {}
        self._waiting: dict[Key, str] = {}

    def queued(self, key: Key, needs: Needs) -> None:
        self._needs[key] = needs

    def forget(self, key: Key) -> bool:
        """Drop a job that left the queue (cancelled or picked); True if it had waited for quota."""
        self._needs.pop(key, None)
        return self._waiting.pop(key, None) is not None

    def pick(self, queue: list[Entry]) -> Entry | None:
        """The first entry whose quota is free, now held for it (released by the capacity model)."""
        for entry in queue:
            key = (entry[2], entry[3])
            needs = self._needs.get(key)
            short = self.capacity.acquire(key, needs) if needs is not None else None
            if short is None:
                return entry
            if self._waiting.get(key) != short:
                self._waiting[key] = short
                self._note(key, short)
        return None

    def leaving(self, key: Key) -> None:
        """A job that waited for quota leaves the queue: say so, and clear its ``waitingFor``."""
        self._note(key, None)

    def _note(self, key: Key, short: str | None) -> None:
        def change(job: dict[str, Any]) -> None:
            if short:
                job["waitingFor"] = short
            else:
                job.pop("waitingFor", None)

        self.store.update(*key, change)
        JobLog(self.store, *key).service(
            f"QUEUED for {short}" if short else "Quota is free now: leaving the queue"
        )

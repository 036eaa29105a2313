"""Wait for a Model Registry upload in the triggerer: its long-running operation, through the shared poller.

The operation is read by the triggerer's :class:`~airflow_aip.triggers.job_polling.JobPoller`
for the registry's API and identity, as a job is: one registration, woken only when its state
changes (RUNNING → SUCCEEDED or FAILED) or a read fails. A transient failure (429, 5xx, a
dropped connection) is ridden out with backoff until the deadline; any other yields ``error``.

It yields one event, ``{status, message, operation_name, operation}``: ``success`` when the
operation is done without error, ``failed`` with its error, ``timeout`` past ``end_time`` (an
absolute UNIX time, so a triggerer restart does not move it) and ``error``. Nothing is changed
by waiting: no side effects, so a trigger that runs twice does no harm.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from functools import cached_property
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_aip.hooks.base import DEFAULT_CONN_ID
from airflow_aip.hooks.registry import ModelRegistryHook
from airflow_aip.jobs.states import JobState
from airflow_aip.jobs.vertex.models import operation_error
from airflow_aip.jobs.waiting import Seen
from airflow_aip.triggers.job_polling import job_poller

CLASSPATH = "airflow_aip.triggers.model_operation.ModelOperationTrigger"
MAX_BACKOFF = 300.0


class ModelOperationTrigger(BaseTrigger):
    """Poll one ``models.upload`` operation until it is done, the deadline passes, or it cannot be read.

    :param operation_name: ``projects/P/locations/L/models/M/operations/O``.
    :param region: the model's location (the endpoint is regional).
    :param project_id: the project (resolved by the task before deferring).
    :param gcp_conn_id: the Airflow connection for credentials.
    :param api_endpoint: root URL override (None: connection extra, env, then Google).
    :param impersonation_chain: account (or chain) the task acts as.
    :param poll_interval: seconds between reads.
    :param end_time: UNIX time after which a ``timeout`` event is yielded (None: no deadline).
    """

    def __init__(
        self,
        *,
        operation_name: str,
        region: str,
        project_id: str,
        gcp_conn_id: str = DEFAULT_CONN_ID,
        api_endpoint: str | None = None,
        impersonation_chain: str | list[str] | None = None,
        poll_interval: float = 10.0,
        end_time: float | None = None,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # airflow.triggers.base is untyped
        self.operation_name = operation_name
        self.region = region
        self.project_id = project_id
        self.gcp_conn_id = gcp_conn_id
        self.api_endpoint = api_endpoint
        self.impersonation_chain = impersonation_chain
        self.poll_interval = poll_interval
        self.end_time = end_time

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            CLASSPATH,
            {
                "operation_name": self.operation_name,
                "region": self.region,
                "project_id": self.project_id,
                "gcp_conn_id": self.gcp_conn_id,
                "api_endpoint": self.api_endpoint,
                "impersonation_chain": self.impersonation_chain,
                "poll_interval": self.poll_interval,
                "end_time": self.end_time,
            },
        )

    @cached_property
    def hook(self) -> ModelRegistryHook:
        """Each read tried once: this trigger owns the backoff of an outage."""
        return ModelRegistryHook(
            self.gcp_conn_id,
            project_id=self.project_id,
            api_endpoint=self.api_endpoint,
            impersonation_chain=self.impersonation_chain,
            region=self.region,
            retry_attempts=1,
        )

    @property
    def poller_key(self) -> tuple[Any, ...]:
        chain = self.impersonation_chain
        chain_key = (chain,) if isinstance(chain, str) else tuple(chain or ())
        return ("models", self.gcp_conn_id, self.api_endpoint, chain_key, self.project_id, self.region)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            event = await self._wait()
        except Exception as err:  # a bug of ours fails the task with its reason
            event = self._event("error", f"{type(err).__name__}: {err}")
        yield TriggerEvent(event)  # type: ignore[no-untyped-call]

    async def _wait(self) -> dict[str, Any]:
        inbox: asyncio.Queue[Seen] = asyncio.Queue()
        poller = job_poller(self.poller_key, lambda: self.hook)
        watch = poller.watch(self.operation_name, self.operation_name, self.poll_interval, inbox.put_nowait)
        failures = 0
        try:
            while True:
                left = None if self.end_time is None else max(0.0, self.end_time - time.time())
                try:
                    seen = await asyncio.wait_for(inbox.get(), timeout=left)
                except asyncio.TimeoutError:
                    return self._event("timeout", f"{self.operation_name} was not done by its deadline")
                if seen.job is None:
                    if not seen.transient:
                        return self._event("error", f"cannot read {self.operation_name}: {seen.error}")
                    failures += 1
                    if failures == 1:
                        self.log.warning("Reading %s failed (%s): retrying", self.operation_name, seen.error)
                    watch.read_in(min(MAX_BACKOFF, self.poll_interval * 2**failures))
                    continue
                failures = 0
                state = JobState.parse(seen.job.get("state"))
                operation = dict(seen.job.get("operation") or {})
                if state is JobState.SUCCEEDED:
                    return self._event("success", f"{self.operation_name} is done", operation)
                if state is JobState.FAILED:
                    return self._event(
                        "failed", f"the upload failed: {operation_error(operation)}", operation
                    )
                self.log.info("Model upload %s is running", self.operation_name)
                watch.read_in(self.poll_interval)
        finally:
            watch.close()

    def _event(self, status: str, message: str, operation: dict[str, Any] | None = None) -> dict[str, Any]:
        return {
            "status": status,
            "message": message,
            "operation_name": self.operation_name,
            "operation": operation,
        }

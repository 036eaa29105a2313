"""Wait for a Model Registry upload in the triggerer: its long-running operation, through the shared poller.

The operation is waited for as a job is, by the one wait step (:mod:`airflow_aip.jobs.waiting`)
and the trigger's runner (:class:`~airflow_aip.triggers.watching.TriggerWait`): read by the
triggerer's :class:`~airflow_aip.triggers.job_polling.JobPoller` for the registry's API and
identity as ``{name, state, operation}`` (RUNNING until ``done``), one registration, woken only
when its state changes or a read fails. A transient failure (429, 5xx, a dropped connection) is
an outage, ridden out with the step's backoff until the deadline and logged once when it starts
and once when it ends; any other yields ``error``. Nothing is changed by waiting: no side
effects, so a trigger that runs twice does no harm.

It yields one event, ``{status, message, operation_name, operation}`` (:func:`operation_event`,
which the operator's wait in the worker ends with too): ``success`` when the operation is done
without error, ``failed`` with its error, ``timeout`` past ``end_time`` (an absolute UNIX time,
so a triggerer restart does not move it) and ``error``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import cached_property
from typing import Any

from airflow.triggers.base import TriggerEvent

from airflow_aip.hooks.registry import ModelRegistryHook
from airflow_aip.jobs.states import JobState
from airflow_aip.jobs.vertex.models import operation_error
from airflow_aip.jobs.view import VERTEX
from airflow_aip.jobs.waiting import Step
from airflow_aip.triggers.connected import ConnectedTrigger
from airflow_aip.triggers.hold import hold_event

CLASSPATH = "airflow_aip.triggers.model_operation.ModelOperationTrigger"
WHAT = "model upload"  # how the wait's lines name the operation


def operation_event(decided: Step) -> dict[str, Any]:
    """The event a wait for an operation ends with, from the step that ended it (worker or triggerer)."""
    name = decided.state.job_id
    if decided.action == "ended":
        operation = dict((decided.job or {}).get("operation") or {})
        if decided.state.state is JobState.SUCCEEDED:
            return _event(name, "success", f"{name} is done", operation)
        return _event(name, "failed", f"the upload failed: {operation_error(operation)}", operation)
    if decided.action == "timed_out":
        return _event(name, "timeout", f"{name} was not done by its deadline")
    if decided.action == "failed":
        return _event(name, "error", f"cannot read {name}: {decided.error}")
    raise ValueError(f"a {decided.action!r} step does not end an operation's wait")


def _event(name: str, status: str, message: str, operation: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"status": status, "message": message, "operation_name": name, "operation": operation}


class ModelOperationTrigger(ConnectedTrigger):
    """Poll one ``models.upload`` operation until it is done, the deadline passes, or it cannot be read.

    :param operation_name: ``projects/P/locations/L/models/M/operations/O``.
    :param poll_interval: seconds between reads.
    :param end_time: UNIX time after which a ``timeout`` event is yielded (None: no deadline).
    :param release_at: UNIX time before which the event is held (None: at once); see
        :mod:`airflow_aip.triggers.hold`.

    The registry's API, as the task's (:class:`~airflow_aip.hooks.job_reference.JobConnection`):
    its ``region`` is the model's (the endpoint is regional) and its ``project_id`` is resolved by
    the task before deferring.
    """

    serialized_fields = ("operation_name", "poll_interval", "end_time", "release_at")

    def __init__(
        self,
        *,
        operation_name: str,
        poll_interval: float = 10.0,
        end_time: float | None = None,
        release_at: float | None = None,
        **connection: Any,
    ) -> None:
        super().__init__(**connection)
        self.operation_name = operation_name
        self.poll_interval = poll_interval
        self.end_time = end_time
        self.release_at = release_at

    def default_backend(self) -> str:
        """The Model Registry is Vertex AI's alone (a trigger serialized before it named none)."""
        return VERTEX

    @cached_property
    def registry(self) -> ModelRegistryHook:
        """Each read tried once: the wait step owns the backoff of an outage."""
        return ModelRegistryHook.for_api(self.job_api, retry_attempts=1)

    @property
    def poller_key(self) -> tuple[Any, ...]:
        """The job API's key (endpoint, identity, project, region) for the registry's operations."""
        return ("models", *self.job_api.poller_key[1:])

    async def run(self) -> AsyncIterator[TriggerEvent]:
        name = self.operation_name
        wait = self.waiting(name, name, lambda: self.registry, what=WHAT, event_of=operation_event)
        try:
            event = await wait.run()
        except Exception as err:  # a bug of ours fails the task with its reason
            event = _event(self.operation_name, "error", f"{type(err).__name__}: {err}")
        await hold_event(self.release_at, self.log, f"The {WHAT} {self.operation_name}")
        yield TriggerEvent(event)  # type: ignore[no-untyped-call]

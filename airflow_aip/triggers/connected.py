"""The triggers' base: a job connection (:mod:`airflow_aip.hooks.job_reference`) that serialises itself.

A restarted triggerer rebuilds a trigger from its ``serialize()``: every argument, the
connection's through :meth:`~airflow_aip.hooks.job_reference.JobApi.to_json` (the one
serialisation of a job API), the trigger's own named in ``serialized_fields``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from airflow.triggers.base import BaseTrigger

from airflow_aip.hooks.job_reference import JobHooksMixin
from airflow_aip.triggers.job_polling import job_poller
from airflow_aip.triggers.watching import TriggerWait


class ConnectedTrigger(JobHooksMixin, BaseTrigger):
    """A trigger that reaches a job's (or an operation's) API as its task did."""

    #: The trigger's own arguments, each kept on it under its own name.
    serialized_fields: ClassVar[tuple[str, ...]] = ()
    project_id: str  # always resolved: the task resolves it before deferring
    poll_interval: float
    end_time: float | None

    def waiting(self, job_id: str, job_name: str, reader: Callable[[], Any], **options: Any) -> TriggerWait:
        """The trigger's run of the one wait step until ``end_time``, its reads from the triggerer's
        shared poller of its API (``reader`` builds the hook that poller reads through, once)."""
        return TriggerWait(
            None,
            options.pop("logs_hook", None),
            job_id,
            self.project_id,
            job_name=job_name,
            poll_interval=self.poll_interval,
            deadline=self.end_time,
            log=self.log,
            poller=job_poller(self.poller_key, reader),
            **options,
        )

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """Its class path, and every argument it was made with: its own and its connection's."""
        cls = type(self)
        own = {field: getattr(self, field) for field in self.serialized_fields}
        return f"{cls.__module__}.{cls.__qualname__}", {**own, **self.connection.to_json()}

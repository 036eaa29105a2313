"""The triggers' base: a job connection (:mod:`airflow_aip.hooks.job_reference`) that serialises itself.

A restarted triggerer rebuilds a trigger from its ``serialize()``: every argument, the
connection's through :meth:`~airflow_aip.hooks.job_reference.JobApi.to_json` (the one
serialisation of a job API), the trigger's own named in ``serialized_fields``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from airflow.triggers.base import BaseTrigger

from airflow_aip.hooks.job_reference import JobHooksMixin


class ConnectedTrigger(JobHooksMixin, BaseTrigger):
    """A trigger that reaches a job's (or an operation's) API as its task did."""

    #: The trigger's own arguments, each kept on it under its own name.
    serialized_fields: ClassVar[tuple[str, ...]] = ()

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """Its class path, and every argument it was made with: its own and its connection's."""
        cls = type(self)
        own = {field: getattr(self, field) for field in self.serialized_fields}
        return f"{cls.__module__}.{cls.__qualname__}", {**own, **self.connection.to_json()}

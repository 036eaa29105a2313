"""Which of Airflow's primitives this core has: the one module that knows, for every other to ask.

The provider runs on Airflow 3.1 and later (``FLOOR``). Newer cores add primitives that it uses
when they are there; on an older core it says, once per task, what it cannot do and what happens
instead (docs/airflow-versions.md has the table):

- ``BaseTrigger.on_kill`` (3.3): Airflow calls it when a user kills, clears or marks a deferred
  task, and our trigger cancels the job. Without it a kill while deferred leaves the job running
  (:func:`lacking_lines` says so at the task's start).
- ``airflow.sdk.log.amask_secret`` (3.3): registers a secret from a trigger without blocking the
  triggerer's event loop. Without it the sync ``mask_secret`` registers it in the triggerer's own
  masker, which is the one that redacts the lines the trigger relays.
- ``airflow.sdk.exceptions``' task exceptions (3.2): imported from here, ``airflow.exceptions``
  on 3.1 (the same classes, where the Task SDK has not taken them over yet).
- ``XComModel.set(serialize=...)`` (3.2): stores a value as the Task SDK does (:func:`xcom_set_options`).
- XCom stored per task try (3.4): ``XComModel`` becomes a read-only projection over the stores, so
  a row is taken back with ``XComModel.delete_for_attempts``, not a ``DELETE`` on the model
  (:func:`delete_xcom`). Reads through ``XComModel`` work on every core: from 3.4 they see the
  current try's rows only, as Airflow's own session filter hides archived tries.
- ``AirflowPlugin.external_views`` (3.1): the UI tabs; every core at or above the floor has it.

Each primitive is probed by feature (an attribute or an import), never by the version string:
a backport then just works. The version is read in one place only, :func:`check_floor`, which
names the floor when the core is older than every release the provider was proven on.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from functools import cache
from importlib import metadata
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

FLOOR = (3, 1)
FLOOR_TEXT = "apache-airflow>=3.1"
_CORE_DISTRIBUTIONS = ("apache-airflow-core", "apache-airflow")


class AirflowTooOld(ImportError):
    """The installed Airflow is older than the provider's floor (a forced install)."""


def installed_core() -> str | None:
    """The installed Airflow core's version (from its distribution's metadata: no Airflow import)."""
    for name in _CORE_DISTRIBUTIONS:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def check_floor(version: str | None = None) -> None:
    """Raise AirflowTooOld naming the floor when ``version`` (default: the installed core) is below it."""
    version = installed_core() if version is None else version
    if version is None:
        return  # no Airflow distribution: nothing to compare (Airflow's own import will fail instead)
    match = re.match(r"(\d+)\.(\d+)", version)
    if match and (int(match.group(1)), int(match.group(2))) < FLOOR:
        raise AirflowTooOld(
            f"airflow-aip needs {FLOOR_TEXT} (its operators, sensor, triggers and hooks were proven on "
            f"3.1 to 3.4); this environment has Airflow {version}: upgrade Airflow, or pin an older "
            "airflow-aip."
        )


@cache
def trigger_on_kill() -> bool:
    """Whether Airflow calls ``BaseTrigger.on_kill`` when a user kills a deferred task."""
    from airflow.triggers.base import BaseTrigger

    return callable(getattr(BaseTrigger, "on_kill", None))


@cache
def async_mask() -> Callable[[Any], Awaitable[None]]:
    """Register a secret from a coroutine: ``amask_secret``, else the sync ``mask_secret`` wrapped."""
    from airflow.sdk import log

    amask = getattr(log, "amask_secret", None)
    if amask is not None:
        return amask  # type: ignore[no-any-return]
    mask = log.mask_secret

    async def registered(value: Any) -> None:
        # From the event loop the sync call cannot reach the triggerer's supervisor (it suppresses
        # that); it registers the value with this process's masker, which redacts our lines.
        mask(value)

    return registered


@cache
def xcom_set_options() -> dict[str, Any]:
    """``XComModel.set``'s keywords to store a value as the Task SDK does: ``serialize=False`` where it
    exists (3.2+); Airflow 3.1's ``set`` takes no such keyword and serializes, which reads back the same."""
    import inspect

    from airflow.models.xcom import XComModel

    return {"serialize": False} if "serialize" in inspect.signature(XComModel.set).parameters else {}


def delete_xcom(
    session: Session, *, dag_id: str, run_id: str, task_id: str, map_index: int, key: str
) -> None:
    """Delete one task instance's XCom ``key``, on cores that store XCom by row or by task try.

    From 3.4 ``XComModel`` is a read-only projection (a ``DELETE`` on it cannot compile): the row is
    deleted from its store with ``delete_for_attempts``, for the task's current try, as Airflow's own
    ``XComModel.clear`` does. Before 3.4 ``XComModel`` is the table itself.
    """
    from airflow.models.xcom import XComModel

    by_try = getattr(XComModel, "delete_for_attempts", None)
    if by_try is not None:
        from airflow.models.xcom import select_producers  # type: ignore[attr-defined,unused-ignore]

        producers = select_producers(dag_ids=dag_id, task_ids=task_id, run_id=run_id, map_indexes=map_index)
        by_try(producer_ids=producers, key=key, session=session)
        return
    from sqlalchemy import delete

    session.execute(
        delete(XComModel).where(
            XComModel.dag_id == dag_id,
            XComModel.run_id == run_id,
            XComModel.task_id == task_id,
            XComModel.map_index == map_index,
            XComModel.key == key,
        )
    )


def lacking_lines(*, deferrable: bool, cancel_on_kill: bool) -> list[str]:
    """What a task with these arguments cannot do on this core, and what happens instead (may be empty)."""
    lines = []
    if deferrable and cancel_on_kill and not trigger_on_kill():
        lines.append(
            "This Airflow has no BaseTrigger.on_kill (Airflow 3.3+): a kill, clear or mark while this task "
            "is deferred does not cancel its training job, which runs on and bills until it ends. Cancel it "
            "from the task's Training job tab or with CancelTrainingJobOperator (a kill while the task "
            "runs in the worker still cancels it)."
        )
    return lines


check_floor()  # below the floor: one line naming it, before an import error about something else

try:
    from airflow.sdk.exceptions import (
        AirflowFailException,
        AirflowNotFoundException,
        AirflowSensorTimeout,
        TaskDeferred,
    )
except ImportError:  # Airflow 3.1: the Task SDK does not define them yet
    from airflow.exceptions import (  # type: ignore[no-redef,attr-defined,unused-ignore]
        AirflowFailException,
        AirflowNotFoundException,
        AirflowSensorTimeout,
        TaskDeferred,
    )

__all__ = [
    "FLOOR",
    "AirflowFailException",
    "AirflowNotFoundException",
    "AirflowSensorTimeout",
    "AirflowTooOld",
    "TaskDeferred",
    "async_mask",
    "check_floor",
    "delete_xcom",
    "installed_core",
    "lacking_lines",
    "trigger_on_kill",
    "xcom_set_options",
]

"""No trigger event before the deferral is old enough: the provider's side of apache/airflow#67287.

When a task defers, its worker reports SUCCESS for that try only after its teardown. A trigger
that fires first puts the task back to SCHEDULED, and the scheduler queues it; the late SUCCESS
then meets a QUEUED (or RUNNING) task instance and is read as a change made outside Airflow: the
task is FAILED, with no line of ours in its log and its job's ending never read. Airflow 3.2.2
guards the SCHEDULED case only; #68741 (QUEUED) is on Airflow's main branch, and the RUNNING
case (#72716) is open on every version.

So a trigger holds its one event until ``release_at``: the deferral's time plus ``[aip]
deferral_hold``. While the event is held the task stays DEFERRED, and the scheduler drops a
worker's SUCCESS for a DEFERRED task. A job that ends after the hold costs nothing; one that
ends sooner (a stockout, a quota 429, a trainer crashing at import) reports its ending at the
end of the hold. ``release_at`` is an absolute UNIX time taken in the worker, so a triggerer
restart never waits again.

A task run in-process by ``dag.test()`` (or ``airflow dags test``) has no executor and so no
late SUCCESS: it never holds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from airflow_aip import config

UPSTREAM = config.DEFERRAL_RACE


def runs_in_process() -> bool:
    """Whether this task runs in-process (``dag.test()``): its supervisor is the test one, no executor."""
    try:
        from airflow.sdk.execution_time import task_runner
        from airflow.sdk.execution_time.supervisor import InProcessSupervisorComms
    except ImportError:  # another Task SDK layout: hold, which is always safe
        return False
    return isinstance(getattr(task_runner, "SUPERVISOR_COMMS", None), InProcessSupervisorComms)


def release_at(clock: Callable[[], float] = time.time) -> float | None:
    """When a trigger the task defers to now may first fire; None: at once (no hold, or in-process)."""
    hold = config.deferral_hold()
    if hold <= 0 or runs_in_process():
        return None
    return clock() + hold


async def hold_event(release: float | None, log: Any, what: str) -> None:
    """Sleep until ``release`` (if it is still ahead), saying once why the event waits."""
    if release is None:
        return
    left = release - time.time()
    if left <= 0:
        return
    log.info(
        "%s: its event waits %.1f s more, until [aip] deferral_hold has passed since the deferral, so "
        "that Airflow reads the deferral first (%s)",
        what,
        left,
        UPSTREAM,
    )
    await asyncio.sleep(left)

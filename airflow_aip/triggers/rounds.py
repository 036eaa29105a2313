"""One round scheduler under the triggerer's pollers: when to run a round, and the task that runs them.

The job poller and the log poller differ only in what a round reads. Everything else is here,
once: registrations wake the task when they are due sooner than its next wake-up; rounds run
whenever :meth:`RoundScheduler.next_wake` has come; the task runs in a fresh
``contextvars.Context`` (the triggerer routes log records to a task's log by context variables,
so a poller started from one trigger's coroutine must not log into that trigger's log); a round
that fails is logged and retried after a pause, never spinning; and when nobody is registered the
task ends and ``on_idle`` lets the poller be forgotten (the next registration starts afresh).

``clock`` and ``sleep`` are injectable so tests drive rounds on a fake clock; with
``start_rounds`` False no task starts at all and a test calls the round itself.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)

NEVER = math.inf
Sleep = Callable[[float], Awaitable[Any]]


class RoundScheduler(ABC):
    """Runs :meth:`run_round` whenever :meth:`next_wake` has come, while anyone is registered."""

    #: Seconds to wait after a round that raised: a bug that recurs must not spin.
    failure_pause: float = 1.0

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Sleep = asyncio.sleep,
        on_idle: Callable[[], object] = lambda: None,
    ) -> None:
        self.clock = clock
        self.sleep = sleep
        self.on_idle = on_idle
        self.start_rounds = True  # False: a test runs the rounds itself
        self.task: asyncio.Task[None] | None = None
        self._next_wake = NEVER
        self._wake = asyncio.Event()

    # -- what a poller says ------------------------------------------------------------------

    @abstractmethod
    def registered(self) -> bool:
        """Whether anyone still wants reads."""

    @abstractmethod
    def next_wake(self) -> float:
        """When the next round has something to do (NEVER: only a registration can tell)."""

    @abstractmethod
    async def run_round(self) -> object:
        """One round: read what is due now."""

    def describe(self) -> str:
        """Who this is, in a log line."""
        return f"The {type(self).__name__}"

    # -- what registrations call ----------------------------------------------------------------

    def start(self) -> None:
        """Start the task unless it runs (a registration calls this)."""
        if self.start_rounds and (self.task is None or self.task.done()):
            loop = asyncio.get_running_loop()
            self.task = loop.create_task(self._run(), context=contextvars.Context())

    def due_at(self, when: float) -> None:
        """Something is due at ``when``: wake the task if that is before its next wake-up."""
        if when < self._next_wake:
            self._wake.set()

    def wake(self) -> None:
        """Re-plan now (someone left, or ended)."""
        self._wake.set()

    # -- the task ------------------------------------------------------------------------------

    async def _run(self) -> None:
        try:
            while self.registered():
                pause = 0.0
                self._wake.clear()  # this pass plans from what is registered now
                if self.next_wake() <= self.clock():
                    try:
                        await self.run_round()
                    except Exception:
                        log.exception("%s failed a round; it carries on", self.describe())
                        pause = self.failure_pause
                self._next_wake = self.next_wake()
                await self._idle(max(pause, self._next_wake - self.clock()))
        finally:
            self._next_wake = NEVER
            if not self.registered():
                self.on_idle()

    async def _idle(self, seconds: float) -> None:
        """Sleep ``seconds`` (NEVER: until woken), or until a registration wakes the task."""
        if self._wake.is_set() or not self.registered():
            self._wake.clear()
            return
        if seconds <= 0:
            await asyncio.sleep(0)  # yield to the triggers, whatever the clock says
            return
        waits = [asyncio.ensure_future(self._wake.wait())]
        if seconds < NEVER:
            waits.append(asyncio.ensure_future(self.sleep(seconds)))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
            await asyncio.gather(*waits, return_exceptions=True)  # a failing sleep ends the idle only
            self._wake.clear()

"""The trigger's runner of the one wait step: reads from the shared job poller, lines from the log poller.

The operator and the sensor wait in a worker with :class:`~airflow_aip.hooks.waiting.SyncWait`:
read, decide, sleep. A trigger makes the same decisions (``airflow_aip.jobs.waiting``), but
its reads come from the triggerer's shared :class:`~.job_polling.JobPoller` and its job's log
lines from the shared :class:`~.log_polling.LogPoller`, both into one queue that only this
trigger's coroutine empties. So every record about a job is logged from its own trigger's task,
where the triggerer's log routing (context variables) sends it to that task's log.

- A read arrives only when it is news (a new state, a failure, a recovery); the deadline is the
  queue's timeout, after which the step is asked again with the last read, and says timed_out.
- Lines are logged as they come, at the entry's own level.
- With a budget (:class:`~airflow_aip.jobs.budget.Guard`), the job is also read, with a get, when
  the guard says the budget could next be passed (at the most the job can spend per hour): the
  same verdict as a read each poll, without waking every trigger every round. A tuning job that a
  list answered without its trials is read with a get at its state changes, for the same reason.
- When the job has ended, the log stream is drained (the poller applies gcloud's rule) before
  the step's lines and the one event: the job's last lines come before "… is SUCCEEDED".
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from airflow_aip.hooks.waiting import WaitRunner
from airflow_aip.jobs.logs import Line, LogStream
from airflow_aip.jobs.states import JobState
from airflow_aip.jobs.waiting import Seen, Step
from airflow_aip.triggers.job_polling import JobPoller
from airflow_aip.triggers.log_polling import LogFollow, log_poller

Item = tuple[str, Any]  # ("job", Seen) or ("lines", list[Line])


class TriggerWait(WaitRunner):
    """Wait in the triggerer's event loop, through the shared pollers.

    :param poller: the job poller to watch with (``hook`` is not used: the poller has one).
    Other arguments are :class:`~airflow_aip.hooks.waiting.WaitRunner`'s.
    """

    def __init__(self, *args: Any, poller: JobPoller, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.poller = poller
        self.follow: LogFollow | None = None  # this job's registration with the log poller
        self._guard_timer: asyncio.TimerHandle | None = None  # the guard's next look (_arm_guard)
        self._guard_at: float | None = None

    def decide(self, seen: Seen) -> Step:
        """The step's decision; the job is not kept (5,000 waiting triggers would each hold one)."""
        decided = super().decide(seen)
        self.last_job = {}
        return decided

    async def run(self) -> dict[str, Any]:
        inbox: asyncio.Queue[Item] = asyncio.Queue()
        watch = self.poller.watch(
            self.job_name, self.job_id, self.poll_interval, lambda seen: inbox.put_nowait(("job", seen))
        )
        last: Seen | None = None
        try:
            while True:
                item: Item | None = await self._next(inbox, last)
                assert item is not None
                if item[0] == "lines":
                    self._log_lines(item[1])
                    continue
                if item[0] == "guard":  # the timer fired: the next look is armed anew after this read
                    self._guard_timer = self._guard_at = None
                seen = await self._read_now() if item[0] == "guard" else await self._complete(item[1])
                decided, last = await self._on_read(seen, inbox)
                item = None  # neither is held while waiting: 5,000 triggers would hold 5,000 jobs
                del seen
                if decided.done:
                    return self.event(decided)
                watch.read_in(decided.seconds)
                self._arm_guard(inbox)
        finally:
            watch.close()
            if self._guard_timer is not None:
                self._guard_timer.cancel()
            if self.follow is not None:
                self.follow.close()

    def _arm_guard(self, inbox: asyncio.Queue[Item]) -> None:
        """A timer that puts a ``guard`` item in the inbox when the guard wants to look (a handle on
        the loop, not a task: 5,000 waiting triggers hold 5,000 small handles, and nothing wakes them
        before it is due)."""
        check_at = self.guard.check_at if self.guard is not None else None
        if check_at == self._guard_at:
            return
        if self._guard_timer is not None:
            self._guard_timer.cancel()
            self._guard_timer = None
        self._guard_at = check_at
        if check_at is not None:
            loop = asyncio.get_running_loop()
            when = loop.time() + max(0.0, check_at - time.time())
            self._guard_timer = loop.call_at(when, inbox.put_nowait, ("guard", None))

    async def _on_read(self, seen: Seen, inbox: asyncio.Queue[Item]) -> tuple[Step, Seen]:
        """Decide on a read; follow the job's logs from its first read, drain them once it ended.

        Returns the decision and what to decide on again at the deadline: the state alone.
        """
        decided = self.decide(seen)
        if self.follow is None and self.stream_for is not None and seen.job is not None:
            stream = self.stream_of(seen, decided)
            if stream is not None:
                self.follow = self._follow(stream, inbox)
        if decided.action == "ended" and self.follow is not None:
            self.follow.end()
            await self._drain(self.follow.drained(), inbox)
        self.report(decided)
        return decided, Seen({"state": seen.job["state"]}) if seen.job is not None else seen

    async def _next(self, inbox: asyncio.Queue[Item], last: Seen | None) -> Item:
        """The next item; at the deadline, the last read again (the step then says timed_out).

        Never before the first read: a job that ended while nobody watched (a triggerer down
        past the deadline) ends the wait as what it is, not as a timeout.
        """
        if last is None or self.deadline is None:
            return await inbox.get()
        timeout = max(0.0, self.deadline - time.time())
        try:
            return await asyncio.wait_for(inbox.get(), timeout)
        except TimeoutError:
            return "job", last

    async def _read_now(self) -> Seen:
        """The guard's read: the job now, with a get (a failure goes to the wait step as any read's;
        the guard looks again a poll interval later)."""
        try:
            return Seen(await self.poller.hook.aread(self.job_name))
        except Exception as err:
            if self.guard is not None:
                self.guard.check_at = time.time() + self.poll_interval
            return self.failed_read(err)

    async def _complete(self, seen: Seen) -> Seen:
        """A running tuning job a list answered without its trials, read whole when its budget is
        guarded: the estimate sums the trials."""
        job = seen.job
        if (
            self.guard is None
            or self.guard.budget is None
            or job is None
            or not job.get("is_hyperparameter_tuning_job")
            or job.get("trials")
            or JobState.parse(job.get("state")).is_terminal
        ):
            return seen
        return await self._read_now()

    def _follow(self, stream: LogStream, inbox: asyncio.Queue[Item]) -> LogFollow:
        assert self.logs_hook is not None  # a trigger that streams logs always has its hook
        return log_poller(self.logs_hook, self.project_id).follow(
            stream, lambda lines: inbox.put_nowait(("lines", lines)), interval=self.poll_interval
        )

    async def _drain(self, drained: Any, inbox: asyncio.Queue[Item]) -> None:
        """Log what arrives until the log poller says the stream is drained, then what is queued."""
        done = asyncio.ensure_future(drained)
        try:
            while not done.done():
                getter = asyncio.ensure_future(inbox.get())
                await asyncio.wait({done, getter}, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    self._log_item(getter.result())
                else:
                    getter.cancel()
        finally:
            done.cancel()
        while not inbox.empty():
            self._log_item(inbox.get_nowait())

    def _log_item(self, item: Item) -> None:
        if item[0] == "lines":
            self._log_lines(item[1])

    def _log_lines(self, lines: list[Line]) -> None:
        for level, line in lines:
            getattr(self.log, level)("%s", line)

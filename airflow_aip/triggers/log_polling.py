"""One log poller per triggerer: every deferred wait's job log lines, within Cloud Logging's read quota.

Cloud Logging allows 60 ``entries.list`` calls a minute per project and a filter of at most
20,000 characters (https://cloud.google.com/logging/quotas; the figures and the budget are in
:mod:`airflow_aip.jobs.log_reads`). When each trigger read its own job's logs, 30 waits spent
the whole quota. Here the triggers of one event loop that read the same project's logs as the
same identity (endpoint, connection, impersonation: ``JobLogsHook._shared_auth_key``) share one
:class:`LogPoller`:

- A trigger registers its job's :class:`~airflow_aip.jobs.logs.LogStream` with a ``deliver``
  callback (:meth:`LogPoller.follow`) and gets a :class:`LogFollow`; it says when the job ended
  (:meth:`LogFollow.end`), awaits the drain (:meth:`LogFollow.drained`) and deregisters
  (:meth:`LogFollow.close`). The poller's task ends when nobody follows.
- A round reads every follow that is due (at once when it registers or its job ends, then
  every interval, every ``settle`` s while it drains) with those due within half the shortest
  period, which keeps them in step: one ``entries.list`` per batch of jobs, ``timestamp asc``,
  a page of 1,000 entries at most. The entries go to each job's stream by
  ``resource.labels.job_id``; the stream dedupes (timestamp + insertId), keeps the order and
  applies its own line cap.
- The reads of a project spend one :class:`~airflow_aip.jobs.log_reads.ReadBudget`, shared by
  every poller of that project in the event loop (one per triggerer process): ``[aip]
  log_reads_per_minute`` (default 30). A 429 empties the bucket and halves its rate; successes
  bring it back. Waiting for the budget is an ``asyncio`` sleep.
- Fairness: a batch is read one page per round, and the batches of a round queue first come,
  first served; a round cut short by the budget goes on where it stopped. A read whose page
  was full puts its jobs in a backlog, read on (first come, first served) only with the reads
  no round needs: a backlog goes as fast as the budget leaves room for, never ahead of anyone's
  turn. A job that filled a shared page (a tenth of it or more) is read alone from then on,
  paging on with the page token while it has more, until its reads bring less than half a
  page: the quiet jobs of its batch are read in full again, and cannot be starved by it.
- Failures cost a notice, never an exception: a failed read (transient or not) delivers
  "Could not read the logs..." to its jobs (the first failure, then every 10th) and is made
  again in the next round; "Reading the logs ... again" follows. A bug in the poller is
  logged on the triggerer's own log, and the task carries on.
- Lines are never logged here: the triggerer routes a record to a task's log by context
  variables bound in that trigger's task, so the poller hands lines to ``deliver`` (which must
  not block) and the trigger logs them from its own coroutine. The task runs in a fresh
  context, so it does not inherit the first follower's.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

from airflow_aip import config
from airflow_aip.hooks.logs import is_throttled
from airflow_aip.jobs.log_reads import (
    ReadBudget,
    batch_filter,
    batch_size,
    heavy_jobs,
)
from airflow_aip.jobs.logs import DRAIN_INTERVAL, DrainRule, Line, LogStream
from airflow_aip.triggers.rounds import NEVER, RoundScheduler, Sleep

if TYPE_CHECKING:
    from airflow_aip.hooks.logs import JobLogsHook

log = logging.getLogger(__name__)

MIN_PERIOD = 1.0  # seconds: no follow is read more often, whatever its interval
Deliver = Callable[[list[Line]], None]

Loop = asyncio.AbstractEventLoop
_POLLERS: weakref.WeakKeyDictionary[Loop, dict[Hashable, LogPoller]] = weakref.WeakKeyDictionary()
_BUDGETS: weakref.WeakKeyDictionary[Loop, dict[str, ReadBudget]] = weakref.WeakKeyDictionary()


def read_budget(project_id: str) -> ReadBudget:
    """The running loop's budget for the project: every poller of the project spends it."""
    budgets = _BUDGETS.setdefault(asyncio.get_running_loop(), {})
    if project_id not in budgets:
        budgets[project_id] = ReadBudget(config.log_reads_per_minute())
    return budgets[project_id]


def log_poller(
    hook: JobLogsHook,
    project_id: str,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Sleep = asyncio.sleep,
) -> LogPoller:
    """The running event loop's shared poller for this hook's identity and project.

    Created on first use (``clock`` and ``sleep`` are a test's fakes then), forgotten when its
    last follower leaves.
    """
    key = (*hook._shared_auth_key(), project_id)
    pollers = _POLLERS.setdefault(asyncio.get_running_loop(), {})
    poller = pollers.get(key)
    if poller is None:

        def forget(this: LogPoller) -> None:
            if pollers.get(key) is this:
                del pollers[key]

        budget = read_budget(project_id)
        poller = LogPoller(hook, project_id, budget=budget, clock=clock, sleep=sleep, on_idle=forget)
        pollers[key] = poller
    return poller


class LogFollow:
    """One trigger's registration: its stream, where its lines go, when it is read next."""

    def __init__(self, poller: LogPoller, stream: LogStream, deliver: Deliver, interval: float) -> None:
        self.poller = poller
        self.stream = stream
        self.deliver = deliver
        self.interval = interval
        self.due = NEVER  # when the next read is wanted
        self.queued: list[LogFollow] | None = None  # the poller's list it waits in (queue or backlog)
        self.chatty = False  # read on its own (it filled a shared page)
        self.continuation: dict[str, Any] | None = None  # its last read's body and next page token
        self.drain: DrainRule | None = None
        self._drained = asyncio.Event()

    @property
    def job_id(self) -> str:
        return self.stream.job_id

    @property
    def done(self) -> bool:
        return self._drained.is_set()

    @property
    def period(self) -> float:
        """Seconds between its reads: its interval, the drain's settle time once the job ended."""
        return max(MIN_PERIOD, self.drain.settle if self.drain is not None else self.interval)

    def end(self) -> None:
        """The job ended (now): drain per DrainRule(settle=min(interval, DRAIN_INTERVAL))."""
        if self.drain is None and not self.done:
            now = self.poller.clock()
            self.drain = DrainRule(now, settle=min(self.interval, DRAIN_INTERVAL))
            self.poller.schedule(self, now)

    async def drained(self) -> None:
        """Return once the drain rule is satisfied (or exhausted: its warning delivered first)."""
        await self._drained.wait()

    def close(self) -> None:
        """Deregister; idempotent. A ``drained()`` still waiting returns."""
        self.poller.remove(self)

    def finish(self) -> None:
        """Drained, or closed: no more reads."""
        self.due = NEVER
        self._drained.set()

    def tell(self, lines: list[Line]) -> None:
        """Hand lines to the trigger; its callback failing is our log's business, not the job's."""
        if not lines:
            return
        try:
            self.deliver(lines)
        except Exception:
            log.exception("Delivering log lines of training job %s failed", self.job_id)


class LogPoller(RoundScheduler):
    """Reads the logs of every followed job of one project and identity (see the module docstring).

    ``clock`` and ``sleep`` are injectable: the tests run it on a fake clock.
    """

    def __init__(
        self,
        hook: JobLogsHook,
        project_id: str,
        *,
        budget: ReadBudget,
        clock: Callable[[], float] = time.monotonic,
        sleep: Sleep = asyncio.sleep,
        on_idle: Callable[[LogPoller], object] = lambda poller: None,
    ) -> None:
        super().__init__(clock=clock, sleep=sleep, on_idle=lambda: on_idle(self))
        self.hook = hook
        self.project_id = project_id
        self.budget = budget
        self.follows: dict[LogFollow, None] = {}  # registration order
        self.queue: list[LogFollow] = []  # due follows not read yet, first come first served
        self.backlog: list[LogFollow] = []  # follows whose last page was full: read on with spare reads
        self.reads = 0  # entries.list calls made

    # -- registration --------------------------------------------------------------------------

    def follow(self, stream: LogStream, deliver: Deliver, *, interval: float) -> LogFollow:
        """Register a job's stream: its new lines are passed to ``deliver`` from now on, each round's
        at once, as (level, message) pairs (read notices included). ``deliver`` must not block."""
        follow = LogFollow(self, stream, deliver, interval)
        self.follows[follow] = None
        self.schedule(follow, self.clock())
        self.start()
        return follow

    def schedule(self, follow: LogFollow, due: float) -> None:
        follow.due = due
        self.due_at(due)

    def remove(self, follow: LogFollow) -> None:
        follow.finish()
        if follow not in self.follows:
            return
        del self.follows[follow]
        self._unqueue(follow)
        if not self.follows:
            self.wake()

    # -- rounds --------------------------------------------------------------------------------

    failure_pause = MIN_PERIOD

    def registered(self) -> bool:
        return bool(self.follows)

    def describe(self) -> str:
        return f"The log poller of project {self.project_id}"

    async def run_round(self) -> int:
        return await self.step()

    async def step(self) -> int:
        """One wake-up: end overdue drains, queue the due follows, read what the budget allows now:
        the due reads first, then, with what is left, the backlogs.

        Returns the number of reads made; the rest waits for the next wake-up.
        """
        now = self.clock()
        self._give_up_drains(now)
        self._queue_due(now)
        made = 0
        while (self.queue or self.backlog) and self.budget.delay(self.clock()) == 0:
            batch = self._next_batch(self.queue if self.queue else self.backlog)
            started = self.clock()
            for follow in batch:  # what the read will say, unless a bug of ours stops it first
                follow.due = started + follow.period
            self.budget.spend(started)
            await self._read(batch, started)
            made += 1
        return made

    def next_wake(self) -> float:
        """When :meth:`step` has something to do: a follow due, a drain's limit, the budget."""
        wake = min((f.due for f in self.follows if f.queued is not self.queue), default=NEVER)
        limits = (f.drain.ended_at + f.drain.max_seconds for f in self.follows if f.drain and not f.done)
        wake = min(wake, min(limits, default=NEVER))
        if self.queue or self.backlog:
            now = self.clock()
            wake = min(wake, now + self.budget.delay(now))
        return wake

    def _give_up_drains(self, now: float) -> None:
        for follow in list(self.follows):
            if follow.drain is not None and not follow.done and follow.drain.overdue(now):
                notice = follow.drain.notice(follow.job_id)
                follow.tell([notice] if notice else [])
                self._unqueue(follow)
                follow.finish()

    def _queue_due(self, now: float) -> None:
        active = [f for f in self.follows if not f.done]
        window = now + min((f.period for f in active), default=0.0) / 2
        due = [f for f in active if f.queued is not self.queue and f.due <= window]
        moving = set(due)  # out of the backlog too: their turn has come anyway
        self.backlog[:] = [f for f in self.backlog if f not in moving]
        for follow in due:
            follow.queued, follow.due = self.queue, NEVER
        self.queue.extend(due)

    def _unqueue(self, follow: LogFollow) -> None:
        if follow.queued is not None:
            follow.queued.remove(follow)
            follow.queued = None

    def _next_batch(self, waiting: list[LogFollow]) -> list[LogFollow]:
        """The first waiting follow, alone if it is chatty, else with the next quiet ones that fit."""
        first = waiting[0]
        if first.chatty or first.continuation is not None:
            batch = [first]
        else:
            quiet = [f for f in waiting if not f.chatty and f.continuation is None]
            batch = quiet[: batch_size([f.stream for f in quiet])]
        taken = set(batch)
        waiting[:] = [f for f in waiting if f not in taken]
        for follow in batch:
            follow.queued = None
        return batch

    # -- reading -------------------------------------------------------------------------------

    def _body(self, batch: list[LogFollow]) -> dict[str, Any]:
        if len(batch) == 1 and batch[0].continuation is not None:
            return batch[0].continuation
        return {
            "resourceNames": [f"projects/{self.project_id}"],
            "filter": batch_filter([f.stream for f in batch]),
            "orderBy": "timestamp asc",
            "pageSize": self.hook.page_size,
        }

    async def _read(self, batch: list[LogFollow], started: float) -> None:
        """One page for the batch, its entries routed to each job's stream. Never raises."""
        body = self._body(batch)
        self.reads += 1
        try:
            page = await self.hook.alist_entries(body)
        except Exception as err:  # cancellation passes
            if is_throttled(err):
                self.budget.throttled(self.clock())
            self._failed(batch, err, started)
            return
        self.budget.succeeded()
        entries: list[dict[str, Any]] = page.get("entries") or []
        token = page.get("nextPageToken")
        by_job: dict[str, list[dict[str, Any]]] = {}
        for entry in entries:
            job_id = str(((entry.get("resource") or {}).get("labels") or {}).get("job_id"))
            by_job.setdefault(job_id, []).append(entry)
        alone = len(batch) == 1
        counts = {job: len(found) for job, found in by_job.items()}
        heavy = heavy_jobs(counts, self.hook.page_size) if token and not alone else set()
        now = self.clock()
        for follow in batch:
            if follow not in self.follows:
                continue  # closed while the page was read
            count = counts.get(follow.job_id, 0)
            follow.continuation = {**body, "pageToken": token} if alone and token else None
            if alone:
                follow.chatty = bool(token) or 2 * count >= self.hook.page_size
            else:
                follow.chatty = follow.job_id in heavy
            shown = follow.stream.read(by_job.get(follow.job_id, []), now)
            self._after(follow, list(shown.lines), started, shown.new, more=bool(token), failed=False)

    def _failed(self, batch: list[LogFollow], err: Exception, started: float) -> None:
        reason = f"{type(err).__name__}: {err}"
        retry = "in the next round" + (" (Cloud Logging's read quota is spent)" if is_throttled(err) else "")
        for follow in batch:
            if follow not in self.follows:
                continue
            follow.continuation = None
            notice = follow.stream.read_failed(reason, retry)
            self._after(follow, [notice] if notice else [], started, 0, more=False, failed=True)

    def _after(
        self, follow: LogFollow, lines: list[Line], started: float, new: int, *, more: bool, failed: bool
    ) -> None:
        """Deliver a read's lines; end the drain it satisfied, else schedule the next read."""
        drain = follow.drain
        finished = drain is not None and not follow.done and drain.finished(started, new, more, failed)
        if finished and drain is not None and (notice := drain.notice(follow.job_id)):
            lines.append(notice)
        follow.tell(lines)
        if finished:
            follow.finish()
        elif not follow.done:
            follow.due = started + follow.period
            if more and follow.queued is None:  # a page cut short: read on with spare reads
                follow.queued = self.backlog
                self.backlog.append(follow)

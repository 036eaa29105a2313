"""One job poller per triggerer process: a list call per 100 watched jobs, not a get per job.

A triggerer runs every deferred wait of a deployment in one event loop. When each trigger read
its own job, 1,000 waits made 6,000 ``get`` calls a minute (a job API's read quota is per
project and per minute, shared with everything else the project runs) and 5,000 waits cost half
a core. Here the triggers of one event loop that reach the same API as the same identity, in
the same project and region, share one :class:`JobPoller`:

- A trigger registers a :class:`JobWatch` (its job's resource name and our ID) and tells it
  when it wants the next read (``read_in``: the wait step's decision: the poll interval, or a
  backoff in an outage). It deregisters when it ends or is cancelled (``close``); the poller's
  task ends when nobody watches, and the next registration starts a new one.
- A round reads every watch that is due, and every watch due within half the shortest poll
  interval (reading them early keeps the watches in step, so the next round takes them all
  again): one list call per batch of 100 jobs (:mod:`airflow_aip.jobs.watch`), filtered to
  them; an answer byte for byte the batch's last is not parsed again
  (:func:`airflow_aip.hooks.job_client.alist_watched`), and the watches that already heard
  what it says are re-armed in one pass, with no read built or offered per job. A job the list
  does not answer (not created by us, or a list lagging a create) is read with a get; so is a
  Vertex AI tuning job that has ended, because lists leave out the trials its summary reports.
- A trigger is woken only when its job's state changed, or its read failed, or recovered:
  the wait step does nothing with an unchanged running job, and 5,000 coroutines woken every
  round would cost more than the reads. Its deadline is its own timer.
- Failing polls never end a wait by themselves. A transient failure (429, 5xx, a dropped
  connection) is handed to each watch of the batch, whose wait step rides it out with backoff
  and says so once; a list the API refuses (400, 403: a filter or a permission it will not
  take) makes this poller read each job with a get from then on, as triggers did before.
- A triggerer restart loses nothing: the triggers are rebuilt from their kwargs and register
  again. Nothing blocks the event loop, and the poller's task runs in a fresh context: the
  triggerer routes log records to a task's log by context variables that the first trigger to
  register had bound.

Why not Airflow 3.3's shared streams (``BaseEventTrigger.shared_stream_key``): they broadcast
one stream opened from one trigger's arguments, so the poll cannot narrow to the set of jobs
being watched, and they are meant for event-driven scheduling, not for deferred tasks.
"""

from __future__ import annotations

import asyncio
import logging
import operator
import time
import weakref
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from airflow_aip.hooks.http_shared import is_transient
from airflow_aip.jobs.states import JobState
from airflow_aip.jobs.waiting import Seen
from airflow_aip.jobs.watch import AsLast, Listed, WatchBatch
from airflow_aip.triggers.rounds import NEVER, RoundScheduler

log = logging.getLogger(__name__)

GATHER_SECONDS = 0.5  # a first read waits this long for the others registering with it (a restart)
MAX_CONCURRENT_READS = 4  # requests of one round in flight at once
Read = Listed | BaseException
_DUE, _INTERVAL = operator.attrgetter("due"), operator.attrgetter("interval")  # 5,000 watches a pass


class PolledClient(Protocol):
    """What the poller reads through: a job client, or the Model Registry's operations."""

    def watch_batches(self, watched: Sequence[tuple[str, str]]) -> list[WatchBatch]: ...

    async def alist_batch(self, batch: WatchBatch) -> Mapping[str, Listed]: ...

    async def aread(self, name: str) -> dict[str, Any]: ...


_POLLERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Hashable, JobPoller]] = (
    weakref.WeakKeyDictionary()
)


def job_poller(key: Hashable, make_hook: Callable[[], PolledClient]) -> JobPoller:
    """The running loop's poller for ``key`` (API, endpoint, identity, project, region: see
    ``JobHooksMixin.poller_key``); ``make_hook`` is called only to start a new one, so 5,000
    triggers do not build 5,000 hooks."""
    pollers = _POLLERS.setdefault(asyncio.get_running_loop(), {})
    poller = pollers.get(key)
    if poller is None:
        poller = pollers[key] = JobPoller(make_hook(), on_idle=lambda: pollers.pop(key, None))
    return poller


class JobWatch:
    """One trigger's registration: when it wants a read, and what it was last told."""

    def __init__(
        self, poller: JobPoller, name: str, job_id: str, interval: float, deliver: Callable[[Seen], None]
    ) -> None:
        self.poller = poller
        self.name = name
        self.job_id = job_id
        self.interval = interval
        self.deliver = deliver
        self.due = NEVER  # when the next read is wanted (NEVER: being read, or deciding)
        self.reading = False  # read by the round under way
        self.told: JobState | None = None  # the state the trigger last heard (None: none, or a failure)

    def read_in(self, seconds: float) -> None:
        """The trigger wants the next read ``seconds`` from now."""
        self.poller.schedule(self, self.poller.clock() + max(0.0, seconds))

    def close(self) -> None:
        self.poller.remove(self)

    def heard(self, state: JobState) -> bool:
        """Whether the trigger was last told this state (a read saying it again is no news)."""
        return self.told is state

    def wants(self, read: Read) -> bool:
        """Whether this read is news to the trigger: a failure, a recovery, or a new state."""
        return not isinstance(read, Listed) or not self.heard(read.state)

    def offer(self, read: Read, now: float) -> None:
        """Hand the read to the trigger if it is news; else read again after the poll interval."""
        if not self.wants(read):
            self.due = now + self.interval
            return
        if isinstance(read, Listed):
            self.told = read.state
            self.deliver(Seen(read.view()))
        else:
            self.told = None
            self.deliver(Seen.failure(read, transient=is_transient(read)))


class JobPoller(RoundScheduler):
    """Reads every watched job of one API, identity, project and region, in rounds (module docstring).

    ``clock`` is injectable so a test can drive :meth:`poll_round` on a fake clock.
    """

    def __init__(
        self,
        hook: PolledClient,
        *,
        on_idle: Callable[[], object] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(clock=clock, on_idle=on_idle)
        self.hook = hook
        self.watches: dict[JobWatch, None] = {}  # registration order
        self.named: dict[str, list[JobWatch]] = {}  # the watches of each job (two tasks may watch one)
        self.gets_only = False  # the API refused a list: read each job by itself
        self._batched: tuple[tuple[str, ...], list[WatchBatch]] = ((), [])  # the last round's jobs, batches

    # -- registration --------------------------------------------------------------------------

    def watch(self, name: str, job_id: str, interval: float, deliver: Callable[[Seen], None]) -> JobWatch:
        """Register a job; its first read comes with the next round (or within GATHER_SECONDS)."""
        watch = JobWatch(self, name, job_id, interval, deliver)
        self.watches[watch] = None
        self.named.setdefault(name, []).append(watch)
        self.schedule(watch, self.clock() + min(GATHER_SECONDS, interval / 2))
        self.start()
        return watch

    def schedule(self, watch: JobWatch, due: float) -> None:
        watch.due = due
        self.due_at(due)

    def remove(self, watch: JobWatch) -> None:
        if watch in self.watches:
            del self.watches[watch]
            same = self.named[watch.name]
            same.remove(watch)
            if not same:
                del self.named[watch.name]
            self._batched = ((), self._batched[1])  # a job's ID is its first watch's: it may change
        if not self.watches:
            self.wake()

    # -- rounds --------------------------------------------------------------------------------

    def registered(self) -> bool:
        return bool(self.watches)

    def next_wake(self) -> float:
        return min(map(_DUE, self.watches), default=NEVER)

    next_round_at = next_wake

    async def run_round(self) -> int:
        return await self.poll_round()

    def coalesce(self) -> float:
        """Watches due this much after a round's start join it: half the shortest poll interval."""
        return min(map(_INTERVAL, self.watches), default=0.0) / 2

    async def poll_round(self) -> int:
        """Read every watch due now (or within :meth:`coalesce`); the number read.

        Each batch's answer is handed on as soon as it is in: a page of parsed jobs is let go
        before the next arrives, and the first batches' news does not wait for the last.

        A round keeps no object per watch: ``due`` holds names, a watch read carries ``reading``.
        Anything per watch that lived through a round (5,000 lists, or tuples) would outlive the
        garbage collector's young passes, and those survivors are what its full passes over the
        whole triggerer are paid for.
        """
        window = self.clock() + self.coalesce()
        due: dict[str, None] = {}  # the jobs read, in registration order
        read = 0
        for watch in self.watches:
            if watch.due <= window:
                watch.due, watch.reading = NEVER, True
                due[watch.name] = None
                read += 1
        if not due:
            return 0
        names = tuple(due)
        try:
            batches = [] if self.gets_only else self._batches(names)
            await _bounded(self._list_and_offer(batch, due) for batch in batches)
            batched = {name for batch in batches for name in batch.names}
            await _bounded(self._get_and_offer(name, due) for name in names if name not in batched)
        except Exception as err:  # a bug of ours: no watch of this round may wait for ever
            log.exception("A round of the job poller failed")
            for name in list(due):
                self._offer(name, err, due)
        return read

    # -- reading ---------------------------------------------------------------------------------

    async def _list_and_offer(self, batch: WatchBatch, due: dict[str, None]) -> None:
        """One list call; its answers offered; a job it did not answer (or an ended job the
        list left incomplete) read with a get. Never raises."""
        reads = await self._list(batch)
        names = self._rearm(batch.names, reads.said, due) if isinstance(reads, AsLast) else batch.names
        for name in names:
            read = reads.get(name)
            if read is None or (
                isinstance(read, Listed)
                and not read.complete
                and read.state.is_terminal
                and any(watch.wants(read) for watch in self._reading(name))
            ):
                await self._get_and_offer(name, due)
            else:
                self._offer(name, read, due)

    async def _get_and_offer(self, name: str, due: dict[str, None]) -> None:
        self._offer(name, await self._get(name), due)

    def _rearm(
        self, names: Sequence[str], said: Mapping[str, tuple[JobState, bool]], due: dict[str, None]
    ) -> list[str]:
        """An answer as the batch's last: re-arm, in one pass, every watch already told what it
        says (its next read a poll interval on, as :meth:`JobWatch.offer` would have it) without
        building a read per job. The jobs left (one the list did not answer, or a watch that has not
        heard this state: registered since, or told a failure) go the whole way; their names.
        """
        now, named = self.clock(), self.named
        left: list[str] = []
        for name in names:  # a plain loop, no call per job but heard(): it runs 5,000 times a round
            known = said.get(name)
            if known is None or name not in due:
                left.append(name)
                continue
            watches = named.get(name, ())  # () if its triggers left during the call
            for watch in watches:
                if watch.reading and not watch.heard(known[0]):
                    left.append(name)
                    break
            else:
                del due[name]
                for watch in watches:
                    if watch.reading:
                        watch.reading, watch.due = False, now + watch.interval
        return left

    def _reading(self, name: str) -> list[JobWatch]:
        """The job's watches this round reads (a copy: handing a read on may end a watch)."""
        return [watch for watch in self.named.get(name, ()) if watch.reading]

    def _offer(self, name: str, read: Read, due: dict[str, None]) -> None:
        """Hand a read to the job's watches (once: the job leaves ``due``); a watch whose read
        cannot be handed on (a view that cannot be built) hears why, as a failure."""
        if name not in due:
            return
        del due[name]
        now = self.clock()
        watches = self.named.get(name, ())
        for watch in watches if len(watches) < 2 else self._reading(name):
            if not watch.reading:
                continue
            watch.reading = False
            try:
                watch.offer(read, now)
            except Exception as err:
                log.exception("Cannot hand the read of %s to its trigger", name)
                watch.told = None
                watch.deliver(Seen.failure(err, transient=False))

    def _batches(self, names: tuple[str, ...]) -> list[WatchBatch]:
        """The list calls that read these jobs: the last round's if it read the same jobs (watches
        stay in step, so a steady round builds no filter again), and a batch the same as one of
        the last round's is that one (the hook remembers its answer by it)."""
        if names == self._batched[0]:
            return self._batched[1]
        try:
            fresh = self.hook.watch_batches([(name, self.named[name][0].job_id) for name in names])
        except Exception:  # a name the hook cannot batch (a bug, or a name it does not know)
            log.exception("Cannot batch %d watched jobs: reading each with a get", len(names))
            return []
        last = {batch: batch for batch in self._batched[1]}
        self._batched = (names, [last.get(batch, batch) for batch in fresh])
        return self._batched[1]

    async def _list(self, batch: WatchBatch) -> Mapping[str, Read]:
        try:
            return await self.hook.alist_batch(batch)
        except Exception as err:
            if is_transient(err):
                return dict.fromkeys(batch.names, err)
            if not self.gets_only:
                self.gets_only = True
                log.warning(
                    "Listing %s in %s was refused (%s: %s): reading each job with a get from now on",
                    batch.kind,
                    batch.parent,
                    type(err).__name__,
                    err,
                )
            return {}

    async def _get(self, name: str) -> Read:
        try:
            view = await self.hook.aread(name)
        except Exception as err:  # the wait step tells transient from not
            return err
        return Listed(JobState.parse(view.get("state")), lambda: view)


async def _bounded(reads: Iterable[Awaitable[None]]) -> None:
    """Await them with at most MAX_CONCURRENT_READS in flight: a round is gentle on the API.

    Workers take the reads one by one, so a round of 50 list calls holds 4 tasks, not 50.
    """
    pending = iter(reads)

    async def worker() -> None:
        for read in pending:
            await read

    await asyncio.gather(*(worker() for _ in range(MAX_CONCURRENT_READS)))

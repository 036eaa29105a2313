"""Reading many jobs' logs within Cloud Logging's read quota: the pure rules of the shared log poller.

Pure (no Airflow, no I/O, clocks passed in); :mod:`airflow_aip.triggers.log_polling` drives them.

Cloud Logging's limits (https://cloud.google.com/logging/quotas):

- "Number of entries.list requests: 60 per minute, per Google Cloud project" (older versions of
  that page said "1 per second, per project"). One read per job and poll made 30 deferred waits
  of 30 s polls use the whole project's quota, which workers, other triggerers and people's own
  ``gcloud logging read`` share. So the triggerer reads every watched job of a project with one
  ``entries.list`` per batch of jobs, and a :class:`ReadBudget` per project spends at most
  ``[aip] log_reads_per_minute`` reads a minute (default 30, half the quota). The figure holds
  per triggerer process and per project: two triggerers may spend it twice.
- "The maximum length of a filter is 20,000 characters" (LoggingQuery.filter and
  ListLogEntriesRequest.filter, logging v2). A batch's filter, one parenthesised clause per job,
  stays under :data:`FILTER_BUDGET_CHARS`, which leaves a margin under that limit.

The Logging query language binds OR tighter than AND, so every clause is parenthesised; a
bound on ``timestamp`` outside the ORs (the oldest cursor of the batch) keeps the scan short, as
the ``entries.list`` reference advises ("limit the time range of the query").
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence

from airflow_aip.jobs.logs import LogStream

ENTRIES_LIST_QUOTA_PER_MINUTE = 60  # per project: https://cloud.google.com/logging/quotas
MAX_FILTER_CHARS = 20_000  # ListLogEntriesRequest.filter: "The maximum length of a filter is 20,000 ..."
FILTER_BUDGET_CHARS = 18_000  # what a batch's filter may use: a tenth of the limit left as margin
READ_BURST = 5  # reads a round may make at once before the budget paces them
# The minute the cap counts in, plus a second: the quota counts reads as they arrive, and two
# reads sent 60 s apart may arrive a few milliseconds closer than that.
WINDOW_SECONDS = 61.0
HEAVY_SHARE = 10  # a job that took a tenth of a full page is read on its own from the next round
_EPSILON = 1e-9  # seconds: clock arithmetic's rounding, never a wait
_HEAD = 'resource.type="ml_job"'
_BOUND = ' AND timestamp>="0000-00-00T00:00:00.000000000Z"'  # the longest bound, for sizing


class ReadBudget:
    """The reads one project may spend: a token bucket, capped by a sliding minute.

    - Tokens: a burst of :data:`READ_BURST`, refilled at ``per_minute`` a minute, so a round's
      reads go out together and the next are paced.
    - The minute: never more than ``per_minute`` reads in any 60 s, burst included, so the
      figure a user configures is the most the quota ever sees from this process and project.
    - A 429 (the project's quota was spent, by us or by others): the bucket is emptied and the
      rate halved (down to 1 a minute); each read that succeeds then adds one read a minute back,
      up to ``per_minute``: after a halving from 30 to 15, the rate is whole again after 15 reads
      (about a minute), and repeated 429s keep it low.
    """

    def __init__(self, per_minute: int, burst: int = READ_BURST) -> None:
        if isinstance(per_minute, bool) or not isinstance(per_minute, int) or per_minute < 1:
            raise ValueError(f"reads per minute must be a whole number >= 1, got {per_minute!r}")
        self.ceiling = per_minute
        self.rate = float(per_minute)  # reads a minute now: lowered by 429s, raised by successes
        self.capacity = float(max(1, min(burst, per_minute)))
        self.tokens = self.capacity
        self.updated: float | None = None
        self.sent: deque[float] = deque()  # when the reads of the last minute were sent

    def _refill(self, now: float) -> None:
        if self.updated is not None:
            self.tokens = min(self.capacity, self.tokens + max(0.0, now - self.updated) * self.rate / 60.0)
        self.updated = now if self.updated is None else max(self.updated, now)
        while self.sent and self.sent[0] <= now - WINDOW_SECONDS + _EPSILON:
            self.sent.popleft()

    def delay(self, now: float) -> float:
        """Seconds until a read may be sent (0: now)."""
        self._refill(now)
        wait_token = 0.0 if self.tokens >= 1.0 - _EPSILON else (1.0 - self.tokens) * 60.0 / self.rate
        limit = max(1, int(self.rate))
        # The read waits until the oldest reads that would make a minute hold ``limit`` have aged out.
        wait_window = self.sent[-limit] + WINDOW_SECONDS - now if len(self.sent) >= limit else 0.0
        wait = max(wait_token, wait_window)
        return wait if wait > _EPSILON else 0.0

    def spend(self, now: float) -> None:
        """A read is being sent (after :meth:`delay` said 0)."""
        self._refill(now)
        self.tokens = max(0.0, self.tokens - 1.0)
        self.sent.append(now)

    def throttled(self, now: float) -> None:
        """The API answered 429: empty the bucket and halve the rate."""
        self._refill(now)
        self.tokens = 0.0
        self.rate = max(1.0, self.rate / 2)

    def succeeded(self) -> None:
        """A read went through: one more read a minute, up to the configured rate."""
        self.rate = min(float(self.ceiling), self.rate + 1.0)


def job_clause(stream: LogStream) -> str:
    """One job's part of a batch filter: its id, and its cursor when it has one."""
    clause = f'resource.labels.job_id="{stream.job_id}"'
    if stream.cursor.timestamp:
        clause += f' AND timestamp>="{stream.cursor.timestamp}"'
    return clause


def batch_filter(streams: Sequence[LogStream]) -> str:
    """The ``entries.list`` filter for these jobs' entries, each from its own cursor on.

    ``resource.type="ml_job" AND timestamp>="<oldest cursor>" AND ((<job A>) OR (<job B>) ...)``;
    one job's is its own filter (:attr:`LogStream.filter`).
    """
    if len(streams) == 1:
        return streams[0].filter
    if not streams:
        raise ValueError("a batch names at least one job")
    cursors = [stream.cursor.timestamp for stream in streams]
    head = _HEAD + (f' AND timestamp>="{min(cursors)}"' if all(cursors) else "")
    return f"{head} AND ({' OR '.join(f'({job_clause(stream)})' for stream in streams)})"


def batch_size(streams: Sequence[LogStream], limit: int = FILTER_BUDGET_CHARS) -> int:
    """How many of the leading ``streams`` one filter holds within ``limit`` characters (at least one)."""
    used = len(_HEAD) + len(_BOUND) + len(" AND ()")
    for count, stream in enumerate(streams):
        used += len(job_clause(stream)) + len("() OR ")
        if used > limit:
            return max(1, count)
    return len(streams)


def heavy_jobs(counts: Mapping[str, int], page_size: int) -> set[str]:
    """The jobs to read on their own after a shared read filled its page: each that took a tenth
    of the page or more. A chatty job then pages through its backlog alone while the quiet jobs
    of its batch are read in full again; a page filled by many quiet jobs isolates none of them."""
    return {job for job, count in counts.items() if count * HEAVY_SHARE >= page_size}

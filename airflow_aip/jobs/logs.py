"""Which of a training job's log lines to show while waiting: each once, in order, at a bounded rate.

Pure (no Airflow, no Google): the operator, the sensor and the trigger all stream through it,
so each rule exists once.

- Cursor: the Cloud Logging ``timestamp`` of the newest entry taken, plus the insertIds taken
  AT that timestamp. The next poll asks for ``timestamp>=`` it and skips those ids, so a line
  never appears twice and lines sharing the cursor's timestamp are not lost (``timestamp>``
  would drop them). ``entries.list`` returns entries sorted by timestamp, so order holds.
  The cursor is JSON, for the trigger's serialized kwargs.
- Rate: a token bucket, a burst of ``lines_per_minute`` then that many per minute, so a chatty
  trainer cannot flood the Airflow log. When a poll brings more, its first and last lines are
  shown (the last lines before a crash explain it) and one line between them says how many
  were dropped.
- Format: ``[<task>[ trial <id>]] <message>``, logged at the entry's severity (info, warning or
  error). The logger that relays it adds the one timestamp and level of the line; the entry's
  own, printed too, made every relayed line carry two of each.
- Level: a replica's stderr is logged at ERROR by Google whatever it says, so a harmless
  ``FutureWarning`` turned every successful run's task log red and the ERROR filter useless.
  In the task log a stderr line keeps the level its content shows (:func:`stderr_level`): a
  Python warning and its source line are warnings, a traceback is an error, anything else
  (Python's logging and progress bars write to stderr) is info. The job's own state still
  says whether it failed. Cloud Logging and the local console keep Google's severities.
- Drain: gcloud's ``--stream-logs`` rule after the job ended: keep polling until a poll made
  after the end (at least ``settle`` seconds after) brings nothing new, because Cloud Logging
  ingests with a delay and a job's last lines can land after its endTime.
- Throttling: Cloud Logging allows 60 ``entries.list`` calls a minute per project (see
  :mod:`airflow_aip.jobs.log_reads`). A stream whose read got a 429 skips its reads for a
  growing pause (10 s, 20 s ... up to 5 minutes), reset by the next read that succeeds, so
  waits in workers (one process each) back off together instead of retrying into the quota.
- Notices: what a stream says about its own reads (could not read, reading again, stopped
  draining), as lines, so a relaying logger and the triggerer's shared poller say the same.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal

from airflow_aip.exceptions import ValidationError

TRIAL_LABEL = "ml.googleapis.com/trial_id"
TASK_LABEL = "ml.googleapis.com/task_name"
SERVICE_TASK = "service"  # what gcloud calls entries the service itself wrote (no task_name)
DEFAULT_LINES_PER_MINUTE = 1000
PAGE_SIZE = 1000  # the most entries.list returns per page
MAX_PAGES_PER_POLL = 10  # a backlog beyond this is read by the next polls, from the cursor
DRAIN_INTERVAL = 5.0  # seconds between polls once the job ended (at most the poll interval)
DRAIN_MAX_SECONDS = 60.0  # stop draining this long after the end: the deferral timeout has a 120 s margin
REPORT_FAILURE_EVERY = 10  # reads: the first failure in a row is reported, then every 10th
THROTTLE_FIRST_SECONDS = 10.0  # after a 429, this stream's reads pause this long, doubling on each 429
THROTTLE_MAX_SECONDS = 300.0  # ... up to five minutes

Level = Literal["info", "warning", "error"]
Line = tuple[Level, str]  # what to log, at which level
# Cloud Logging's LogSeverity names, as the logger method that relays them.
_LEVELS: dict[str, Level] = {"WARNING": "warning", "ERROR": "error", "CRITICAL": "error"}
_LEVELS |= {"ALERT": "error", "EMERGENCY": "error"}

# The line ``warnings.showwarning`` prints: ``<file>:<line>: <Category>Warning: <message>``.
_PY_WARNING = re.compile(r"^(?:\S[^:]*:\d+: )?(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*Warning: ")
_TRACEBACK = "Traceback (most recent call last):"
_CHAINED = ("During handling of the above exception", "The above exception was the direct cause")
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception)(?::|$)")
# logging.basicConfig's format, ``LEVEL:logger:message``.
_LOGGING = re.compile(r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL):")
_LOGGING_LEVELS: dict[str, Level] = {"WARNING": "warning", "ERROR": "error", "CRITICAL": "error"}
After = Literal["", "warning", "traceback"]  # what a replica's previous stderr line began

_TIMESTAMP = re.compile(r"(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})")


def normalize_timestamp(value: object) -> str | None:
    """RFC 3339 as UTC with nanoseconds, ``2024-05-01T12:00:00.120000000Z``: such strings sort by time.

    Cloud Logging writes anything from seconds to nanoseconds; comparing those strings as
    they come would misorder ``...00Z`` and ``...00.5Z``. None when ``value`` is not RFC 3339.
    """
    match = _TIMESTAMP.fullmatch(value.strip()) if isinstance(value, str) else None
    if match is None:
        return None
    date, clock, fraction, zone = match.groups()
    try:
        moment = datetime.fromisoformat(f"{date}T{clock}{'+00:00' if zone in 'Zz' else zone}")
    except ValueError:
        return None
    moment = moment.astimezone(timezone.utc)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{(fraction or '').ljust(9, '0')[:9]}Z"


def entry_id(entry: Mapping[str, Any]) -> str:
    """The entry's insertId; Cloud Logging always sets one, else a digest of its content."""
    insert_id = entry.get("insertId")
    if isinstance(insert_id, str) and insert_id:
        return insert_id
    return "sha256:" + hashlib.sha256(json.dumps(entry, sort_keys=True, default=str).encode()).hexdigest()


@dataclass
class LogCursor:
    """Where the stream is: newest timestamp taken (normalized; "" = the start) and the ids taken at it."""

    timestamp: str = ""
    insert_ids: set[str] = field(default_factory=set)

    def take(self, timestamp: str, insert_id: str) -> bool:
        """Advance past the entry; False when it was taken before (or is older than the cursor)."""
        if timestamp > self.timestamp:
            self.timestamp, self.insert_ids = timestamp, {insert_id}
            return True
        if timestamp == self.timestamp and insert_id not in self.insert_ids:
            self.insert_ids.add(insert_id)
            return True
        return False

    def to_json(self) -> dict[str, Any]:
        return {"timestamp": self.timestamp, "insert_ids": sorted(self.insert_ids)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> LogCursor:
        """The cursor :meth:`to_json` wrote (None: the start)."""
        if data is None:
            return cls()
        rule = "must be {'timestamp': RFC 3339 or '', 'insert_ids': [str, ...]} (LogCursor.to_json())"
        if not isinstance(data, Mapping):
            raise ValidationError("log_cursor", rule)
        raw, ids = data.get("timestamp") or "", data.get("insert_ids") or []
        timestamp = normalize_timestamp(raw) if raw else ""
        if timestamp is None or not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise ValidationError("log_cursor", rule)
        return cls(timestamp, set(ids))


def log_filter(job_id: str, cursor: LogCursor) -> str:
    """The entries.list filter for the job's entries from the cursor on (job ids need no escaping)."""
    terms = ['resource.type="ml_job"', f'resource.labels.job_id="{job_id}"']
    if cursor.timestamp:
        terms.append(f'timestamp>="{cursor.timestamp}"')
    return " AND ".join(terms)


def entry_message(entry: Mapping[str, Any]) -> str:
    """textPayload, else jsonPayload's ``message``, else the payload as compact JSON."""
    text = entry.get("textPayload")
    if isinstance(text, str):
        return text.rstrip("\n")
    payload = entry.get("jsonPayload") or entry.get("protoPayload")
    if isinstance(payload, Mapping):
        message = payload.get("message")
        if isinstance(message, str):
            return message.rstrip("\n")
        return json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return ""


def entry_task(entry: Mapping[str, Any]) -> str:
    """The replica that wrote the entry (``workerpool0-0``...), or ``service`` for the service's own."""
    labels = entry.get("labels") or {}
    resource_labels = (entry.get("resource") or {}).get("labels") or {}
    return str(resource_labels.get("task_name") or labels.get(TASK_LABEL) or SERVICE_TASK)


def entry_where(entry: Mapping[str, Any]) -> str:
    """``<task>[ trial <id>]``: one replica's one trial, whose lines follow each other."""
    trial = (entry.get("labels") or {}).get(TRIAL_LABEL)
    task = entry_task(entry)
    return f"{task} trial {trial}" if trial else task


def format_entry(entry: Mapping[str, Any]) -> str:
    """``[<task>[ trial <id>]] <message>``: gcloud's stream-logs columns less the time and severity,
    which the relaying logger's own timestamp and level (:func:`entry_level`) carry."""
    return f"[{entry_where(entry)}] {entry_message(entry)}"


def entry_level(entry: Mapping[str, Any]) -> Level:
    """The logger level for the entry's severity: WARNING stays warning, ERROR and above error."""
    severity = entry.get("severity")
    return _LEVELS.get(severity.upper(), "info") if isinstance(severity, str) else "info"


def stderr_level(message: str, after: After = "") -> tuple[Level, After]:
    """The level a replica's stderr line shows, given what its previous line began; and what this one begins.

    A traceback (its header, indented frames and the exception line that ends it) is an error;
    a Python warning and the indented source line ``warnings`` prints after it are warnings;
    ``logging.basicConfig``'s ``LEVEL:`` prefix is that level; anything else is info.
    """
    if _TRACEBACK in message or message.startswith(_CHAINED):
        return "error", "traceback"
    indented = message[:1].isspace()
    if after == "traceback":
        return "error", ("traceback" if indented else "")  # an unindented line is the exception's
    if after == "warning" and indented:
        return "warning", ""
    if _PY_WARNING.match(message):
        return "warning", "warning"
    if logged := _LOGGING.match(message):
        return _LOGGING_LEVELS.get(logged[1], "info"), ""
    return ("error" if _EXCEPTION.match(message) else "info"), ""


class ContentLevels:
    """Each relayed entry's level: its severity, but a replica's stderr text by :func:`stderr_level`.

    Only plain-text ERROR entries of a replica are judged (the service's own errors, and a
    trainer's structured entries with a severity it chose, keep theirs); what the previous line
    began is kept per replica and trial, whose lines interleave.
    """

    def __init__(self) -> None:
        self._after: dict[str, After] = {}

    def level(self, entry: Mapping[str, Any]) -> Level:
        level = entry_level(entry)
        text = entry.get("textPayload")
        if level != "error" or not isinstance(text, str) or entry_task(entry) == SERVICE_TASK:
            return level
        where = entry_where(entry)
        level, self._after[where] = stderr_level(text.rstrip("\n"), self._after.get(where, ""))
        return level


def check_lines_per_minute(value: object, field_name: str = "max_log_lines_per_minute") -> int:
    """A positive whole number of lines, else ValidationError (checked before anything is sent)."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValidationError(field_name, f"must be a positive whole number of lines, got {value!r}")
    return value


class RateLimit:
    """Token bucket: ``lines_per_minute`` at once, refilled at ``lines_per_minute`` per 60 s."""

    def __init__(self, lines_per_minute: int) -> None:
        self.capacity = float(check_lines_per_minute(lines_per_minute))
        self.tokens = self.capacity
        self.updated: float | None = None

    def take(self, wanted: int, now: float) -> int:
        """How many of ``wanted`` lines may be shown at ``now`` (a monotonic clock, seconds)."""
        if self.updated is not None:
            refill = max(0.0, now - self.updated) * self.capacity / 60.0
            self.tokens = min(self.capacity, self.tokens + refill)
        self.updated = now
        granted = min(wanted, int(self.tokens))
        self.tokens -= granted
        return granted


@dataclass(frozen=True)
class Shown:
    """One poll's outcome: the lines to log (the dropped-count line included) and the counts."""

    lines: list[Line]
    new: int
    dropped: int


class LogStream:
    """One job's stream: the cursor, the rate limit, and what each poll's entries become."""

    def __init__(
        self,
        job_id: str,
        cursor: LogCursor | None = None,
        lines_per_minute: int = DEFAULT_LINES_PER_MINUTE,
    ) -> None:
        self.job_id = job_id
        self.cursor = cursor or LogCursor()
        self.rate = RateLimit(lines_per_minute)
        self.failures = 0  # consecutive polls that could not read the logs
        self.throttles = 0  # consecutive reads answered 429 (Cloud Logging's read quota)
        self.resume_at: float | None = None  # no read before this (monotonic s) after a 429
        self.levels = ContentLevels()

    def relayed(self, entry: Mapping[str, Any]) -> Line:
        """The entry as a line to log, at the level its content shows (:class:`ContentLevels`)."""
        return self.levels.level(entry), format_entry(entry)

    @classmethod
    def for_job(
        cls,
        job_id: str,
        create_time: object,
        cursor: LogCursor | None = None,
        lines_per_minute: int = DEFAULT_LINES_PER_MINUTE,
    ) -> LogStream:
        """From ``cursor``, else from the job's createTime (a time bound keeps Cloud Logging fast)."""
        stream = cls(job_id, cursor, lines_per_minute)
        if not stream.cursor.timestamp and (start := normalize_timestamp(create_time)):
            stream.cursor.timestamp = start
        return stream

    @property
    def filter(self) -> str:
        return log_filter(self.job_id, self.cursor)

    def accept(self, entries: Iterable[Mapping[str, Any]], now: float) -> Shown:
        """The lines to show for one poll's entries, in their order; advances the cursor past all."""
        self.failures = 0
        self.throttles, self.resume_at = 0, None
        new: list[Mapping[str, Any]] = []
        for entry in entries:
            timestamp = normalize_timestamp(entry.get("timestamp"))
            # Cloud Logging sets every entry's timestamp on read; one without cannot be placed.
            if timestamp is not None and self.cursor.take(timestamp, entry_id(entry)):
                new.append(entry)
        granted = self.rate.take(len(new), now)
        if granted == len(new):
            return Shown([self.relayed(e) for e in new], len(new), 0)
        head, tail = (granted + 1) // 2, granted // 2
        dropped = len(new) - granted
        notice = (
            f"... {dropped} lines dropped (rate limit: {int(self.rate.capacity)} lines/minute, "
            "see max_log_lines_per_minute)"
        )
        lines: list[Line] = [self.relayed(e) for e in new[:head]] + [("warning", notice)]
        # The dropped lines were judged too: a traceback's frames stay errors across the gap.
        for dropped_entry in new[head : len(new) - tail]:
            self.levels.level(dropped_entry)
        lines += [self.relayed(e) for e in new[len(new) - tail :]] if tail else []
        return Shown(lines, len(new), dropped)

    def read(self, entries: Iterable[Mapping[str, Any]], now: float) -> Shown:
        """As :meth:`accept`, led by "Reading the logs ... again" when the reads before it failed."""
        recovering = self.failures > 0
        shown = self.accept(entries, now)
        if not recovering:
            return shown
        notice: Line = ("info", f"Reading the logs of training job {self.job_id} again")
        return Shown([notice, *shown.lines], shown.new, shown.dropped)

    def failed(self) -> int:
        """Record a poll that could not read the logs; the count of such polls in a row."""
        self.failures += 1
        return self.failures

    def read_failed(self, reason: str, retry: str = "at the next poll") -> Line | None:
        """Record a failed read; the warning to show (the first failure in a row, then every 10th)."""
        count = self.failed()
        if count != 1 and count % REPORT_FAILURE_EVERY != 0:
            return None
        return (
            "warning",
            f"Could not read the logs of training job {self.job_id} ({reason}); retrying {retry}, "
            "nothing is lost",
        )

    def throttled(self, now: float) -> float:
        """A read answered 429: pause this stream's reads (doubling each time); the pause, in s."""
        self.throttles += 1
        pause: float = min(THROTTLE_MAX_SECONDS, THROTTLE_FIRST_SECONDS * 2.0 ** min(self.throttles - 1, 16))
        self.resume_at = now + pause
        return pause

    def may_read(self, now: float) -> bool:
        """False while a 429's pause lasts: the read would only spend the project's quota again."""
        return self.resume_at is None or now >= self.resume_at


class DrainRule:
    """After the job ended: poll until one poll, ``settle`` s or more after the end, brings nothing.

    A poll that brought entries, hit the page cap (``more``) or failed keeps the drain going;
    ``max_seconds`` after the end it stops regardless (``exhausted``), so a task never waits
    for logs longer than its deferral timeout allows.
    """

    def __init__(self, ended_at: float, settle: float, max_seconds: float = DRAIN_MAX_SECONDS) -> None:
        self.ended_at = ended_at
        self.settle = settle
        self.max_seconds = max_seconds
        self.exhausted = False

    def finished(self, poll_started: float, new: int, more: bool, failed: bool = False) -> bool:
        if poll_started - self.ended_at >= self.max_seconds:
            self.exhausted = bool(new or more or failed)
            return True
        if new or more or failed:
            return False
        return poll_started - self.ended_at >= self.settle

    def overdue(self, now: float) -> bool:
        """``max_seconds`` passed with no read to decide (none was allowed): stop, as exhausted."""
        if now - self.ended_at < self.max_seconds:
            return False
        self.exhausted = True
        return True

    def notice(self, job_id: str) -> Line | None:
        """The warning to show once the drain stopped, if it stopped before the logs were read out."""
        if not self.exhausted:
            return None
        return (
            "warning",
            f"Stopped reading the logs of training job {job_id} {self.max_seconds:.0f}s after it ended; "
            "the rest is in Cloud Logging",
        )

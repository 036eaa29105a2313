"""An append-only index of one job's ``log.jsonl``: where each entry starts and when it was stamped.

A poller reads the new lines of hundreds of jobs every few seconds; re-reading and re-parsing
each whole file for that made a read cost the age of the job, not its news. The index remembers
how many bytes it has read, and a refresh parses only what was appended since, up to the last
complete line: a line torn by a write in progress is read again, whole, next time.

It keeps 16 bytes an entry (the line's byte offset and its instant in microseconds) and the
last entry parsed, not every entry: 5,000 jobs of 250 lines are ~30 MB. Other entries are read
back from the file, a block of lines per read, only when a page needs them. Entries of one job
are stamped in order (see :mod:`.logs`), so a lower bound on time is a bisect; a log whose
stamps go back or do not parse is marked unordered, and its readers scan and sort it whole.
"""

from __future__ import annotations

import bisect
import json
import threading
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_aip.local.clock import instant_micros

BLOCK = 256  # entries read back per file read


def parse_line(line: bytes) -> dict[str, Any] | None:
    """One stored entry, or None for a line that is not a JSON object (it is skipped, as always)."""
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


@dataclass(frozen=True, eq=False)
class LogView:
    """One job's log as indexed at one moment: entries ``0..count-1``, the file read up to ``end``.

    The arrays are the index's own (they only grow); ``count`` bounds what this view reads, so
    lines appended after the snapshot stay invisible to it.
    """

    path: Path
    starts: array[int]
    stamps: array[int]
    count: int
    end: int
    ordered: bool  # stamps and time strings never go back: bisect and merge are valid
    last: dict[str, Any] | None  # entry count-1, kept parsed: a ">=" cursor reads it again each poll

    def first_at_or_after(self, micros: float) -> int:
        """The index of the first entry stamped at or after ``micros`` (an ordered log only)."""
        return bisect.bisect_left(self.stamps, micros, 0, self.count)

    def entries(self, start: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
        """``(index, stored entry)`` from ``start`` on, oldest first."""
        for low in range(start, self.count, BLOCK):
            yield from self._read(low, min(low + BLOCK, self.count))

    def entries_reversed(self, start: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
        """``(index, stored entry)`` down to ``start``, newest first."""
        for high in range(self.count, start, -BLOCK):
            yield from reversed(self._read(max(start, high - BLOCK), high))

    def _read(self, low: int, high: int) -> list[tuple[int, dict[str, Any]]]:
        if low == self.count - 1 and self.last is not None:
            return [(low, self.last)]
        first = self.starts[low]
        stop = self.starts[high] if high < self.count else self.end
        try:
            with self.path.open("rb") as handle:
                handle.seek(first)
                data = handle.read(stop - first)
        except FileNotFoundError:  # the job was deleted meanwhile: it has no more lines
            return []
        out: list[tuple[int, dict[str, Any]]] = []
        for line in data.split(b"\n"):
            stored = parse_line(line) if line else None
            if stored is not None:
                out.append((low + len(out), stored))
                if low + len(out) == high:
                    break
        return out


class LogIndex:
    """The growing index of one job's log file; :meth:`refresh` reads what was appended since."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        # New arrays, never cleared ones: views already handed out keep theirs.
        self._starts = array("q")
        self._stamps = array("q")
        self._end = 0
        self._ordered = True
        self._last_time = ""
        self._last: dict[str, Any] | None = None

    @property
    def size(self) -> int:
        """Entries indexed so far."""
        return len(self._starts)

    def refresh(self) -> LogView:
        """Index the complete lines appended since the last refresh; a snapshot of the result."""
        with self._lock:
            try:
                size = self.path.stat().st_size
            except FileNotFoundError:
                size = 0
            if size < self._end:  # truncated or replaced: not the file we indexed
                self._reset()
            if size > self._end:
                self._read_appended(size)
            count = len(self._starts)
            return LogView(self.path, self._starts, self._stamps, count, self._end, self._ordered, self._last)

    def _read_appended(self, size: int) -> None:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self._end)
                data = handle.read(size - self._end)
        except FileNotFoundError:
            return
        complete = data.rfind(b"\n") + 1  # a torn last line waits for its newline
        position = 0
        while position < complete:
            newline = data.index(b"\n", position)
            self._add(self._end + position, data[position:newline])
            position = newline + 1
        self._end += complete

    def _add(self, start: int, line: bytes) -> None:
        stored = parse_line(line) if line else None
        if stored is None:
            return
        time = stored.get("time")
        stamp = instant_micros(time) if isinstance(time, str) else None
        if not isinstance(time, str) or stamp is None:
            self._ordered = False
        else:
            if self._stamps and (time < self._last_time or stamp < self._stamps[-1]):
                self._ordered = False
            self._last_time = time
        self._starts.append(start)
        self._stamps.append(stamp or 0)
        self._last = stored

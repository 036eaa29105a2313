"""How a poller watches many jobs with few requests: list filters over the watched jobs, in batches.

A triggerer that waits for 5,000 jobs must not make 5,000 ``get`` calls a poll: the job APIs'
read quotas are per minute and per project, and shared with everything else the project runs.
Both backends' list methods take a filter, so one list call can answer for a whole batch:

- ml v1 ``projects.jobs.list``: ``jobId="a" OR jobId="b" OR ...``;
- Vertex AI ``{customJobs,hyperparameterTuningJobs}.list``: ``labels.aip_job_id="a" OR ...``
  (the label every job we create carries; its values are sanitized, so they need no escaping).

A batch holds at most a page of jobs (:data:`WATCH_PAGE_SIZE`, the most ml v1 returns in one
page), and its filter stays under :data:`MAX_FILTER_CHARS`: the filter travels in a GET's
query string, and Google's front ends refuse URLs much over 16 KB. So a poll of N jobs of one
kind is ceil(N / 100) requests. Each answer is matched to the watched jobs by resource name,
never by the filter's value: two jobs may carry one label (a race), and only one is watched.

Pure: the hooks build the requests from these batches and answer :class:`Listed` jobs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

from airflow_aip.jobs.states import JobState
from airflow_aip.jobs.view import JobView

WATCH_PAGE_SIZE = 100
MAX_FILTER_CHARS = 8000

T = TypeVar("T")


class Listed(NamedTuple):
    """One job as a list answered it: its state now, and its view when someone needs it.

    ``complete`` is False when the list leaves out part of the job that a finished wait reports
    (Vertex AI lists tuning jobs without their trials): read the job once it has ended.
    Building a view costs more than comparing a state, and most polls change nothing (a
    tuple: a round makes one per watched job).
    """

    state: JobState
    view: Callable[[], JobView]
    complete: bool = True


class AsLast(Mapping[str, Listed]):
    """A list answer byte for byte the batch's last: the states it said then, and nothing parsed.

    ``said`` is the last answer's ``{name: (state, complete)}``, shared, never copied: a round
    whose answers are all as last round's makes no object per job. A job's :class:`Listed` (and
    its view, from ``view_of``) is built only when someone asks for it: news for a watch that
    has not heard this state (a trigger registered since, or one told a failure).
    """

    __slots__ = ("said", "view_of")

    def __init__(self, said: Mapping[str, tuple[JobState, bool]], view_of: Callable[[str], JobView]) -> None:
        self.said = said
        self.view_of = view_of

    def __getitem__(self, name: str) -> Listed:
        state, complete = self.said[name]
        return Listed(state, lambda: self.view_of(name), complete)

    def __iter__(self) -> Iterator[str]:
        return iter(self.said)

    def __len__(self) -> int:
        return len(self.said)


@dataclass(frozen=True)
class WatchBatch:
    """One list call: the watched jobs it answers for, where to list them and the filter."""

    names: tuple[str, ...]
    parent: str  # ``projects/p`` (ml v1), ``projects/p/locations/l`` (Vertex AI)
    kind: str  # the collection listed: ``jobs``, ``customJobs``, ``hyperparameterTuningJobs``
    filter: str


def or_filter(field: str, values: Iterable[str]) -> str:
    """``field="a" OR field="b"``: values must need no escaping (job IDs, sanitized labels)."""
    return " OR ".join(f'{field}="{value}"' for value in values)


def batches(
    items: Sequence[T],
    value_of: Callable[[T], str],
    field: str,
    *,
    page_size: int = WATCH_PAGE_SIZE,
    max_chars: int = MAX_FILTER_CHARS,
) -> list[tuple[list[T], str]]:
    """``items`` cut into batches of at most ``page_size``, each with its filter under ``max_chars``.

    Items that share a filter value share its one term. An item whose term alone is too long
    gets a batch of its own (its filter is what it is; the server will say if it is too long).
    """
    out: list[tuple[list[T], str]] = []
    members: list[T] = []
    values: dict[str, None] = {}
    length = 0
    for item in items:
        value = value_of(item)
        added = 0 if value in values else len(field) + len(value) + 3 + (4 if values else 0)
        if members and (len(members) >= page_size or length + added > max_chars):
            out.append((members, or_filter(field, values)))
            members, values, length = [], {}, 0
            added = len(field) + len(value) + 3
        members.append(item)
        if value not in values:
            values[value] = None
            length += added
    if members:
        out.append((members, or_filter(field, values)))
    return out

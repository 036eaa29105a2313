"""The fake API's Cloud Logging: each job's lines, written while it runs, read by ``entries.list``.

A running job writes a line every ``QUIET_PERIOD`` (from a random phase), or every
``CHATTY_PERIOD`` when it is one of the chatty ones, until its end. Lines are not stored: line
``k`` of a job is stamped ``start + phase + k * period`` (integer microseconds), so any filter's
answer is computed from the clock, and the lines written up to the job's end are a count
(:func:`lines_written`). The text of each line carries its index and its own timestamp
(``line 17 @1767225600123456``): a watcher that logs it can tell which line it was and how late.

``entries.list`` takes the filters a log streamer sends: an OR of branches, each naming one
``resource.labels.job_id`` and bounding ``timestamp`` (``resource.type="ml_job"`` allowed, at
any level). It is parsed by the local service's filter parser, turned into branches, and
anything else in it (another field, NOT, a branch without a job) is a 400 that says so: the
bench must not answer a filter it does not understand as if it did. Entries are shaped by the
local service's ``to_log_entry`` (``insertId`` unique per line), sorted by timestamp then
insertId, at most 1,000 a page (Google's limit), with a page token that pins the moment of the
first page so later pages never shift.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.logs import normalize_timestamp
from airflow_aip.local.log_entries import to_log_entry
from airflow_aip.local.logs.filters import Comparison, Junction, Node, parse_filter
from bench.trigger_api_jobs import Fleet, Job, now_us, rfc3339_us

QUIET_PERIOD_US = 10_000_000
CHATTY_PERIOD_US = 20_000  # 50 lines a second
MAX_PAGE_SIZE = 1000
DEFAULT_PAGE_SIZE = 50
MAX_BRANCHES = 10_000
JOB_FIELD = ("resource", "labels", "job_id")
FAR_FUTURE_NS = 1 << 62


def period_us(job: Job) -> int:
    return CHATTY_PERIOD_US if job.chatty else QUIET_PERIOD_US


def lines_written(job: Job) -> int:
    """How many lines the job wrote from its start to its end (0 if it never ran)."""
    if not job.first_us:
        return 0
    span = job.end_us - (job.run_us + job.phase_us)
    return span // period_us(job) + 1 if span >= 0 else 0


def _ns(text: str) -> int:
    normalized = normalize_timestamp(text)
    if normalized is None:
        raise ValidationError("filter", f"timestamp {text!r} is not RFC 3339")
    whole = datetime.strptime(normalized[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    return int(whole.timestamp()) * 1_000_000_000 + int(normalized[20:29])


def _conjuncts(node: Node) -> list[list[Comparison]]:
    """The filter as an OR of ANDs of comparisons (NOT is refused)."""
    if isinstance(node, Comparison):
        return [[node]]
    if not isinstance(node, Junction):
        raise ValidationError("filter", "the bench's Cloud Logging does not serve NOT")
    if node.op == "OR":
        return [c for part in node.parts for c in _conjuncts(part)]
    out: list[list[Comparison]] = [[]]
    for part in node.parts:
        out = [left + right for left in out for right in _conjuncts(part)]
        if len(out) > MAX_BRANCHES:
            raise ValidationError("filter", f"more than {MAX_BRANCHES} branches")
    return out


def _branch(terms: list[Comparison]) -> tuple[str, int, int]:
    """``(job_id, lowest ns, highest ns)`` of one AND of comparisons."""
    job_ids = {t.value for t in terms if t.path == JOB_FIELD and t.op == "="}
    low, high = 0, FAR_FUTURE_NS
    for term in terms:
        if term.path == ("timestamp",) and term.op in (">=", ">", "<=", "<"):
            at = _ns(term.value)
            if term.op in (">=", ">"):
                low = max(low, at + (term.op == ">"))
            else:
                high = min(high, at - (term.op == "<"))
        elif term.path == ("resource", "type") and term.op == "=" and term.value == "ml_job":
            continue
        elif term.path != JOB_FIELD or term.op != "=":
            raise ValidationError("filter", f"the bench's Cloud Logging does not serve {'.'.join(term.path)}")
    if len(job_ids) != 1:
        raise ValidationError("filter", "each OR branch must name exactly one resource.labels.job_id")
    return job_ids.pop(), low, high


def _indices(job: Job, low_ns: int, high_ns: int, until_us: int) -> range:
    """Indices of the job's lines stamped within [low, high] and no later than ``until_us``."""
    if not job.first_us:
        return range(0)
    base, period = job.run_us + job.phase_us, period_us(job)
    last_us = min(job.end_us, until_us, high_ns // 1000)
    first_us = -(-low_ns // 1000)
    if last_us < base:
        return range(0)
    return range(max(0, -(-(first_us - base) // period)), (last_us - base) // period + 1)


class Logs:
    """``entries.list`` over the fleet's lines."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet

    def list_entries(self, request: Mapping[str, Any]) -> dict[str, Any]:
        size = int(request.get("pageSize") or DEFAULT_PAGE_SIZE)
        if not 0 < size <= MAX_PAGE_SIZE:
            raise ValidationError("pageSize", f"must be within 1..{MAX_PAGE_SIZE}")
        order = str(request.get("orderBy") or "timestamp asc").strip().lower()
        if order not in ("timestamp asc", "timestamp desc", "timestamp"):
            raise ValidationError("orderBy", "must be 'timestamp asc' or 'timestamp desc'")
        offset, snapshot = _token(request.get("pageToken"))
        node = parse_filter(request.get("filter"))
        if node is None:
            raise ValidationError("filter", "the bench's Cloud Logging serves job filters only")
        wanted: dict[str, set[int]] = {}
        for terms in _conjuncts(node):
            log_id, low, high = _branch(terms)
            job = self.fleet.by_log_id.get(log_id)
            if job is not None:
                wanted.setdefault(log_id, set()).update(_indices(job, low, high, snapshot))
        found = [(self._stamp(log_id, k), log_id, k) for log_id, indices in wanted.items() for k in indices]
        found.sort(reverse=order.endswith("desc"))
        page = found[offset : offset + size]
        answer: dict[str, Any] = (
            {"entries": [self._entry(log_id, k) for _, log_id, k in page]} if page else {}
        )
        if offset + size < len(found):
            answer["nextPageToken"] = _new_token(offset + size, snapshot)
        return answer

    def _stamp(self, log_id: str, k: int) -> tuple[int, str]:
        job = self.fleet.by_log_id[log_id]
        return job.run_us + job.phase_us + k * period_us(job), f"{log_id}-{k:08d}"

    def _entry(self, log_id: str, k: int) -> dict[str, Any]:
        at_us, _ = self._stamp(log_id, k)
        vertex = log_id not in self.fleet.by_id
        stored = {
            "time": rfc3339_us(at_us, nanos=True),
            "severity": "INFO",
            "task": "workerpool0-0" if vertex else "master-replica-0",
            "message": f"line {k} @{at_us}",
        }
        return to_log_entry(self.fleet.project, log_id, k, stored)


def _token(token: object) -> tuple[int, int]:
    """``(offset, snapshot µs)`` of a page token; a first page pins the snapshot to now."""
    if not token:
        return 0, now_us()
    try:
        data = json.loads(base64.urlsafe_b64decode(str(token).encode()))
        return int(data["o"]), int(data["s"])
    except (ValueError, KeyError, TypeError) as err:
        raise ValidationError("pageToken", "is not a token this service issued") from err


def _new_token(offset: int, snapshot: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"o": offset, "s": snapshot}).encode()).decode()

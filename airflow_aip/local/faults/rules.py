"""What a fault is, and the targeted rules a test posts to ``/_faults``, read from their JSON.

A rule is checked whole before it is added (ValidationError naming the field), so a typo in a
test's rule fails that test at once instead of silently injecting nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.local.faults.routes import ANY_METHOD, METHODS

WHEN = ("before", "after")
ERROR_KINDS: tuple[int | str, ...] = (429, 500, 503)
CONNECTION_KINDS: tuple[int | str, ...] = ("drop", "reset")
KINDS = (*ERROR_KINDS, *CONNECTION_KINDS, "delay")
# What --fault-rate draws from: every way a real call fails (a delay is not a failure).
RANDOM_KINDS = (*ERROR_KINDS, *CONNECTION_KINDS)
_FIELDS = {"method", "when", "kind", "count", "seconds", "skip", "for_seconds"}


@dataclass(frozen=True)
class Fault:
    """What happens to one request."""

    kind: int | str
    when: str
    seconds: float = 0.0

    @property
    def label(self) -> str:
        return f"{self.when}:{self.kind}"


@dataclass
class FaultRule:
    """A targeted fault: the next ``count`` calls of ``method`` get ``kind``, ``when``.

    ``skip`` lets that many calls of ``method`` through first (a resumable upload's second chunk).
    ``for_seconds`` makes it an outage instead: every call of ``method`` gets the fault for that
    many seconds from when the rule was added, however many calls come (no ``count``); then the
    rule is gone. An outage is a time, not a number of calls: a waiter backing off makes fewer.
    """

    method: str
    when: str
    kind: int | str
    count: int = 1
    seconds: float = 0.0
    skip: int = 0
    for_seconds: float = 0.0
    ends_at: float | None = field(default=None, repr=False)  # monotonic; set when added

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        del data["ends_at"]
        return data

    def expired(self, now: float) -> bool:
        return self.ends_at is not None and now >= self.ends_at


def parse_rule(data: Any) -> FaultRule:
    """A rule from its JSON form; ValidationError naming the field otherwise."""
    if not isinstance(data, Mapping):
        raise ValidationError("rule", "must be a JSON object")
    unknown = set(data) - _FIELDS
    if unknown:
        raise ValidationError(f"rule.{sorted(unknown)[0]}", "unknown field")
    method = data.get("method", ANY_METHOD)
    if method != ANY_METHOD and method not in METHODS:
        raise ValidationError("rule.method", f"must be '*' or one of {', '.join(METHODS)}; got {method!r}")
    when = data.get("when", "before")
    if when not in WHEN:
        raise ValidationError("rule.when", f"must be 'before' or 'after'; got {when!r}")
    kind = _kind(data)
    count = _whole(data, "count", 1, "a positive integer")
    seconds = _seconds(data, "seconds")
    if kind == "delay" and not seconds:
        raise ValidationError("rule.seconds", "a delay needs a positive number of seconds")
    skip = _whole(data, "skip", 0, "a non-negative integer")
    for_seconds = _seconds(data, "for_seconds")
    if for_seconds and "count" in data:
        raise ValidationError("rule.count", "a rule with for_seconds has no count: it lasts that long")
    return FaultRule(method, when, kind, count, seconds, skip, for_seconds)


def _kind(data: Mapping[str, Any]) -> Any:
    kind = data.get("kind")
    if isinstance(kind, str) and kind.isdigit():
        kind = int(kind)
    if kind not in KINDS or isinstance(kind, bool):
        raise ValidationError("rule.kind", f"must be one of {', '.join(map(str, KINDS))}; got {kind!r}")
    return kind


def _whole(data: Mapping[str, Any], name: str, default: int, rule: str) -> int:
    """A whole number at least ``default`` (1 for count, 0 for skip)."""
    value = data.get(name, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < default:
        raise ValidationError(f"rule.{name}", f"must be {rule}; got {value!r}")
    return value


def _seconds(data: Mapping[str, Any], name: str) -> float:
    value = data.get(name, 0.0)
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= 3600:
        raise ValidationError(f"rule.{name}", f"must be a number of seconds in [0, 3600]; got {value!r}")
    return float(value)

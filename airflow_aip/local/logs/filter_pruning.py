"""What a parsed filter pins down, so a list visits only the jobs and log lines it can match.

A poller asks for 100 jobs at once (``jobId="a" OR jobId="b" OR ...``) and for the new log lines
of 250 jobs at once (``resource.labels.job_id="A" AND timestamp>="..." OR ...``). Scanning every
job and every line of a 5,000-job project for that is what made lists slow; instead:

- :func:`candidate_values` says which values a field must take for the filter to match (AND
  intersects, OR unions, anything else leaves the field free): the jobs to look up in an index;
- :meth:`FilterPlan.residual` says what is left of the filter once that field is known (one
  job's branch of a 250-branch OR), so each job's lines are matched against its own branch;
- :func:`timestamp_floor` reads the lower bound a residual puts on ``timestamp``: where a bisect
  into the job's time-ordered lines can start.

All three only prune: the answers are those a full scan with the whole filter gives, because a
value outside the candidates cannot match, and a residual is the filter with the field's known
value substituted (compared exactly as :class:`~.filters.Comparison` compares it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_aip.local.clock import instant_micros
from airflow_aip.local.logs.filters import Comparison, Junction, Negation, Node, equality_key

FieldPath = tuple[str, ...]
Residual = Node | bool
NO_FLOOR = -math.inf
TIMESTAMP: FieldPath = ("timestamp",)


def candidate_values(node: Node | None, path: FieldPath) -> frozenset[str] | None:
    """The values ``path`` must equal (``=``, no wildcard) for ``node`` to match; None if it is free."""
    return FilterPlan(node, path).candidates


class FilterPlan:
    """One filter, prepared to be asked per value of one field (a job ID) what it still requires."""

    def __init__(self, node: Node | None, path: FieldPath) -> None:
        self.node = node
        self.path = path
        self._values_memo: dict[int, frozenset[str] | None] = {}
        # Per OR node: its branches grouped by the value they pin, and those that pin none.
        self._branches: dict[int, tuple[dict[float | str, list[int]], list[int]]] = {}
        self.candidates = None if node is None else self._values(node)

    def _values(self, node: Node) -> frozenset[str] | None:
        if id(node) not in self._values_memo:
            self._values_memo[id(node)] = self._compute_values(node)
        return self._values_memo[id(node)]

    def _compute_values(self, node: Node) -> frozenset[str] | None:
        if isinstance(node, Comparison):
            if node.path == self.path and node.op == "=" and "*" not in node.value:
                return frozenset({node.value})
            return None
        if isinstance(node, Negation):
            return None
        found = [self._values(part) for part in node.parts]
        if node.op == "OR":
            if any(values is None for values in found):
                return None
            return frozenset().union(*(values for values in found if values is not None))
        pinned = sorted((values for values in found if values is not None), key=len)
        if not pinned:
            return None
        # AND: the values every part allows, as "=" compares them ("1" and "1.0" are one number).
        others = [{equality_key(v) for v in values} for values in pinned[1:]]
        return frozenset(
            v for v in pinned[0] if (key := equality_key(v)) is not None and all(key in o for o in others)
        )

    def matches(self, item: Any) -> bool:
        """``node.matches(item)``, evaluating only the branches that can hold for the item's ``path``.

        A job named in a 100-branch OR is matched against its own branch, not the other 99.
        """
        if self.node is None:
            return True
        value = item
        for segment in self.path:
            if not isinstance(value, Mapping) or segment not in value:
                return self.node.matches(item)
            value = value[segment]
        if isinstance(value, Mapping | list):
            return self.node.matches(item)
        residual = self.residual(value)
        return residual if isinstance(residual, bool) else residual.matches(item)

    def residual(self, value: Any, known: Mapping[FieldPath, Any] | None = None) -> Residual:
        """The filter for items whose field at ``path`` is ``value``: True, False, or what is left.

        ``known``: other fields every such item has (a job's log entries all say ``resource.type``
        ``ml_job``), substituted as well; no path there may be a prefix of another.
        """
        if self.node is None:
            return True
        item: dict[str, Any] = {}
        for path, known_value in [(self.path, value), *(known or {}).items()]:
            target = item
            for segment in path[:-1]:
                target = target.setdefault(segment, {})
            target[path[-1]] = known_value
        paths = frozenset({self.path, *(known or {})})
        return self._restrict(self.node, _Known(item, paths, equality_key(value)))

    def _restrict(self, node: Node, known: _Known) -> Residual:
        if isinstance(node, Comparison):
            return node.matches(known.item) if node.path in known.paths else node
        if isinstance(node, Negation):
            return _negated(node, self._restrict(node.part, known))
        if node.op == "AND":
            parts = node.parts
        else:
            by_value, free = self._grouped(node)
            # A branch pinned to other values cannot match: only this value's branches and the free ones.
            pinned = by_value.get(known.key, []) if known.key is not None else []
            parts = tuple(node.parts[i] for i in sorted({*pinned, *free}))
        return _junction(node, [self._restrict(part, known) for part in parts])

    def _grouped(self, node: Junction) -> tuple[dict[float | str, list[int]], list[int]]:
        grouped = self._branches.get(id(node))
        if grouped is None:
            by_value: dict[float | str, list[int]] = {}
            free: list[int] = []
            for index, part in enumerate(node.parts):
                values = self._values(part)
                if values is None:
                    free.append(index)
                    continue
                for key in {equality_key(v) for v in values}:
                    if key is not None:
                        by_value.setdefault(key, []).append(index)
            grouped = self._branches[id(node)] = (by_value, free)
        return grouped


@dataclass(frozen=True)
class _Known:
    item: dict[str, Any]  # the known fields, nested as in the items
    paths: frozenset[FieldPath]
    key: float | str | None  # the plan's field's value, as "=" compares it


def _negated(original: Negation, inner: Residual) -> Residual:
    if isinstance(inner, bool):
        return not inner
    return original if inner is original.part else Negation(inner)


def _junction(original: Junction, parts: list[Residual]) -> Residual:
    """``original`` over its simplified ``parts``: constants folded, unchanged parts kept as they were."""
    absorbing = original.op == "OR"  # True absorbs an OR, False an AND
    if absorbing in parts:
        return absorbing
    kept = [part for part in parts if not isinstance(part, bool)]
    if not kept:
        return not absorbing  # nothing left to require (AND) or nothing left that can match (OR)
    if len(kept) == 1:
        return kept[0]
    if len(kept) == len(original.parts) and all(a is b for a, b in zip(kept, original.parts, strict=True)):
        return original
    return Junction(original.op, tuple(kept))


def _lower_bound(comparison: Comparison, path: FieldPath) -> float | None:
    if comparison.path != path or comparison.op not in (">=", ">"):
        return None
    micros = instant_micros(comparison.value)
    if micros is None:
        return None
    return micros + 0.5 if comparison.op == ">" else micros


def timestamp_floor(residual: Residual, path: FieldPath = TIMESTAMP) -> float:
    """Microseconds since the epoch no matching item is stamped before; -inf if unbounded, inf if none.

    Only ``>=`` and ``>`` on an RFC 3339 instant bound it (``>`` as half a microsecond later: stamps
    are whole microseconds); AND takes the highest bound, OR the lowest.
    """
    if isinstance(residual, bool):
        return NO_FLOOR if residual else math.inf
    if isinstance(residual, Comparison):
        bound = _lower_bound(residual, path)
        return NO_FLOOR if bound is None else bound
    if isinstance(residual, Negation):
        return NO_FLOOR
    floors = [timestamp_floor(part, path) for part in residual.parts]
    return max(floors) if residual.op == "AND" else min(floors)


def at_or_after(residual: Residual, floor: float, path: FieldPath = TIMESTAMP) -> Residual:
    """``residual`` for items stamped at or after ``floor``: the lower bounds it already meets are True.

    After a bisect to a job's cursor, its branch's ``timestamp>=cursor`` need not be read per line.
    """
    if isinstance(residual, bool):
        return residual
    if isinstance(residual, Comparison):
        bound = _lower_bound(residual, path)
        return True if bound is not None and bound <= floor else residual
    if isinstance(residual, Negation):
        return _negated(residual, at_or_after(residual.part, floor, path))
    return _junction(residual, [at_or_after(part, floor, path) for part in residual.parts])

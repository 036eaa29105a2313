"""What every benchmark reports: a figure measured beside its baseline, in the same run.

A benchmark module is ``bench/bench_<topic>.py`` with ``run(repeats: int) -> list[Figure]``.
It raises when a measurement cannot be taken; the runner then exits non-zero.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Series:
    """Repeated samples of one quantity."""

    label: str
    samples: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def cell(self, unit: str) -> str:
        return f"{min(self.samples):.4g} / {self.median:.4g} / {max(self.samples):.4g} {unit}"


@dataclass
class Figure:
    """One measured figure: ours, an optional baseline, and an optional goal stated in words."""

    topic: str
    name: str
    unit: str
    ours: Series
    baseline: Series | None = None
    goal: str = ""
    goal_met: bool | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float | None:
        """ours / baseline on medians (below 1 means ours is smaller)."""
        if self.baseline is None or self.baseline.median == 0:
            return None
        return self.ours.median / self.baseline.median


def sample(fn: Callable[[], object], repeats: int) -> list[float]:
    """Wall seconds of ``fn`` over ``repeats`` calls."""
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out

"""A clock the test moves by hand: ``clock()`` is ``clock.now``, which only the test changes."""

from __future__ import annotations


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

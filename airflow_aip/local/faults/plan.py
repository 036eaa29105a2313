"""The fault plan: per request, whether and how it fails, and the counters ``/_stats`` shows.

Pure of I/O and shared by every server that injects faults (the API app and the Cloud Storage
proxy), so one ``/_stats`` counts both and one ``/_faults`` aims at either. Thread-safe: the
proxy runs in its own thread.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.local.faults.routes import ANY_METHOD, CREATE_METHODS
from airflow_aip.local.faults.rules import RANDOM_KINDS, WHEN, Fault, FaultRule
from airflow_aip.local.store import project_number


class FaultPlan:
    """Decides, per request, whether and how it fails; counts what happened.

    Targeted rules are consumed first, in the order they were added; otherwise a fault is drawn
    with probability ``rate`` (``seed`` makes the draws repeatable for one request order).
    """

    def __init__(
        self, rate: float = 0.0, seed: int | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValidationError("fault_rate", f"must be within [0, 1]; got {rate}")
        self.rate = rate
        self.seed = seed
        self._random = random.Random(seed)
        self._clock = clock
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []
        self._requests: Counter[str] = Counter()
        self._requests_by_project: defaultdict[str, Counter[str]] = defaultdict(Counter)
        self._answers: defaultdict[str, Counter[str]] = defaultdict(Counter)
        self._faults: defaultdict[str, Counter[str]] = defaultdict(Counter)

    def add(self, rules: Iterable[FaultRule]) -> None:
        with self._lock:
            now = self._clock()
            for rule in rules:
                if rule.for_seconds:
                    rule.ends_at = now + rule.for_seconds
                self._rules.append(rule)

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def rules(self) -> list[dict[str, Any]]:
        with self._lock:
            return [rule.to_json() for rule in self._live()]

    def _live(self) -> list[FaultRule]:
        """The rules, timed rules that ended dropped (called with the lock held)."""
        now = self._clock()
        self._rules[:] = [rule for rule in self._rules if not rule.expired(now)]
        return self._rules

    def decide(self, method: str) -> Fault | None:
        """Count the request and say what happens to it (None: nothing)."""
        with self._lock:
            self._requests[method] += 1
            fault = self._targeted(method) or self._drawn()
            if fault is not None:
                self._faults[method][fault.label] += 1
            return fault

    def _targeted(self, method: str) -> Fault | None:
        for rule in self._live():
            if rule.method in (ANY_METHOD, method):
                if rule.skip:
                    rule.skip -= 1
                    return None
                if rule.for_seconds:
                    return Fault(rule.kind, rule.when, rule.seconds)
                rule.count -= 1
                if rule.count == 0:
                    self._rules.remove(rule)
                return Fault(rule.kind, rule.when, rule.seconds)
        return None

    def _drawn(self) -> Fault | None:
        if self.rate <= 0 or self._random.random() >= self.rate:
            return None
        return Fault(self._random.choice(RANDOM_KINDS), self._random.choice(WHEN))

    def count_for_project(self, project: str, method: str) -> None:
        """One more ``method`` request about ``project``: what ``/_stats?project=`` counts, so a
        test can count its own calls while other tests use the same service."""
        with self._lock:
            self._requests_by_project[project][method] += 1

    def record_answer(self, method: str, status: int) -> None:
        """The status the service itself answered (before any fault replaced the answer)."""
        with self._lock:
            self._answers[method][str(status)] += 1

    def stats(self, project: str | None = None) -> dict[str, Any]:
        """Counters since start; ``created`` is the number of creates the service applied (both APIs).

        With ``project``, ``requests`` counts only the requests about that project (by its ID or
        its number, as Vertex AI's resource names give it).
        """
        with self._lock:
            if project is not None:  # a request may name the project by its ID or by its number
                named = {project, project_number(project)}
                counts = sum((self._requests_by_project[name] for name in named), Counter[str]())
                return {"project": project, "requests": dict(counts)}
            created = sum(
                n
                for method in CREATE_METHODS
                for status, n in self._answers[method].items()
                if status.startswith("2")
            )
            return {
                "fault_rate": self.rate,
                "fault_seed": self.seed,
                "created": created,
                "requests": dict(self._requests),
                "answers": {method: dict(counts) for method, counts in self._answers.items() if counts},
                "faults": {method: dict(counts) for method, counts in self._faults.items() if counts},
                "faults_injected": sum(sum(counts.values()) for counts in self._faults.values()),
                "rules": [rule.to_json() for rule in self._live()],
            }

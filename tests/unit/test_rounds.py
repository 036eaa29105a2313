"""The round scheduler under both pollers, on a fake clock: when rounds run, and when the task ends."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

from airflow_aip.triggers.rounds import NEVER, RoundScheduler

BOUND: contextvars.ContextVar[str] = contextvars.ContextVar("bound", default="unbound")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


class Rounds(RoundScheduler):
    """Reads each registered name every ``interval`` seconds; a name in ``failing`` breaks a round."""

    def __init__(self, clock: Clock, interval: float = 5.0, **kwargs: Any) -> None:
        super().__init__(clock=clock.clock, sleep=clock.sleep, **kwargs)
        self.interval = interval
        self.due: dict[str, float] = {}
        self.rounds: list[tuple[float, list[str], str]] = []
        self.failing: set[str] = set()

    def register(self, name: str) -> None:
        self.due[name] = self.clock()
        self.due_at(self.due[name])
        self.start()

    def leave(self, name: str) -> None:
        self.due.pop(name, None)
        self.wake()

    def registered(self) -> bool:
        return bool(self.due)

    def next_wake(self) -> float:
        return min(self.due.values(), default=NEVER)

    async def run_round(self) -> None:
        now = self.clock()
        read = sorted(name for name, due in self.due.items() if due <= now)
        self.rounds.append((now, read, BOUND.get()))
        if self.failing & set(read):
            raise KeyError("a bug of ours")
        for name in read:
            self.due[name] = now + self.interval


async def _until(condition: Any) -> None:
    for _ in range(10_000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")


async def test_rounds_run_when_due_and_the_task_ends_when_nobody_is_registered() -> None:
    clock, idle = Clock(), []
    rounds = Rounds(clock, on_idle=lambda: idle.append(True))
    rounds.register("a")
    rounds.register("b")
    await _until(lambda: len(rounds.rounds) >= 3)
    assert [read for _, read, _ in rounds.rounds[:3]] == [["a", "b"]] * 3
    assert [at for at, _, _ in rounds.rounds[:3]] == [100.0, 105.0, 110.0]  # every interval, together
    rounds.leave("a")
    rounds.leave("b")
    assert rounds.task is not None
    await rounds.task
    assert idle == [True]  # forgotten, so the next registration starts afresh
    rounds.register("c")
    assert rounds.task is not None
    assert not rounds.task.done()
    await _until(lambda: any(read == ["c"] for _, read, _ in rounds.rounds))
    rounds.leave("c")
    await rounds.task


async def test_the_task_runs_in_a_fresh_context_not_the_first_registrant_s() -> None:
    rounds = Rounds(Clock())
    BOUND.set("the first trigger")
    rounds.register("a")
    await _until(lambda: rounds.rounds)
    assert rounds.rounds[0][2] == "unbound"
    rounds.leave("a")
    assert rounds.task is not None
    await rounds.task


async def test_a_failing_round_is_logged_paused_after_and_the_rest_carry_on(caplog: Any) -> None:
    clock = Clock()
    rounds = Rounds(clock, interval=5.0)
    rounds.failure_pause = 2.0
    rounds.failing = {"bad"}
    rounds.register("bad")
    await _until(lambda: len(rounds.rounds) >= 2)
    assert rounds.rounds[1][0] - rounds.rounds[0][0] == 2.0  # the pause, never a spin
    assert "The Rounds failed a round; it carries on" in caplog.messages
    rounds.failing.clear()
    await _until(lambda: len(rounds.rounds) >= 4)
    rounds.leave("bad")
    assert rounds.task is not None
    await rounds.task


async def test_a_registration_due_sooner_wakes_a_sleeping_task() -> None:
    clock = Clock()

    async def sleep_until_woken(seconds: float) -> None:
        clock.sleeps.append(seconds)
        await asyncio.Event().wait()  # only a wake-up ends this idle

    rounds = Rounds(clock, interval=60.0)
    rounds.sleep = sleep_until_woken
    rounds.register("slow")
    await _until(lambda: clock.sleeps == [60.0])  # read once, then idle for the interval
    rounds.register("new")  # due now: the idle ends at once
    await _until(lambda: any(read == ["new"] for _, read, _ in rounds.rounds))
    rounds.leave("slow")
    rounds.leave("new")
    assert rounds.task is not None
    await rounds.task


async def test_without_start_rounds_a_test_drives_the_rounds_itself() -> None:
    rounds = Rounds(Clock())
    rounds.start_rounds = False
    rounds.register("a")
    assert rounds.task is None
    await rounds.run_round()
    assert rounds.rounds[0][1] == ["a"]

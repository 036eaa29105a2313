"""The triggerer's shared log poller, on a fake clock against a fake ``entries.list``.

Each test runs the poller's real task; only time is simulated (the poller's sleeps jump the
clock), so ten simulated minutes of 1,000 followers take a few CPU seconds, and no assertion
depends on how fast the machine is. The fakes are in tests/unit/logging_fake.py.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import logging
import random
import re
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_aip.exceptions import ApiError
from airflow_aip.hooks.http_shared import clear_shared_auth
from airflow_aip.jobs.log_reads import (
    FILTER_BUDGET_CHARS,
    MAX_FILTER_CHARS,
    WINDOW_SECONDS,
    ReadBudget,
    batch_filter,
)
from airflow_aip.jobs.logs import Line, LogCursor, LogStream, normalize_timestamp
from airflow_aip.local.logs.filters import parse_filter
from airflow_aip.triggers.log_polling import LogFollow, LogPoller, log_poller
from airflow_aip.triggers.rounds import NEVER
from tests.unit.logging_fake import FakeCloudLogging, FakeTime, fake_hook, stamp, throttled

START = 1000.0
BOUND: contextvars.ContextVar[str] = contextvars.ContextVar("bound", default="unbound")


class Relay:
    """What a trigger does with delivered lines: keeps them, and when they came."""

    def __init__(self, time: FakeTime) -> None:
        self.time = time
        self.lines: list[Line] = []
        self.arrived: dict[str, float] = {}

    def __call__(self, lines: list[Line]) -> None:
        self.lines.extend(lines)
        for _level, message in lines:
            self.arrived.setdefault(message, self.time.now)

    def job_lines(self) -> list[str]:
        return [message for _level, message in self.lines if message.startswith("[")]

    def notices(self) -> list[str]:
        return [message for _level, message in self.lines if not message.startswith("[")]


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    clear_shared_auth()
    yield
    clear_shared_auth()


@pytest.fixture
def time() -> FakeTime:
    return FakeTime(START)


@pytest.fixture
def api(time: FakeTime) -> FakeCloudLogging:
    return FakeCloudLogging(time)


def poller_for(
    api: FakeCloudLogging, time: FakeTime, budget: ReadBudget | None = None, **hook: Any
) -> LogPoller:
    budget = budget or ReadBudget(1000, burst=1000)
    return LogPoller(fake_hook(api, **hook), "proj", budget=budget, clock=time.clock, sleep=time.sleep)


def stream(job_id: str) -> LogStream:
    return LogStream.for_job(job_id, stamp(0), lines_per_minute=1_000_000)


async def run_until(time: FakeTime, when: float) -> None:
    reached = asyncio.Event()
    time.at(when, reached.set)
    await reached.wait()


async def stop(poller: LogPoller, follows: list[LogFollow]) -> None:
    for follow in follows:
        follow.close()
    assert poller.task is not None
    await poller.task


# -- the filter ------------------------------------------------------------------------------


def test_a_batch_filter_parenthesises_each_job_and_bounds_the_time() -> None:
    a = LogStream("A", LogCursor(normalize_timestamp(stamp(2)) or "", {"x"}))
    b, c = LogStream("B"), LogStream("C", LogCursor(normalize_timestamp(stamp(1)) or ""))
    assert batch_filter([a, b]) == (
        'resource.type="ml_job" AND ((resource.labels.job_id="A" AND timestamp>='
        '"2024-05-01T00:00:02.000000000Z") OR (resource.labels.job_id="B"))'
    )
    assert batch_filter([a, c]).startswith(
        'resource.type="ml_job" AND timestamp>="2024-05-01T00:00:01.000000000Z" AND (('
    )
    assert batch_filter([a]) == a.filter
    node = parse_filter(batch_filter([a, b]))
    assert node is not None

    def entry(job: str, second: int, kind: str = "ml_job") -> dict[str, Any]:
        return {"timestamp": stamp(second), "resource": {"type": kind, "labels": {"job_id": job}}}

    assert node.matches(entry("A", 3))
    assert not node.matches(entry("A", 1))  # before A's cursor
    assert node.matches(entry("B", 0))  # B has no cursor
    assert not node.matches(entry("C", 3))
    assert not node.matches(entry("B", 3, kind="gce_instance"))


async def test_a_thousand_jobs_are_read_in_batches_under_the_filter_limit(
    time: FakeTime, api: FakeCloudLogging
) -> None:
    poller = poller_for(api, time)
    ids = [f"job_{n:04d}_{'x' * 100}" for n in range(1000)]  # ml v1 allows 128 characters
    for job_id in ids:
        api.add(job_id, 1)
    relays = {job_id: Relay(time) for job_id in ids}
    follows = [poller.follow(stream(job_id), relays[job_id], interval=30) for job_id in ids]
    await run_until(time, START + 10)
    filters = [body["filter"] for _, body in api.calls]
    assert all(len(text) <= FILTER_BUDGET_CHARS < MAX_FILTER_CHARS for text in filters)
    assert 7 <= len(filters) <= 12  # ~150 jobs a batch
    assert all(len(relay.job_lines()) == 1 for relay in relays.values())  # every job routed its line
    await stop(poller, follows)


# -- the budget ------------------------------------------------------------------------------


def most_in_a_minute(times: list[float]) -> int:
    return max((sum(1 for u in times if t <= u < t + 60 - 1e-6) for t in times), default=0)


def test_the_budget_bursts_then_paces_and_no_minute_holds_more_than_the_rate() -> None:
    budget = ReadBudget(30, burst=5)
    sent: list[float] = []
    now = 0.0
    while now < 600:
        wait = budget.delay(now)
        if wait:
            now += wait
            continue
        budget.spend(now)
        sent.append(now)
    assert sent[:5] == [0.0] * 5
    assert sent[5] == pytest.approx(2.0)  # then one every 2 s: 30 a minute
    assert most_in_a_minute(sent) == 30
    burst = ReadBudget(30, burst=30)  # a burst as large as the rate: the minute still caps it
    for _ in range(30):
        burst.spend(0.0)
    assert burst.delay(0.0) == pytest.approx(WINDOW_SECONDS)  # a minute, and a second of margin


def test_a_429_empties_the_bucket_and_halves_the_rate_until_successes_bring_it_back() -> None:
    budget = ReadBudget(30)
    budget.spend(0.0)
    budget.throttled(0.0)
    assert budget.rate == 15
    assert budget.delay(0.0) == pytest.approx(4.0)  # empty: the next token at the halved rate
    for _ in range(14):
        budget.succeeded()
    assert budget.rate == 29
    budget.succeeded()
    budget.succeeded()
    assert budget.rate == 30  # never above the configured rate
    for _ in range(10):
        budget.throttled(1.0)
    assert budget.rate == 1
    with pytest.raises(ValueError, match="reads per minute"):
        ReadBudget(0)


async def test_a_thousand_followers_for_ten_minutes_stay_within_the_budget(
    time: FakeTime, api: FakeCloudLogging
) -> None:
    poller = poller_for(api, time, ReadBudget(30))
    ids = [str(9_000_000_000_000_000_000 + n) for n in range(1000)]  # Vertex AI's numeric ids
    relays = {job_id: Relay(time) for job_id in ids}
    follows = [poller.follow(stream(job_id), relays[job_id], interval=30) for job_id in ids]
    for minute in range(10):
        for job_id in ids[minute::100]:  # a few jobs write a line each minute
            api.add(job_id, 1, visible_at=START + 60 * minute)
    await run_until(time, START + 600)
    times = [when for when, _ in api.calls]
    assert most_in_a_minute(times) <= 30
    read_at: dict[str, list[float]] = {}
    for when, body in api.calls:
        for job_id in re.findall(r'job_id="(\d+)"', body["filter"]):
            read_at.setdefault(job_id, []).append(when)
    assert len(read_at) == 1000
    gaps = [b - a for reads in read_at.values() for a, b in itertools.pairwise(reads)]
    assert max(gaps) <= 30 + 15  # every job read each poll interval, give or take the coalescing
    assert all(relay.notices() == [] for relay in relays.values())
    lines = [len(relays[job_id].job_lines()) for job_id in ids]
    assert lines == [1 if n % 100 < 10 else 0 for n in range(1000)]  # the writers' lines, all of them
    await stop(poller, follows)


async def test_a_429_slows_the_projects_budget_and_costs_only_a_notice(
    time: FakeTime, api: FakeCloudLogging
) -> None:
    budget = ReadBudget(30)
    poller = poller_for(api, time, budget)
    api.errors.append(throttled())
    rates: list[float] = []
    api.on_call = lambda body: rates.append(budget.rate)
    relays = {job_id: Relay(time) for job_id in ("a", "b")}
    for job_id in relays:
        api.add(job_id, 2)
    follows = [poller.follow(stream(job_id), relay, interval=10) for job_id, relay in relays.items()]
    await run_until(time, START + 60)
    (first, _), (second, _) = api.calls[:2]
    assert second - first >= 4.0  # bucket emptied, rate halved: one read per 4 s at most
    assert rates[:3] == [30, 15, 16]  # halved by the 429, one more a minute per success
    for job_id, relay in relays.items():
        warning, again = relay.notices()
        assert warning.startswith(f"Could not read the logs of training job {job_id} (ApiError: ")
        assert "HTTP 429" in warning
        assert "read quota is spent" in warning
        assert again == f"Reading the logs of training job {job_id} again"
        assert len(relay.job_lines()) == 2
    await stop(poller, follows)


# -- registration ----------------------------------------------------------------------------


async def test_one_poller_per_identity_and_project_stopped_when_its_last_follower_leaves(
    time: FakeTime, api: FakeCloudLogging, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW__AIP__LOG_READS_PER_MINUTE", "12")
    hook = fake_hook(api)
    poller = log_poller(hook, "proj", clock=time.clock, sleep=time.sleep)
    assert poller.budget.ceiling == 12  # [aip] log_reads_per_minute
    assert log_poller(fake_hook(api), "proj") is poller  # another trigger's hook, same identity
    other_identity = log_poller(fake_hook(api, conn_id="other_conn"), "proj")
    assert other_identity is not poller
    assert other_identity.budget is poller.budget  # the quota is the project's
    other_project = log_poller(hook, "other-project")
    assert other_project is not poller
    assert other_project.budget is not poller.budget
    a = poller.follow(stream("a"), Relay(time), interval=30)
    b = poller.follow(stream("b"), Relay(time), interval=30)
    task = poller.task
    assert task is not None
    a.close()
    a.close()  # idempotent
    await a.drained()  # a closed follow's drain waits for nothing
    assert log_poller(hook, "proj") is poller
    assert not task.done()
    b.close()
    await task  # the task ends when nobody follows
    assert log_poller(hook, "proj") is not poller  # forgotten: the next follower starts anew


def test_event_loops_share_no_poller_and_no_budget(time: FakeTime, api: FakeCloudLogging) -> None:
    hook = fake_hook(api)

    async def poller() -> LogPoller:
        return log_poller(hook, "proj")

    first, second = asyncio.run(poller()), asyncio.run(poller())
    assert first is not second
    assert first.budget is not second.budget


async def test_the_poller_runs_in_a_fresh_context(time: FakeTime, api: FakeCloudLogging) -> None:
    """The triggerer binds a task's log context in each trigger's task: the poller must not inherit one."""
    BOUND.set("the first trigger's")
    seen: list[str] = []
    api.on_call = lambda body: seen.append(BOUND.get())
    poller = poller_for(api, time)
    follow = poller.follow(stream("a"), Relay(time), interval=5)
    await run_until(time, START + 20)
    assert seen
    assert set(seen) == {"unbound"}
    await stop(poller, [follow])


# -- what is read, and when ------------------------------------------------------------------


async def test_every_line_once_and_in_order_across_pages_rounds_and_drains(
    time: FakeTime, api: FakeCloudLogging
) -> None:
    poller = poller_for(api, time, page_size=7)
    rng = random.Random(7)
    jobs = ["a", "b", "c", "d"]
    expected: dict[str, list[str]] = {job_id: [] for job_id in jobs}
    for step in range(40):
        for job_id in jobs:
            at = START + 3 * step
            if step % 9 == 4:  # more lines at one instant than a page holds
                expected[job_id] += api.add(job_id, 10, visible_at=at, together=True)
            else:
                expected[job_id] += api.add(job_id, rng.randint(0, 12), visible_at=at)
    relays = {job_id: Relay(time) for job_id in jobs}
    follows = {job_id: poller.follow(stream(job_id), relays[job_id], interval=5) for job_id in jobs}
    for job_id, follow in follows.items():
        time.at(START + 130, follow.end)
        expected[job_id] += api.add(job_id, 3, visible_at=START + 133)  # ingested after the end
    for follow in follows.values():
        await follow.drained()
    for job_id in jobs:
        assert relays[job_id].job_lines() == expected[job_id]
        assert relays[job_id].notices() == []
    await stop(poller, list(follows.values()))


async def test_a_job_that_fills_a_shared_page_is_read_alone_and_pages_on(
    time: FakeTime, api: FakeCloudLogging
) -> None:
    poller = poller_for(api, time, page_size=100)
    api.add("chatty", 350)
    quiet = [f"q{n}" for n in range(5)]
    relays = {job_id: Relay(time) for job_id in ["chatty", *quiet]}
    for job_id in quiet:
        api.add(job_id, 2)  # written after the chatty job's backlog: past the first page
    delivered: list[int] = []
    api.on_call = lambda body: delivered.append(sum(len(relays[q].job_lines()) for q in quiet))
    follows = [poller.follow(stream(job_id), relay, interval=30) for job_id, relay in relays.items()]
    await run_until(time, START + 20)
    shared, alone, quiet_batch, paging = (body for _, body in api.calls[:4])
    assert all(f'job_id="{job_id}"' in shared["filter"] for job_id in relays)  # one read for all six
    assert alone["filter"] == follows[0].stream.filter or 'job_id="q' not in alone["filter"]
    assert 'job_id="chatty"' not in quiet_batch["filter"]
    assert delivered[:4] == [0, 0, 0, 10]  # the first page held the chatty job's lines only
    assert paging["pageToken"] == "100"  # alone, it pages on through its backlog
    assert "pageToken" not in quiet_batch
    assert len(relays["chatty"].job_lines()) == 350
    assert all(len(relays[job_id].job_lines()) == 2 for job_id in quiet)
    await stop(poller, follows)


async def test_ten_chatty_jobs_cannot_starve_990_quiet_ones(time: FakeTime, api: FakeCloudLogging) -> None:
    """The chatty jobs write more than the budget can read: they lag, the quiet ones must not."""
    poller = poller_for(api, time, ReadBudget(30), page_size=500)
    ids = [f"c{n}" if n % 100 == 0 else f"q{n:03d}" for n in range(1000)]
    chatty = [job_id for job_id in ids if job_id.startswith("c")]
    quiet_lines: dict[str, list[tuple[str, float]]] = {}
    for second in range(0, 200, 10):
        for job_id in chatty:
            api.add(job_id, 600, visible_at=START + second)  # 60 lines a second each: 2 pages
        if second in (0, 100):
            for job_id in ids:
                if job_id not in chatty:
                    (line,) = api.add(job_id, 1, visible_at=START + second)
                    quiet_lines.setdefault(job_id, []).append((line, START + second))
    relays = {job_id: Relay(time) for job_id in ids}
    follows = [poller.follow(stream(job_id), relays[job_id], interval=30) for job_id in ids]
    await run_until(time, START + 200)
    arrived = relays[ids[1]].arrived
    waits = [
        relays[job_id].arrived.get(line, NEVER) - visible
        for job_id, lines in quiet_lines.items()
        for line, visible in lines
    ]
    assert arrived
    assert len(waits) == 2 * 990
    assert max(waits) <= 90  # every quiet line within three poll intervals, chatty neighbours or not
    await stop(poller, follows)


async def test_the_drain_reads_until_a_settled_read_brings_nothing(
    time: FakeTime, api: FakeCloudLogging
) -> None:
    poller = poller_for(api, time)
    lines = api.add("a", 3)
    relay = Relay(time)
    follow = poller.follow(stream("a"), relay, interval=30)
    time.at(START + 40, follow.end)
    lines += api.add("a", 1, visible_at=START + 43)  # Cloud Logging's ingestion delay
    lines += api.add("a", 1, visible_at=START + 47)
    await follow.drained()
    assert relay.job_lines() == lines
    assert relay.notices() == []
    # A read every interval; once ended, every settle = min(interval, DRAIN_INTERVAL) = 5 s, until a
    # read at least 5 s after the end brought nothing.
    assert [when - START for when, _ in api.calls] == [0, 30, 40, 45, 50, 55]
    await stop(poller, [follow])


async def test_a_drain_that_never_settles_stops_at_its_limit_with_a_warning_last(
    time: FakeTime, api: FakeCloudLogging
) -> None:
    poller = poller_for(api, time)
    for second in range(0, 200, 2):
        api.add("a", 1, visible_at=START + second)
    relay = Relay(time)
    follow = poller.follow(stream("a"), relay, interval=5)
    time.at(START + 10, follow.end)
    await follow.drained()
    assert time.now - (START + 10) == pytest.approx(60.0)
    assert relay.lines[-1] == (
        "warning",
        "Stopped reading the logs of training job a 60s after it ended; the rest is in Cloud Logging",
    )
    await stop(poller, [follow])


async def test_a_drain_the_budget_cannot_serve_stops_at_its_limit(
    time: FakeTime, api: FakeCloudLogging
) -> None:
    poller = poller_for(api, time, ReadBudget(1))
    api.errors.append(throttled())  # rate 1 a minute, bucket emptied: no read for a minute
    api.add("a", 2)
    relay = Relay(time)
    follow = poller.follow(stream("a"), relay, interval=5)
    time.at(START + 2, follow.end)
    await follow.drained()
    assert time.now == pytest.approx(START + 62)
    assert len(relay.job_lines()) == 2  # the read at START + 61 brought them: the drain was not over
    assert relay.notices()[-1].startswith("Stopped reading the logs of training job a 60s after it ended")
    await stop(poller, [follow])


# -- failures --------------------------------------------------------------------------------


async def test_failed_reads_cost_a_notice_first_and_every_tenth_then_lines_resume(
    time: FakeTime, api: FakeCloudLogging
) -> None:
    poller = poller_for(api, time)
    api.errors.append(RuntimeError("connection reset"))
    api.errors.extend(ApiError(503, "unavailable", method="entries.list") for _ in range(11))
    lines = api.add("a", 2)
    relay = Relay(time)
    follow = poller.follow(stream("a"), relay, interval=1)
    await run_until(time, START + 30)
    first, tenth, again = relay.notices()
    assert first.startswith("Could not read the logs of training job a (RuntimeError: connection reset)")
    assert "HTTP 503" in tenth
    assert again == "Reading the logs of training job a again"
    assert relay.job_lines() == lines
    await stop(poller, [follow])


async def test_the_poller_survives_a_bug_and_a_failing_deliver(
    time: FakeTime, api: FakeCloudLogging, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="airflow_aip.triggers.log_polling")
    poller = poller_for(api, time)
    broken = poller._next_batch
    calls = {"n": 0}

    def buggy(waiting: list[LogFollow]) -> list[LogFollow]:
        calls["n"] += 1
        if calls["n"] == 1:
            raise KeyError("a bug of ours")
        return broken(waiting)

    poller._next_batch = buggy  # type: ignore[method-assign]

    def refuse(lines: list[Line]) -> None:
        raise RuntimeError("a trigger's queue is gone")

    lines = api.add("ok", 2)
    api.add("refusing", 2)
    relay = Relay(time)
    follows = [
        poller.follow(stream("ok"), relay, interval=5),
        poller.follow(stream("refusing"), refuse, interval=5),
    ]
    await run_until(time, START + 20)
    assert relay.job_lines() == lines
    messages = [record.getMessage() for record in caplog.records]
    assert "The log poller of project proj failed a round; it carries on" in messages
    assert "Delivering log lines of training job refusing failed" in messages
    await stop(poller, follows)

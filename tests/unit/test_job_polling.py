"""The triggerer's shared job poller, round by round on a fake clock.

Vertex AI cases talk to the local service's real aiplatform face in process (its ASGI app,
runner threads not started: jobs stay where the test puts them); ml v1 cases to the fake ml
API at the HTTP boundary, for the failures no server produces on demand.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from airflow_aip.hooks.training import TrainingJobHook
from airflow_aip.hooks.vertex import VertexJobHook
from airflow_aip.jobs.states import JobState
from airflow_aip.jobs.waiting import Seen
from airflow_aip.jobs.watch import Listed, WatchBatch
from airflow_aip.local.api import create_app
from airflow_aip.local.service import ServiceConfig, TrainingService
from airflow_aip.local.store import project_number
from airflow_aip.triggers import job_polling
from airflow_aip.triggers.job_polling import JobPoller, job_poller
from tests.fixtures.vertex import WORKER_POOL as POOL
from tests.unit.clock import Clock
from tests.unit.ml_fake import FakeMlApi

LOCAL = "http://127.0.0.1:8089/"
PARENT = "/v1/projects/proj/locations/us-central1"


class Inbox:
    """What the poller handed to each watch, in order."""

    def __init__(self) -> None:
        self.seen: dict[str, list[Seen]] = {}

    def deliver_to(self, name: str) -> Any:
        return lambda seen: self.seen.setdefault(name, []).append(seen)

    def states(self, name: str) -> list[str]:
        return [str(seen.job["state"]) if seen.job else "error" for seen in self.seen.get(name, [])]


class Vertex:
    """The local service's aiplatform face, in process, with every request path counted."""

    def __init__(self, tmp_path: Path) -> None:
        self.service = TrainingService(ServiceConfig(tmp_path / "data", storage_url=None))
        self.app = create_app(self.service)
        self.http = TestClient(self.app)
        self.paths: list[str] = []

    def create(self, kind: str, job_id: str, label: str | None = None) -> str:
        body: dict[str, Any] = {"displayName": job_id, "labels": {"aip_job_id": label or job_id}}
        if kind == "customJobs":
            body["jobSpec"] = {"workerPoolSpecs": [POOL]}
        else:
            parameters = [{"parameterId": "lr", "doubleValueSpec": {"minValue": 0.1, "maxValue": 1.0}}]
            study = {"metrics": [{"metricId": "acc", "goal": "MAXIMIZE"}], "parameters": parameters}
            body |= {"maxTrialCount": 2, "parallelTrialCount": 1, "studySpec": study}
            body["trialJobSpec"] = {"workerPoolSpecs": [POOL]}
        response = self.http.post(f"{PARENT}/{kind}", json=body)
        assert response.status_code == 200, response.text
        return str(response.json()["name"])

    def set_state(self, name: str, state: str) -> None:
        job_id = name.rsplit("/", 1)[-1]
        self.service.store.update(project_number("proj"), job_id, lambda job: job.update(state=state))

    def hook(self) -> VertexJobHook:
        async def count(request: httpx.Request) -> None:
            self.paths.append(f"{request.method} {request.url.path}")

        transport = httpx.ASGITransport(app=self.app)
        client = httpx.AsyncClient(transport=transport, event_hooks={"request": [count]})
        hook = VertexJobHook("aip_missing_conn", region="us-central1", project_id="proj", api_endpoint=LOCAL)
        hook.retry_attempts = 1
        hook._client_slot = lambda: nullcontext(client)  # type: ignore[method-assign]
        return hook

    def calls(self, verb: str, suffix: str) -> int:
        return sum(1 for path in self.paths if path.startswith(verb) and path.endswith(suffix))


@pytest.fixture
def vertex(tmp_path: Path) -> Iterator[Vertex]:
    vertex = Vertex(tmp_path)
    yield vertex
    vertex.service.stop()


def ml_hook(api: FakeMlApi) -> TrainingJobHook:
    client = httpx.AsyncClient(transport=api.httpx_transport())
    hook = TrainingJobHook("aip_missing_conn", project_id="proj", api_endpoint=LOCAL, retry_attempts=1)
    hook._client_slot = lambda: nullcontext(client)  # type: ignore[method-assign]
    return hook


def poller_of(hook: Any, clock: Clock) -> JobPoller:
    poller = JobPoller(hook, clock=clock)
    poller.start_rounds = False  # the test drives poll_round() itself
    return poller


async def test_one_list_call_reads_a_hundred_jobs(vertex: Vertex) -> None:
    names = [vertex.create("customJobs", f"job_{i:03d}") for i in range(250)]
    clock, inbox = Clock(), Inbox()
    poller = poller_of(vertex.hook(), clock)
    for i, name in enumerate(names):
        poller.watch(name, f"job_{i:03d}", 10.0, inbox.deliver_to(name))
    clock.now += 1
    assert await poller.poll_round() == 250
    assert vertex.calls("GET", "/customJobs") == 3  # ceil(250 / 100)
    assert vertex.calls("GET", "") == 3  # and not one get
    assert all(inbox.states(name) == ["QUEUED"] for name in names)


async def test_only_jobs_whose_state_changed_wake_their_trigger(vertex: Vertex) -> None:
    names = [vertex.create("customJobs", f"job_{i}") for i in range(5)]
    clock, inbox = Clock(), Inbox()
    poller = poller_of(vertex.hook(), clock)
    watches = [poller.watch(name, f"job_{i}", 10.0, inbox.deliver_to(name)) for i, name in enumerate(names)]
    clock.now += 1
    await poller.poll_round()
    for watch in watches:
        watch.read_in(10.0)  # what each trigger's wait step decides for a job still pending
    clock.now += 10
    assert await poller.poll_round() == 5
    assert sum(len(seen) for seen in inbox.seen.values()) == 5  # nothing new: nobody woken
    vertex.set_state(names[1], "RUNNING")
    vertex.set_state(names[3], "SUCCEEDED")
    clock.now += 10
    assert await poller.poll_round() == 5  # the unchanged ones were due again after the interval
    assert inbox.states(names[1]) == ["QUEUED", "RUNNING"]
    assert inbox.states(names[3]) == ["QUEUED", "SUCCEEDED"]
    assert inbox.states(names[0]) == ["QUEUED"]
    assert vertex.calls("GET", "/customJobs") == 3


async def test_watches_due_within_half_an_interval_share_a_round(vertex: Vertex) -> None:
    names = [vertex.create("customJobs", f"job_{i}") for i in range(3)]
    clock, inbox = Clock(), Inbox()
    poller = poller_of(vertex.hook(), clock)
    watches = [poller.watch(name, f"job_{i}", 10.0, inbox.deliver_to(name)) for i, name in enumerate(names)]
    for watch, due in zip(watches, (0.0, 4.0, 6.0), strict=True):
        watch.read_in(due)
    assert poller.next_round_at() == clock.now
    assert await poller.poll_round() == 2  # due now, and due within 5 s; not the one due in 6 s
    assert poller.next_round_at() == clock.now + 6.0
    assert vertex.calls("GET", "/customJobs") == 1


async def test_a_job_the_list_does_not_answer_is_read_with_a_get(vertex: Vertex) -> None:
    ours = vertex.create("customJobs", "ours")
    theirs = vertex.create("customJobs", "theirs", label="someone-elses")
    clock, inbox = Clock(), Inbox()
    poller = poller_of(vertex.hook(), clock)
    poller.watch(ours, "ours", 10.0, inbox.deliver_to(ours))
    poller.watch(theirs, theirs.rsplit("/", 1)[-1], 10.0, inbox.deliver_to(theirs))  # by resource name
    clock.now += 1
    await poller.poll_round()
    assert inbox.states(ours) == inbox.states(theirs) == ["QUEUED"]
    assert vertex.calls("GET", "/customJobs") == 1
    assert vertex.calls("GET", theirs) == 1
    assert vertex.calls("GET", ours) == 0


async def test_an_ended_tuning_job_is_read_whole_for_its_trials(vertex: Vertex) -> None:
    name = vertex.create("hyperparameterTuningJobs", "tuned")
    clock, inbox = Clock(), Inbox()
    poller = poller_of(vertex.hook(), clock)
    watch = poller.watch(name, "tuned", 10.0, inbox.deliver_to(name))
    clock.now += 1
    await poller.poll_round()
    assert vertex.calls("GET", name) == 0  # still pending: the list is enough
    vertex.set_state(name, "SUCCEEDED")
    watch.read_in(0)
    await poller.poll_round()
    assert inbox.states(name) == ["QUEUED", "SUCCEEDED"]
    assert vertex.calls("GET", name) == 1  # the list leaves trials out: one get, at the end
    assert "trials" in inbox.seen[name][-1].job  # type: ignore[operator]


async def test_a_list_answered_as_last_round_is_not_parsed_again(vertex: Vertex) -> None:
    """The same bytes say the same states; a view is parsed from them only when someone asks."""
    names = [vertex.create("customJobs", f"job_{i}") for i in range(3)]
    hook = vertex.hook()
    (batch,) = hook.watch_batches([(name, f"job_{i}") for i, name in enumerate(names)])
    parsed: list[int] = []
    match = hook._listed

    def counted(batch: WatchBatch, listed: list[dict[str, Any]]) -> dict[str, Listed]:
        parsed.append(len(listed))
        return match(batch, listed)

    hook._listed = counted  # type: ignore[method-assign]
    first = await hook.alist_batch(batch)
    again = await hook.alist_batch(batch)
    assert parsed == [3]
    assert {name: read.state for name, read in again.items()} == {n: r.state for n, r in first.items()}
    listed, got = again[names[0]].view(), await hook.aread(names[0])
    assert listed == first[names[0]].view()
    assert listed["spec"] == {k: v for k, v in got["spec"].items() if k != "updateTime"}  # not asked for
    assert {k: v for k, v in listed.items() if k != "spec"} == {k: v for k, v in got.items() if k != "spec"}
    assert parsed == [3, 3]  # that view: the answer in hand, parsed once it was asked for
    vertex.set_state(names[1], "RUNNING")
    changed = await hook.alist_batch(batch)
    assert parsed == [3, 3, 3]
    assert changed[names[1]].state is JobState.RUNNING
    assert vertex.calls("GET", "/customJobs") == 3  # a list call each time: nothing is skipped


async def test_an_answer_longer_than_a_page_is_read_whole_and_not_remembered(vertex: Vertex) -> None:
    names = [vertex.create("customJobs", f"job_{i:03d}") for i in range(100)]
    vertex.create("customJobs", "twin", label="job_042")  # a race made two jobs with one label
    hook = vertex.hook()
    (batch,) = hook.watch_batches([(name, f"job_{i:03d}") for i, name in enumerate(names)])
    for _ in range(2):
        assert set(await hook.alist_batch(batch)) == set(names)
    assert vertex.calls("GET", "/customJobs") == 4  # two pages, twice: a long answer is parsed each time


async def test_two_triggers_watching_one_job_each_hear_it(vertex: Vertex) -> None:
    name = vertex.create("customJobs", "shared")
    clock = Clock()
    poller = poller_of(vertex.hook(), clock)
    heard: dict[str, list[str]] = {"a": [], "b": []}

    def deliver_to(who: str) -> Any:
        return lambda seen: heard[who].append(seen.job["state"] if seen.job else "error")

    first = poller.watch(name, "shared", 10.0, deliver_to("a"))
    second = poller.watch(name, "shared", 10.0, deliver_to("b"))
    clock.now += 1
    assert await poller.poll_round() == 2
    assert heard == {"a": ["QUEUED"], "b": ["QUEUED"]}
    assert vertex.calls("GET", "/customJobs") == 1  # one job, one read
    first.close()
    vertex.set_state(name, "RUNNING")
    second.read_in(0)
    assert await poller.poll_round() == 1
    assert heard == {"a": ["QUEUED"], "b": ["QUEUED", "RUNNING"]}
    assert list(poller.named) == [name]
    second.close()
    assert poller.named == {}


async def test_a_round_of_the_same_jobs_reuses_the_last_rounds_batches(vertex: Vertex) -> None:
    names = [vertex.create("customJobs", f"job_{i}") for i in range(3)]
    clock, inbox = Clock(), Inbox()
    hook = vertex.hook()
    built: list[int] = []
    batches = hook.watch_batches

    def counted(watched: Sequence[tuple[str, str]]) -> list[WatchBatch]:
        built.append(len(watched))
        return batches(watched)

    hook.watch_batches = counted  # type: ignore[method-assign]
    poller = poller_of(hook, clock)
    watches = [poller.watch(name, f"job_{i}", 10.0, inbox.deliver_to(name)) for i, name in enumerate(names)]
    for _ in range(3):
        clock.now += 10
        await poller.poll_round()
        for watch in watches:
            watch.read_in(10.0)
    assert built == [3]  # the same jobs, round after round: the same list calls
    watches.pop().close()
    clock.now += 10
    await poller.poll_round()
    assert built == [3, 2]
    assert vertex.calls("GET", "/customJobs") == 4


def counted_offers(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The job names of every read offered to a watch one by one (``JobWatch.offer``)."""
    offered: list[str] = []
    offer = job_polling.JobWatch.offer

    def counted(watch: job_polling.JobWatch, read: Any, now: float) -> None:
        offered.append(watch.name)
        offer(watch, read, now)

    monkeypatch.setattr(job_polling.JobWatch, "offer", counted)
    return offered


def counted_parses(hook: VertexJobHook) -> list[int]:
    """How many jobs each list answer the hook parsed held, in order."""
    parsed: list[int] = []
    match = hook._listed

    def counted(batch: WatchBatch, listed: list[dict[str, Any]]) -> dict[str, Listed]:
        parsed.append(len(listed))
        return match(batch, listed)

    hook._listed = counted  # type: ignore[method-assign]
    return parsed


async def test_a_round_answered_as_the_last_rearms_its_watches_without_a_read_each(
    vertex: Vertex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing parsed, nothing offered job by job: each watch's next read a poll interval on."""
    names = [vertex.create("customJobs", f"job_{i}") for i in range(3)]
    clock, inbox = Clock(), Inbox()
    hook = vertex.hook()
    parsed, offered = counted_parses(hook), counted_offers(monkeypatch)
    poller = poller_of(hook, clock)
    watches = [poller.watch(name, f"job_{i}", 10.0, inbox.deliver_to(name)) for i, name in enumerate(names)]
    clock.now += 1
    assert await poller.poll_round() == 3
    assert (parsed, len(offered)) == ([3], 3)
    for watch, interval in zip(watches, (10.0, 10.0, 7.0), strict=True):
        watch.interval = interval  # a trigger may poll faster than the others
        watch.read_in(10.0)
    clock.now += 10
    assert await poller.poll_round() == 3
    assert (parsed, len(offered)) == ([3], 3)  # the same bytes: neither parsed nor offered
    assert [watch.due for watch in watches] == [clock.now + 10, clock.now + 10, clock.now + 7]
    assert not any(watch.reading for watch in watches)
    assert sum(len(seen) for seen in inbox.seen.values()) == 3  # nobody woken
    clock.now += 10
    assert await poller.poll_round() == 3  # re-armed: read again, every round, at the interval
    assert vertex.calls("GET", "/customJobs") == 3


async def test_a_changed_page_reaches_its_wait_the_same_round_and_only_it_is_parsed(
    vertex: Vertex, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [vertex.create("customJobs", f"job_{i:03d}") for i in range(150)]
    clock, inbox = Clock(), Inbox()
    hook = vertex.hook()
    parsed, offered = counted_parses(hook), counted_offers(monkeypatch)
    poller = poller_of(hook, clock)
    watches = [poller.watch(n, f"job_{i:03d}", 10.0, inbox.deliver_to(n)) for i, n in enumerate(names)]
    for _ in range(2):
        clock.now += 10
        await poller.poll_round()
        for watch in watches:
            watch.read_in(10.0)
    assert sorted(parsed) == [50, 100]  # two list calls at once a round; the second round's as the first's
    vertex.set_state(names[120], "RUNNING")  # one job of the second page
    offered.clear()
    clock.now += 10
    assert await poller.poll_round() == 150
    assert sorted(parsed) == [50, 50, 100]  # only the page that changed is parsed
    assert inbox.states(names[120]) == ["QUEUED", "RUNNING"]  # in this round
    assert offered == names[100:]  # the changed page's jobs offered; the other page re-armed
    assert all(inbox.states(name) == ["QUEUED"] for name in names if name != names[120])


async def test_an_answer_as_the_last_still_tells_a_watch_that_has_not_heard_it(
    vertex: Vertex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trigger registered since (a retry of the task, on the same job) hears the state at once."""
    name = vertex.create("customJobs", "shared")
    clock = Clock()
    hook = vertex.hook()
    parsed, offered = counted_parses(hook), counted_offers(monkeypatch)
    poller = poller_of(hook, clock)
    heard: dict[str, list[str]] = {"a": [], "b": []}

    def deliver_to(who: str) -> Any:
        return lambda seen: heard[who].append(seen.job["state"] if seen.job else "error")

    first = poller.watch(name, "shared", 10.0, deliver_to("a"))
    clock.now += 1
    await poller.poll_round()
    first.read_in(10.0)
    poller.watch(name, "shared", 10.0, deliver_to("b"))
    clock.now += 10
    assert await poller.poll_round() == 2
    assert heard == {"a": ["QUEUED"], "b": ["QUEUED"]}
    assert parsed == [1, 1]  # the same bytes, parsed for the view the new trigger needs
    assert offered == [name, name, name]  # both watches offered: the first's is no news to it


async def test_a_trigger_that_leaves_during_an_unchanged_call_leaves_the_others_rearmed(
    vertex: Vertex,
) -> None:
    names = [vertex.create("customJobs", f"job_{i}") for i in range(3)]
    clock, inbox = Clock(), Inbox()
    hook = vertex.hook()
    poller = poller_of(hook, clock)
    watches = [poller.watch(name, f"job_{i}", 10.0, inbox.deliver_to(name)) for i, name in enumerate(names)]
    clock.now += 1
    await poller.poll_round()
    for watch in watches:
        watch.read_in(10.0)
    listed = hook.alist_batch

    async def leaving(batch: WatchBatch) -> Any:
        answer = await listed(batch)
        watches[1].close()  # its task was cancelled while the list call was in flight
        return answer

    hook.alist_batch = leaving  # type: ignore[method-assign]
    clock.now += 10
    assert await poller.poll_round() == 3
    assert [watches[0].due, watches[2].due] == [clock.now + 10] * 2  # re-armed; no round failure
    assert all(inbox.states(name) == ["QUEUED"] for name in names)


async def test_a_transient_list_failure_reaches_each_watch_then_the_recovery_does() -> None:
    api = FakeMlApi()
    for job_id in ("a", "b"):
        api.add_job("proj", job_id, "RUNNING")
    clock, inbox = Clock(), Inbox()
    poller = poller_of(ml_hook(api), clock)
    names = ["projects/proj/jobs/a", "projects/proj/jobs/b"]
    watches = [poller.watch(name, name[-1], 10.0, inbox.deliver_to(name)) for name in names]
    clock.now += 1
    await poller.poll_round()
    api.errors.append((503, "unavailable"))
    for watch in watches:
        watch.read_in(0)
    await poller.poll_round()
    assert [seen.transient for seen in inbox.seen[names[0]][1:]] == [True]
    for watch in watches:
        watch.read_in(0)
    await poller.poll_round()
    assert inbox.states(names[0]) == inbox.states(names[1]) == ["RUNNING", "error", "RUNNING"]
    assert len(api.calls("GET")) == 3  # one list a round; nobody fell back to gets
    assert not poller.gets_only


async def test_a_refused_list_makes_the_poller_read_each_job_with_a_get() -> None:
    api = FakeMlApi()
    for job_id in ("a", "b"):
        api.add_job("proj", job_id, "RUNNING")
    api.errors.append((403, "Permission 'ml.jobs.list' denied"))
    clock, inbox = Clock(), Inbox()
    poller = poller_of(ml_hook(api), clock)
    names = ["projects/proj/jobs/a", "projects/proj/jobs/b"]
    for name in names:
        poller.watch(name, name[-1], 10.0, inbox.deliver_to(name))
    clock.now += 1
    await poller.poll_round()
    assert poller.gets_only
    assert inbox.states(names[0]) == inbox.states(names[1]) == ["RUNNING"]
    assert sorted(path for _, path, _ in api.calls("GET")) == [
        "/v1/projects/proj/jobs",
        "/v1/projects/proj/jobs/a",
        "/v1/projects/proj/jobs/b",
    ]


async def test_the_poller_runs_while_someone_watches_and_stops_when_nobody_does() -> None:
    from airflow_aip.triggers.training import TrainingJobTrigger

    api = FakeMlApi()
    api.add_job("proj", "a", "RUNNING")
    api.play("a", ["RUNNING", "SUCCEEDED"])
    hook = ml_hook(api)
    trigger = TrainingJobTrigger(job_id="a", project_id="proj", api_endpoint=LOCAL, backend="ai_platform")
    poller = job_poller(trigger.poller_key, lambda: hook)
    same = TrainingJobTrigger(job_id="b", project_id="proj", api_endpoint=LOCAL, backend="ai_platform")
    assert job_poller(same.poller_key, lambda: ml_hook(api)) is poller  # one connection, endpoint, project
    other = TrainingJobTrigger(job_id="a", project_id="other", api_endpoint=LOCAL, backend="ai_platform")
    assert job_poller(other.poller_key, lambda: hook) is not poller
    seen: asyncio.Queue[Seen] = asyncio.Queue()
    watch = poller.watch("projects/proj/jobs/a", "a", 0.01, seen.put_nowait)
    first = await asyncio.wait_for(seen.get(), 5)
    watch.read_in(0.01)
    second = await asyncio.wait_for(seen.get(), 5)
    assert [first.job["state"], second.job["state"]] == ["RUNNING", "SUCCEEDED"]  # type: ignore[index]
    task = poller.task
    assert task is not None
    watch.close()
    await asyncio.wait_for(task, 5)
    registry = job_polling._POLLERS[asyncio.get_running_loop()]
    assert poller not in registry.values()
    assert job_poller(trigger.poller_key, lambda: hook) is not poller  # the next one starts afresh


async def test_thirty_triggers_share_one_list_call_a_round() -> None:
    from airflow_aip.triggers.training import TrainingJobTrigger

    api = FakeMlApi()
    for i in range(30):
        api.add_job("proj", f"j{i}", "RUNNING")
        api.play(f"j{i}", ["RUNNING", "RUNNING", "SUCCEEDED"])
    hook = ml_hook(api)
    triggers = []
    for i in range(30):
        trigger = TrainingJobTrigger(
            job_id=f"j{i}", project_id="proj", api_endpoint=LOCAL, poll_interval=0.5, stream_logs=False
        )  # rounds far enough apart that a loaded machine (parallel test workers) keeps them apart
        trigger.__dict__["wait_hook"] = hook
        triggers.append(trigger)

    async def events_of(trigger: TrainingJobTrigger) -> list[dict[str, Any]]:
        return [event.payload async for event in trigger.run()]

    events = await asyncio.gather(*(events_of(trigger) for trigger in triggers))
    assert [event[0]["status"] for event in events] == ["success"] * 30
    assert len(api.calls("GET", "/jobs")) == 3  # three rounds of one list each
    assert len(api.calls("GET")) == 3  # no get at all


async def test_triggers_rebuilt_after_a_triggerer_restart_register_again() -> None:
    """A stopping triggerer cancels its triggers: they leave, the poller stops; rebuilt from their
    kwargs, they register with a new poller and wait on to the end."""
    from airflow_aip.triggers.training import TrainingJobTrigger

    api = FakeMlApi()
    hook = ml_hook(api)
    for i in range(5):
        api.add_job("proj", f"j{i}", "RUNNING")

    def trigger_of(kwargs: dict[str, Any]) -> TrainingJobTrigger:
        trigger = TrainingJobTrigger(**kwargs)
        trigger.__dict__["wait_hook"] = hook
        return trigger

    async def events_of(trigger: TrainingJobTrigger) -> list[dict[str, Any]]:
        return [event.payload async for event in trigger.run()]

    first = [
        trigger_of({"job_id": f"j{i}", "project_id": "proj", "api_endpoint": LOCAL, "poll_interval": 0.05})
        for i in range(5)
    ]
    for trigger in first:
        trigger.stream_logs = False
    tasks = [asyncio.ensure_future(events_of(trigger)) for trigger in first]
    while len(api.calls("GET", "/jobs")) < 2:  # they are being watched
        await asyncio.sleep(0.01)
    poller = job_poller(first[0].poller_key, lambda: hook)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert poller.watches == {}
    for i in range(5):
        api.play(f"j{i}", ["RUNNING", "SUCCEEDED"])
    rebuilt = [trigger_of(trigger.serialize()[1]) for trigger in first]
    events = await asyncio.gather(*(events_of(trigger) for trigger in rebuilt))
    assert [event[0]["status"] for event in events] == ["success"] * 5
    assert api.cancels == []  # a restart is not a kill


async def test_a_read_that_cannot_be_handed_on_fails_that_wait_alone() -> None:
    """A bug of ours building one job's view (no server answers that on demand): that trigger
    hears it as a failure, which ends its wait with the reason; the others read on."""
    api = FakeMlApi()
    for job_id in ("a", "b"):
        api.add_job("proj", job_id, "RUNNING")
    hook = ml_hook(api)
    build = hook._view

    def view(job: dict[str, Any], project_id: str | None = None) -> Any:
        if job["jobId"] == "b":
            raise KeyError("trainingInput")
        return build(job, project_id)

    hook._view = view  # type: ignore[method-assign]
    clock, inbox = Clock(), Inbox()
    poller = poller_of(hook, clock)
    names = ["projects/proj/jobs/a", "projects/proj/jobs/b"]
    for name in names:
        poller.watch(name, name[-1], 10.0, inbox.deliver_to(name))
    clock.now += 1
    assert await poller.poll_round() == 2
    assert inbox.states(names[0]) == ["RUNNING"]
    (failure,) = inbox.seen[names[1]]
    assert failure.job is None
    assert not failure.transient
    assert "KeyError" in failure.error

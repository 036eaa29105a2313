"""The trigger bench's watcher: one fresh process watching every job of a scenario, then one JSON line.

    python -m bench.trigger_watch <config.json>

Modes (``config["mode"]``):

- ``shared``: one ``TrainingJobTrigger(...).run()`` coroutine per job in one event loop, what a
  triggerer runs for that many deferred tasks; whatever the trigger does today (a shared poller
  once it has one) is what is measured.
- ``per_job``: the same triggers, each waiting on its own with the async wait runner and its own
  hook, one get per poll (:class:`PerJobGetTrigger`): the path a trigger took before the shared
  poller, measured in the same run as its baseline.
- ``threads``: one thread per job doing blocking ``jobs.get`` polls with ``time.sleep`` (what
  poking sensors do, minus their process and worker slot: a generous baseline). Its clients are
  built before the CPU clock starts (their RSS counts).

CPU (``getrusage``, this process) and RSS are measured over the watch only: imports and the
connection lookup are warmed first, as in a running triggerer. RSS added is the peak during the
watch (``VmHWM``, reset as the watch starts) over the resident size before it. Each trigger's ``log`` is
replaced by a :class:`Collect`, which keeps each line and when it was logged (log scenarios) or
only counts them, so no scenario pays for formatting log records the others do not.

``AIP_BENCH_TRIGGER_PROFILE=N``: cProfile the event loop over the steady stretch (the long
scenarios' "waiting" figure) and hand back its top N functions by own and by cumulative CPU
time, and the garbage collector's passes. The profiler slows what it watches: a profiled run's
CPU figures are not figures.
"""

from __future__ import annotations

import asyncio
import cProfile
import gc
import io
import json
import os
import pstats
import random
import re
import resource
import sys
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from airflow_aip.jobs.logs import normalize_timestamp

CONN_ID = "aip_bench"
REGION = "us-central1"
_LINE = re.compile(r"\] line (\d+) @(\d+)$")
_DROPPED = re.compile(r"\.\.\. (\d+) lines dropped")
PROFILE_TOP = int(os.environ.get("AIP_BENCH_TRIGGER_PROFILE") or 0)


class Collect:
    """Stands in for a trigger's logger: keeps ``(time logged, text)`` of each line, or only counts."""

    def __init__(self, keep: bool) -> None:
        self.keep = keep
        self.lines: list[tuple[float, str]] = []
        self.count = 0

    def _record(self, msg: object, *args: object, **_kwargs: object) -> None:
        self.count += 1
        if self.keep:
            self.lines.append((time.time(), str(msg) % args if args else str(msg)))

    debug = info = warning = error = critical = exception = _record

    def bind(self, **_kwargs: object) -> Collect:
        return self

    def isEnabledFor(self, _level: int) -> bool:
        return True


def epoch(timestamp: str) -> float:
    """UNIX seconds of an RFC 3339 string (any precision)."""
    normalized = normalize_timestamp(timestamp)
    if normalized is None:
        raise ValueError(f"not RFC 3339: {timestamp!r}")
    whole = datetime.strptime(normalized[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    return whole.timestamp() + int(normalized[20:29]) / 1e9


def _status_mib(key: str = "VmRSS") -> float:
    """``VmRSS`` (resident now) or ``VmHWM`` (its peak so far) of this process, in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# -- triggers --------------------------------------------------------------------------------


def _trigger_classes() -> tuple[type[Any], type[Any]]:
    """``TrainingJobTrigger`` and the per-job baseline built on it (imported once warmed)."""
    from airflow_aip.hooks.http_shared import is_transient
    from airflow_aip.jobs.waiting import Seen, WaitState, step, step_event
    from airflow_aip.triggers.training import TrainingJobTrigger, trigger_event

    class PerJobGetTrigger(TrainingJobTrigger):
        """The wait as triggers ran it before the shared poller: its own hook, a get per poll, no logs.

        The loop of the async runner they used (read, the one wait step, ``asyncio.sleep``),
        written here on the pure step so the baseline stays what it was while the trigger changes.
        """

        async def run(self) -> AsyncIterator[Any]:
            state = WaitState.begin(self.job_id, time.time())
            while True:
                try:
                    seen = Seen(await self.wait_hook.aread(self.job_name))
                except Exception as err:  # the step tells transient from not
                    seen = Seen.failure(err, transient=is_transient(err))
                now = time.time()
                decided = step(
                    state,
                    seen,
                    now=now,
                    deadline=self.end_time,
                    poll_interval=self.poll_interval,
                    jitter=random.random(),
                )
                state = decided.state
                for level, message in decided.logs:
                    getattr(self.log, level)("%s", message)
                if decided.done:
                    yield trigger_event(step_event(decided, self.project_id, now, self.job_name))
                    return
                await asyncio.sleep(decided.seconds)

    return TrainingJobTrigger, PerJobGetTrigger


def _watch_with_triggers(
    config: dict[str, Any], profile: _Profile | None = None
) -> tuple[list[tuple[float, float]], dict[str, Collect]]:
    shared, per_job = _trigger_classes()
    cls = per_job if config["mode"] == "per_job" else shared
    vertex = config["backend"] == "vertex"
    logs: dict[str, Collect] = {}

    async def one(job: dict[str, str]) -> tuple[float, float]:
        trigger = cls(
            job_id=job["job_id"],
            project_id=config["project"],
            job_name=job["name"] if vertex else None,
            backend=config["backend"],
            region=REGION if vertex else None,
            gcp_conn_id=CONN_ID,
            api_endpoint=config["url"],
            poll_interval=config["poll"],
            stream_logs=config["logs"],
            **({"budget": {"amount": config["budget"], "currency": "USD"}} if config.get("budget") else {}),
        )
        trigger._log = logs[job["job_id"]] = Collect(keep=config["logs"])
        async for event in trigger.run():
            if event.payload["status"] != "success":
                raise RuntimeError(f"trigger event {event.payload}")
            return time.time(), epoch(event.payload["summary"]["end_time"])
        raise RuntimeError(f"trigger for {job['job_id']} ended without an event")

    async def every_job() -> list[tuple[float, float]]:
        if profile is not None:
            profile.loop = asyncio.get_running_loop()
        return await asyncio.gather(*(one(job) for job in config["jobs"]))

    return asyncio.run(every_job()), logs


class _Steady:
    """CPU seconds over a stretch of the watch (``[from, to]`` seconds after its start), sampled
    by a thread that wakes twice: at each end of the stretch."""

    def __init__(self, t0: float, window: list[float] | None, profile: _Profile | None = None) -> None:
        self.marks: list[tuple[float, float]] = []
        self.profile = profile
        self.done = threading.Event()
        self.thread = None
        if window:
            self.thread = threading.Thread(target=self._sample, args=(t0, window), daemon=True)
            self.thread.start()

    def _sample(self, t0: float, window: list[float]) -> None:
        for at in window:
            if self.done.wait(max(0.0, t0 + at - time.time())):
                return
            self.marks.append((time.time(), _cpu()))
            if self.profile is not None:
                self.profile.mark(len(self.marks) == 1)

    def stop(self) -> None:
        self.done.set()

    def result(self) -> dict[str, float] | None:
        """``{"cpu", "wall"}`` of the stretch; None if the watch ended before it did."""
        if len(self.marks) < 2:
            return None
        (t_a, cpu_a), (t_b, cpu_b) = self.marks
        return {"cpu": cpu_b - cpu_a, "wall": t_b - t_a}


class _Profile:
    """cProfile of the event loop's thread in CPU seconds, on from the steady stretch's start to its
    end (cProfile profiles the thread that enables it: the sampling thread asks the loop to switch
    it), and the garbage collector's passes meanwhile, which cProfile charges to whatever allocated."""

    def __init__(self, top: int) -> None:
        self.top = top
        self.loop: asyncio.AbstractEventLoop | None = None
        self.profiler = cProfile.Profile(time.process_time)
        self.gc = [[0, 0.0] for _ in range(3)]  # per generation: passes, CPU seconds
        self._gc_start = 0.0

    def mark(self, start: bool) -> None:
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self._switch, start)

    def _switch(self, on: bool) -> None:
        if on:
            gc.callbacks.append(self._gc)
            self.profiler.enable()
        else:
            self.profiler.disable()
            gc.callbacks.remove(self._gc)

    def _gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_start = time.process_time()
        else:
            row = self.gc[info["generation"]]
            row[0] += 1
            row[1] += time.process_time() - self._gc_start

    def report(self) -> list[str]:
        out = io.StringIO()
        try:
            stats = pstats.Stats(self.profiler, stream=out)
        except TypeError:  # never enabled: the watch ended before the stretch began
            return []
        for key in ("tottime", "cumulative"):
            stats.sort_stats(key).print_stats(self.top)
        passes = ", ".join(f"gen{g}: {n} passes {s:.3f}s" for g, (n, s) in enumerate(self.gc))
        return [line for line in out.getvalue().splitlines() if line.strip()] + [f"gc: {passes}"]


# -- the thread baseline ---------------------------------------------------------------------


def _thread_hooks(url: str, project: str, n: int) -> list[Any]:
    from airflow_aip.hooks.training import TrainingJobHook

    hooks = []
    for _ in range(n):
        hook = TrainingJobHook(CONN_ID, project_id=project, api_endpoint=url)
        _ = hook._sync_client()  # built before the clock starts
        hooks.append(hook)
    return hooks


def _watch_with_threads(config: dict[str, Any], hooks: list[Any]) -> list[tuple[float, float]]:
    job_ids = [job["job_id"] for job in config["jobs"]]
    results: list[tuple[float, float] | BaseException] = [RuntimeError("not run")] * len(job_ids)

    def one(i: int) -> None:
        try:
            while True:
                job = hooks[i].get_job(job_ids[i], config["project"])
                if job["state"] == "SUCCEEDED":
                    results[i] = (time.time(), epoch(job["endTime"]))
                    return
                time.sleep(config["poll"])
        except BaseException as err:  # reported below
            results[i] = err

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(len(job_ids))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        raise RuntimeError(f"{len(errors)} baseline watchers failed, e.g. {errors[0]!r}")
    return [r for r in results if not isinstance(r, BaseException)]


# -- what the triggers logged ----------------------------------------------------------------


def log_report(logs: dict[str, Collect], chatty: set[str]) -> dict[str, Any]:
    """Per job ``[unique lines, duplicates, reported dropped, worst latency]``; latency samples.

    A line's latency is when the trigger logged it minus its entry's timestamp.
    """
    per_job: dict[str, list[float]] = {}
    lags: dict[str, list[float]] = {"quiet": [], "chatty": []}
    exhausted = 0
    for job_id, collected in logs.items():
        seen: Counter[int] = Counter()
        dropped, worst = 0, 0.0
        for logged_at, text in collected.lines:
            if match := _LINE.search(text):
                seen[int(match.group(1))] += 1
                lag = logged_at - int(match.group(2)) / 1e6
                lags["chatty" if job_id in chatty else "quiet"].append(lag)
                worst = max(worst, lag)
            elif match := _DROPPED.search(text):
                dropped += int(match.group(1))
            elif text.startswith("Stopped reading the logs"):
                exhausted += 1
        duplicates = sum(n - 1 for n in seen.values())
        per_job[job_id] = [len(seen), duplicates, dropped, worst]
    return {"per_job": per_job, "lags": lags, "exhausted": exhausted}


def main(config: dict[str, Any]) -> dict[str, Any]:
    """Watch every job of ``config``; the measurements."""
    url, project = config["url"], config["project"]
    os.environ[f"AIRFLOW_CONN_{CONN_ID.upper()}"] = json.dumps(
        {"conn_type": "google_cloud_platform", "extra": {"project": project, "api_endpoint": url}}
    )
    import logging

    logging.disable(logging.INFO)  # the hooks' own request lines; the triggers' go to a Collect
    # Warm what a running triggerer or worker has loaded already: imports are not the watch's cost.
    from airflow.sdk import BaseHook

    _trigger_classes()
    asyncio.run(BaseHook.aget_connection(CONN_ID))
    _thread_hooks(url, project, 1)  # imports httpx and friends
    rss0 = _status_mib()
    hooks = _thread_hooks(url, project, len(config["jobs"])) if config["mode"] == "threads" else []
    # RSS counts the baseline's clients (each sensor has one); CPU does not count building them.
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS: the peak is the watch's own
    cpu0, t0 = _cpu(), time.time()
    profile = _Profile(PROFILE_TOP) if PROFILE_TOP and config["mode"] != "threads" else None
    steady = _Steady(t0, config.get("steady"), profile)
    logs: dict[str, Collect] = {}
    if config["mode"] == "threads":
        done = _watch_with_threads(config, hooks)
    else:
        done, logs = _watch_with_triggers(config, profile)
    cpu, t1 = _cpu() - cpu0, time.time()
    steady.stop()
    rss_end, rss_peak = _status_mib() - rss0, _status_mib("VmHWM") - rss0
    out: dict[str, Any] = {
        "cpu": cpu,
        "rss": max(rss_peak, rss_end),  # the peak: by its end, the watch may have freed some
        "rss_end": rss_end,
        "t0": t0,
        "t1": t1,
        "wall": t1 - t0,
        "lags": [seen - changed for seen, changed in done],
        "lines_logged": sum(c.count for c in logs.values()),
        "steady": steady.result(),
    }
    if config["logs"]:
        out["log"] = log_report(logs, set(config["chatty"]))
    if profile is not None:
        out["profile"] = profile.report()
    return out


if __name__ == "__main__":
    print(json.dumps(main(json.loads(Path(sys.argv[1]).read_text()))), flush=True)

"""Watching 1,000 training jobs: one triggerer event loop against poking sensors' cost.

- A small asyncio HTTP server (its own process, 127.0.0.1, free port) answers
  ``GET v1/projects/{p}/jobs/{id}``. Each job is QUEUED, then RUNNING, then SUCCEEDED at a
  random moment after its first poll; ``endTime`` says exactly when, so the watcher can tell
  how long after the change it noticed.
- ours: one process, one event loop, 1,000 ``TrainingJobTrigger.run()`` coroutines (what a
  triggerer runs for 1,000 deferred tasks).
- baseline: one process, 1,000 threads each doing blocking ``TrainingJobHook.get_job`` polls
  with ``time.sleep`` (what poking sensors do, minus their per-task process and worker slot:
  a generous baseline). Its clients are built before the CPU clock starts, which also favours it.
- Each side runs in a fresh process, measured over the watch only: CPU seconds per job-hour
  watched, RSS added, detection lag after the state change (p50/p99; the poll interval is the
  expected worst case), and requests/s served.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench.common import Figure, Series

JOBS = 1000
POLL_INTERVAL = 2.0
FIRST_CHANGE = 4.0  # seconds after a job's first poll, at the earliest
SPREAD = 16.0  # ... and at the latest FIRST_CHANGE + SPREAD
PROJECT = "bench"
CONN_ID = "aip_bench"
REPO = Path(__file__).resolve().parent.parent

# -- the fake ml v1 endpoint ------------------------------------------------------------------


def _rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def _serve(delays: dict[str, float]) -> None:
    first_seen: dict[str, float] = {}
    served = 0

    def job(job_id: str) -> tuple[int, dict[str, Any]]:
        if job_id not in delays:
            return 404, {"error": {"code": 404, "message": "The specified job was not found."}}
        now = time.time()
        start = first_seen.setdefault(job_id, now)
        flip = start + delays[job_id]
        state = "SUCCEEDED" if now >= flip else "RUNNING" if now >= start + delays[job_id] / 4 else "QUEUED"
        body: dict[str, Any] = {"jobId": job_id, "state": state, "createTime": _rfc3339(start)}
        if state == "SUCCEEDED":
            body["endTime"] = _rfc3339(flip)
        return 200, body

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal served
        try:
            while True:
                request = await reader.readuntil(b"\r\n\r\n")
                lines = request.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                length = next(
                    (
                        int(v)
                        for k, _, v in (x.partition(":") for x in lines[1:])
                        if k.lower() == "content-length"
                    ),
                    0,
                )
                if length:
                    await reader.readexactly(length)
                path = path.split("?", 1)[0]
                if path == "/stats":
                    status, payload = 200, {"requests": served}
                else:
                    served += 1
                    if method == "POST" and path.endswith("/entries:list"):
                        status, payload = 200, {}  # log streaming (on by default): jobs print nothing
                    else:
                        status, payload = job(path.rsplit("/", 1)[-1]) if method == "GET" else (405, {})
                data = json.dumps(payload).encode()
                head = f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(data)}"
                writer.write(head.encode() + b"\r\n\r\n" + data)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=4096)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


class Endpoint:
    """The fake endpoint's process, started and stopped by PID."""

    def __init__(self, delays: dict[str, float]) -> None:
        fd, self._path = tempfile.mkstemp(suffix=".json")
        with os.fdopen(fd, "w") as out:
            json.dump(delays, out)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.bench_trigger", "serve", self._path],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line.isdigit():
            self.stop()
            raise RuntimeError(f"bench endpoint did not start (said {line!r})")
        self.url = f"http://127.0.0.1:{line}/"

    def requests(self) -> int:
        import httpx

        return int(httpx.get(self.url + "stats", timeout=30).json()["requests"])

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.unlink(self._path)


# -- the watchers (each in its own process) -----------------------------------------------------


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _end_time(job: dict[str, Any]) -> float:
    return (
        datetime.strptime(job["end_time"] or job["endTime"], "%Y-%m-%dT%H:%M:%S.%fZ")
        .replace(tzinfo=timezone.utc)
        .timestamp()
    )


def _watch_with_triggers(url: str, job_ids: list[str], poll: float, logs: bool) -> list[tuple[float, float]]:
    from airflow_aip.triggers.training import TrainingJobTrigger

    async def one(job_id: str) -> tuple[float, float]:
        trigger = TrainingJobTrigger(
            job_id=job_id,
            project_id=PROJECT,
            gcp_conn_id=CONN_ID,
            api_endpoint=url,
            poll_interval=poll,
            stream_logs=logs,
        )
        async for event in trigger.run():
            if event.payload["status"] != "success":
                raise RuntimeError(f"trigger event {event.payload}")
            return time.time(), _end_time(event.payload["summary"])
        raise RuntimeError(f"trigger for {job_id} ended without an event")

    async def all_jobs() -> list[tuple[float, float]]:
        return await asyncio.gather(*(one(j) for j in job_ids))

    return asyncio.run(all_jobs())


def _prepare_threads(url: str, job_ids: list[str]) -> list[Any]:
    from airflow_aip.hooks.training import TrainingJobHook

    hooks = []
    for _ in job_ids:
        hook = TrainingJobHook(CONN_ID, project_id=PROJECT, api_endpoint=url)
        _ = hook._sync_client()  # built before the clock starts
        hooks.append(hook)
    return hooks


def _watch_with_threads(hooks: list[Any], job_ids: list[str], poll: float) -> list[tuple[float, float]]:
    results: list[tuple[float, float] | BaseException] = [RuntimeError("not run")] * len(job_ids)

    def one(i: int) -> None:
        try:
            while True:
                job = hooks[i].get_job(job_ids[i], PROJECT)
                if job["state"] == "SUCCEEDED":
                    results[i] = (time.time(), _end_time({"end_time": job["endTime"]}))
                    return
                time.sleep(poll)
        except BaseException as err:  # reported below
            results[i] = err

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(len(job_ids))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        raise RuntimeError(f"{len(errors)} baseline watchers failed, e.g. {errors[0]!r}")
    return results  # type: ignore[return-value]


def _watch_main(mode: str, url: str, n: int, poll: float, logs: bool) -> None:
    """Child process: watch ``n`` jobs, print one JSON line of measurements."""
    os.environ[f"AIRFLOW_CONN_{CONN_ID.upper()}"] = json.dumps(
        {"conn_type": "google_cloud_platform", "extra": {"project": PROJECT, "api_endpoint": url}}
    )
    import logging

    logging.disable(logging.INFO)
    job_ids = [f"job_{i:05d}" for i in range(n)]
    # Warm what a running triggerer / worker has loaded already: imports are not the watch's cost.
    from airflow.sdk import BaseHook

    import airflow_aip.triggers.training  # noqa: F401

    asyncio.run(BaseHook.aget_connection(CONN_ID))
    _prepare_threads(url, job_ids[:1])  # imports httpx and friends
    rss_before_clients = _rss_mib()
    hooks = _prepare_threads(url, job_ids) if mode == "threads" else []
    # RSS counts the baseline's clients (each sensor has one); CPU does not count building them.
    rss0, cpu0, t0 = rss_before_clients, _cpu(), time.time()
    if mode == "threads":
        done = _watch_with_threads(hooks, job_ids, poll)
    else:
        done = _watch_with_triggers(url, job_ids, poll, logs)
    cpu, rss, wall = _cpu() - cpu0, _rss_mib() - rss0, time.time() - t0
    lags = [seen - changed for seen, changed in done]
    job_hours = sum(seen - t0 for seen, _ in done) / 3600
    print(
        json.dumps({"cpu": cpu, "rss": rss, "wall": wall, "lags": lags, "job_hours": job_hours}), flush=True
    )


def _measure(mode: str, n: int, poll: float, seed: int, logs: bool = False) -> dict[str, Any]:
    """One watch in a fresh process; ``logs`` turns the trigger's log streaming (and drain) on."""
    rng = random.Random(seed)
    delays = {f"job_{i:05d}": FIRST_CHANGE + rng.random() * SPREAD for i in range(n)}
    endpoint = Endpoint(delays)
    try:
        before = endpoint.requests()
        child = subprocess.run(
            [sys.executable, "-m", "bench.bench_trigger", "watch", mode, endpoint.url, str(n), str(poll)]
            + (["logs"] if logs else []),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if child.returncode != 0:
            raise RuntimeError(f"{mode} watcher failed:\n{child.stderr[-2000:]}")
        result: dict[str, Any] = json.loads(child.stdout.strip().splitlines()[-1])
        result["requests_per_s"] = (endpoint.requests() - before - 1) / result["wall"]
        return result
    finally:
        endpoint.stop()


def _quantile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q * 100) - 1]


def run(repeats: int) -> list[Figure]:
    ours: dict[str, list[float]] = {k: [] for k in ("cpu", "rss", "p50", "p99", "rps")}
    base: dict[str, list[float]] = {k: [] for k in ours}
    for i in range(repeats):
        for mode, into in (("triggers", ours), ("threads", base)):
            r = _measure(mode, JOBS, POLL_INTERVAL, seed=i)
            into["cpu"].append(r["cpu"] / r["job_hours"])
            into["rss"].append(r["rss"])
            into["p50"].append(_quantile(r["lags"], 0.50))
            into["p99"].append(_quantile(r["lags"], 0.99))
            into["rps"].append(r["requests_per_s"])
    topic = "trigger"
    label = f"{JOBS} blocking poll threads"
    p = POLL_INTERVAL

    def fig(key: str, name: str, unit: str, goal: str = "", met: bool | None = None) -> Figure:
        return Figure(
            topic, name, unit, Series("one event loop", ours[key]), Series(label, base[key]), goal, met
        )

    p99 = statistics.median(ours["p99"])
    figures = [
        fig("cpu", f"CPU per job-hour watched ({JOBS} jobs, poll {p:g}s)", "CPU s/job-h"),
        fig("rss", f"RSS added by {JOBS} watches", "MiB"),
        fig("p50", "detection lag after the state change, p50", "s"),
        fig(
            "p99",
            "detection lag after the state change, p99",
            "s",
            f"<= poll interval ({p:g}s) + 1s",
            p99 <= p + 1,
        ),
        fig("rps", "requests/s served to the watchers", "req/s"),
    ]
    figures[0].notes.append(
        f"trigger: {JOBS} TrainingJobTrigger.run() coroutines in one asyncio loop against a local "
        f"asyncio HTTP endpoint whose jobs change state {FIRST_CHANGE:g}-{FIRST_CHANGE + SPREAD:g}s after "
        f"their first poll; lag beyond the {p:g}s poll interval (p99 - interval): ours {p99 - p:+.3f}s, "
        f"baseline {statistics.median(base['p99']) - p:+.3f}s. The baseline's clients are built before "
        "its CPU clock starts (their RSS counts); it holds no worker slots, unlike real poking sensors."
    )
    return figures + _scale()


SCALE_JOBS = (100, 1000, 5000)
SCALE_POLL = 10.0
SCALE_BASELINE_MAX = 1000  # 5,000 blocking threads with a client each is beyond a fair baseline here


def _scale() -> list[Figure]:
    """One loop watching 100 / 1,000 / 5,000 jobs at a 10 s poll: share of one core, RSS, p99 lag."""
    figures = []
    r1000: dict[str, Any] = {}
    for n in SCALE_JOBS:
        r = _measure("triggers", n, SCALE_POLL, seed=n)
        if n == 1000:
            r1000 = r
        b = _measure("threads", n, SCALE_POLL, seed=n) if n <= SCALE_BASELINE_MAX else None
        label = f"{n} blocking poll threads"
        core = Series("one event loop", [100 * r["cpu"] / r["wall"]])
        base_core = Series(label, [100 * b["cpu"] / b["wall"]]) if b else None
        p99 = _quantile(r["lags"], 0.99)
        goal, met = ("<= 25% of one core", core.median <= 25) if n == 1000 else ("", None)
        figures += [
            Figure(
                "trigger at scale",
                f"{n} jobs, poll {SCALE_POLL:g}s: share of one core",
                "%",
                core,
                base_core,
                goal,
                met,
            ),
            Figure(
                "trigger at scale",
                f"{n} jobs: RSS added",
                "MiB",
                Series("one event loop", [r["rss"]]),
                Series(label, [b["rss"]]) if b else None,
            ),
            Figure(
                "trigger at scale",
                f"{n} jobs: detection lag p99",
                "s",
                Series("one event loop", [p99]),
                Series(label, [_quantile(b["lags"], 0.99)]) if b else None,
                f"<= {SCALE_POLL + 1:g} s",
                p99 <= SCALE_POLL + 1,
            ),
            Figure(
                "trigger at scale",
                f"{n} jobs: requests/s",
                "req/s",
                Series("one event loop", [r["requests_per_s"]]),
                Series(label, [b["requests_per_s"]]) if b else None,
            ),
        ]
    streamed = _measure("triggers", 1000, SCALE_POLL, seed=7, logs=True)
    figures += [
        Figure(
            "trigger at scale",
            f"1000 jobs, poll {SCALE_POLL:g}s, log streaming on (the default): share of one core",
            "%",
            Series("one event loop, streaming", [100 * streamed["cpu"] / streamed["wall"]]),
            Series("one event loop, no streaming", [100 * r1000["cpu"] / r1000["wall"]]),
        ),
        Figure(
            "trigger at scale",
            "1000 jobs, log streaming on: job end -> event p99 (includes the log drain)",
            "s",
            Series("one event loop, streaming", [_quantile(streamed["lags"], 0.99)]),
            Series("one event loop, no streaming", [_quantile(r1000["lags"], 0.99)]),
        ),
    ]
    figures[0].notes.append(
        "Detection figures are with stream_logs=False: the state change alone. With streaming on, the "
        "final event waits for the log drain (an empty entries.list poll at least min(poll, 5 s) after "
        "the job's endTime, gcloud's --stream-logs rule), so late log lines are not lost."
    )
    figures[0].notes.append(
        f"One measurement per size (each watch lasts ~{FIRST_CHANGE + SPREAD + SCALE_POLL:g} s); the thread "
        f"baseline stops at {SCALE_BASELINE_MAX} jobs. Share of one core = CPU seconds / wall seconds."
    )
    return figures


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        asyncio.run(_serve(json.loads(Path(sys.argv[2]).read_text())))
    elif sys.argv[1] == "watch":
        _watch_main(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), "logs" in sys.argv[6:])
    else:
        for figure in run(int(sys.argv[1]) if len(sys.argv) > 1 else 1):
            print(
                figure.name,
                figure.ours.cell(figure.unit),
                "|",
                figure.baseline and figure.baseline.cell(figure.unit),
                figure.ratio,
            )

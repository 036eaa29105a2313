"""Watching thousands of training jobs from one triggerer, on both backends, with and without logs.

Each scenario runs a fake Google API (:mod:`bench.trigger_api`, its own process, not measured)
and a fresh watcher process (:mod:`bench.trigger_watch`), measured over the watch only. Jobs
are QUEUED, RUNNING from a quarter of their life, and SUCCEEDED ``FIRST_END``-``FIRST_END +
SPREAD`` seconds after a request first names them, so every watch lasts at least 5 poll rounds.

Scenarios (sizes and times scale with ``AIP_BENCH_TRIGGER_SCALE`` and ``AIP_BENCH_TRIGGER_PACE``
for a quick check; the figures are taken at 1):

- 5,000 waits on ml v1 and on Vertex AI, poll 10 s, log streaming off. These jobs live longer
  (``LONG_END``): RUNNING from 25-30 s to 100-120 s, so the watch has a steady stretch
  (``STEADY``: every job running, none changing) whose CPU is what waiting costs per poll; the
  whole watch adds each job's one-time start and end (its first read, its event and summary).
  The stretch starts a round after the last job can turn RUNNING (named by ~5 s, RUNNING by
  ~35 s: its news comes with the round after), and lasts whole poll intervals: a shared
  poller's CPU comes in bursts, one a round, and a 45 s stretch holding 5 would overstate it;
- the same triggers waiting the way they did before the shared poller (one get per job per
  poll), at 1,000 waits on each backend, with the same long jobs: the CPU baseline, from the
  same run;
- 1,000 waits on ml v1 against 1,000 blocking poll threads (poking sensors' way);
- 1,000 waits on ml v1 with log streaming on, 10 of them chatty (50 lines/s, the others a line
  every 10 s), under a log-read budget of ``LOG_BUDGET`` entries.list calls a minute
  (``AIRFLOW__AIP__LOG_READS_PER_MINUTE``).

    python -m bench.run --only trigger            # every scenario, writes RESULTS.md
    python -m bench.bench_trigger [scenario ...]  # some scenarios, figures printed only
    AIP_BENCH_TRIGGER_PROFILE=30 python -m bench.bench_trigger vertex_big  # + its cost centres
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import Figure

REPO = Path(__file__).resolve().parent.parent
PROJECT = "bench"
AI_PLATFORM, VERTEX = "ai_platform", "vertex"
SCALE = float(os.environ.get("AIP_BENCH_TRIGGER_SCALE", "1"))  # job counts
PACE = float(os.environ.get("AIP_BENCH_TRIGGER_PACE", "1"))  # poll interval and job lifetimes
POLL = 10.0 * PACE
FIRST_END = 20.0 * PACE  # a job ends this long after it is first named, at the earliest...
SPREAD = 40.0 * PACE  # ... and at the latest FIRST_END + SPREAD
LONG_END, LONG_SPREAD = 100.0 * PACE, 20.0 * PACE  # the 5,000-wait scenarios and their baselines
STEADY = (45.0 * PACE, 95.0 * PACE)  # seconds into their watch: every job RUNNING, none changing
QUIET_PERIOD = 10.0  # seconds between a quiet job's lines (bench.trigger_api_logs)
BIG, SMALL, CHATTY = max(2, round(5000 * SCALE)), max(2, round(1000 * SCALE)), 10
LOG_BUDGET = 30  # entries.list calls a minute per project: [aip] log_reads_per_minute's default
WATCH_TIMEOUT = 900.0
GUARD_BUDGET = 100.0  # USD a job: n1-standard-4 jobs of ~2 minutes never reach it (no cancel)


@dataclass(frozen=True)
class Scenario:
    key: str
    mode: str  # shared | per_job | threads (bench.trigger_watch)
    backend: str
    jobs: int
    logs: bool = False
    long: bool = False  # long-lived jobs, with a steady stretch (STEADY)
    budget: float | None = None  # each trigger's budget (USD): the guard on

    @property
    def api(self) -> str:
        return "Vertex AI" if self.backend == VERTEX else "ml v1"


SCENARIOS = (
    Scenario("ml_big", "shared", AI_PLATFORM, BIG, long=True),
    Scenario("vertex_big", "shared", VERTEX, BIG, long=True),
    Scenario("vertex_big_guard", "shared", VERTEX, BIG, long=True, budget=GUARD_BUDGET),
    Scenario("ml_per_job", "per_job", AI_PLATFORM, SMALL, long=True),
    Scenario("vertex_per_job", "per_job", VERTEX, SMALL, long=True),
    Scenario("ml_small", "shared", AI_PLATFORM, SMALL),
    Scenario("threads", "threads", AI_PLATFORM, SMALL),
    Scenario("logs", "shared", AI_PLATFORM, SMALL, logs=True),
)


def fleet_spec(n: int, seed: int, chatty: int, long: bool = False) -> dict[str, Any]:
    """The fake API's jobs: ``job_00000``..., each with its lifetime, log phase and chattiness."""
    rng = random.Random(seed)
    first_end, spread = (LONG_END, LONG_SPREAD) if long else (FIRST_END, SPREAD)
    noisy = set(rng.sample(range(n), min(chatty, n)))
    jobs = [
        {
            "job_id": f"job_{i:05d}",
            "delay": first_end + rng.random() * spread,
            "chatty": i in noisy,
            "phase": rng.random() * QUIET_PERIOD,
        }
        for i in range(n)
    ]
    return {"project": PROJECT, "jobs": jobs}


class FakeApi:
    """The fake API's process, started on a free port and stopped by its PID."""

    def __init__(self, spec_path: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.trigger_api", str(spec_path)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line.isdigit():
            self.stop()
            raise RuntimeError(f"the fake API did not start (said {line!r})")
        self.url = f"http://127.0.0.1:{line}/"

    def counts(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.url + "_counts", timeout=60) as answer:
            return dict(json.load(answer))

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def measure(scenario: Scenario, seed: int) -> dict[str, Any]:
    """One scenario: the watcher's measurements, with the fake API's counts (``api``)."""
    from bench.trigger_api_jobs import Fleet

    spec = fleet_spec(scenario.jobs, seed, CHATTY if scenario.logs else 0, scenario.long)
    fleet = Fleet.from_spec(spec)
    config = {
        "mode": scenario.mode,
        "backend": scenario.backend,
        "project": PROJECT,
        "poll": POLL,
        "logs": scenario.logs,
        "steady": list(STEADY) if scenario.long else None,
        "budget": scenario.budget,
        "chatty": [j["job_id"] for j in spec["jobs"] if j["chatty"]],
        "jobs": [{"job_id": job.job_id, "name": fleet.vertex_name(job)} for job in fleet.jobs],
    }
    with tempfile.TemporaryDirectory(prefix="aip-bench-trigger-") as tmp:
        spec_path, config_path = Path(tmp, "spec.json"), Path(tmp, "watch.json")
        spec_path.write_text(json.dumps(spec))
        api = FakeApi(spec_path)
        load = os.getloadavg()[0]  # what else the machine ran: CPU shares are noisy under load
        try:
            config_path.write_text(json.dumps({**config, "url": api.url}))
            env = {**os.environ, "AIRFLOW__AIP__LOG_READS_PER_MINUTE": str(LOG_BUDGET)}
            child = subprocess.run(
                [sys.executable, "-m", "bench.trigger_watch", str(config_path)],
                cwd=REPO,
                env=env,
                capture_output=True,
                text=True,
                timeout=WATCH_TIMEOUT,
            )
            if child.returncode != 0:
                raise RuntimeError(f"{scenario.key} watcher failed:\n{child.stderr[-3000:]}")
            result: dict[str, Any] = json.loads(child.stdout.strip().splitlines()[-1])
            result["api"] = api.counts()
        finally:
            api.stop()
    result["chatty"] = config["chatty"]
    result["load"] = load
    return result


def run(repeats: int) -> list[Figure]:
    """Every scenario once (each lasts over a minute: ``repeats`` is not applied)."""
    return run_scenarios([s.key for s in SCENARIOS])


def run_scenarios(keys: list[str]) -> list[Figure]:
    from bench.trigger_figures import figures, progress_line

    results: dict[str, dict[str, Any]] = {}
    for scenario in SCENARIOS:
        if scenario.key not in keys:
            continue
        started = time.monotonic()
        results[scenario.key] = measure(scenario, seed=SCENARIOS.index(scenario))
        elapsed = time.monotonic() - started
        print(f"   [{scenario.key}] {progress_line(scenario, results[scenario.key], POLL)} ({elapsed:.0f}s)")
        for line in results[scenario.key].get("profile", []):  # AIP_BENCH_TRIGGER_PROFILE (trigger_watch)
            print(f"      {line}")
    return figures({s.key: s for s in SCENARIOS}, results, POLL, LOG_BUDGET)


if __name__ == "__main__":
    chosen = sys.argv[1:] or [s.key for s in SCENARIOS]
    unknown = set(chosen) - {s.key for s in SCENARIOS}
    if unknown:
        sys.exit(f"unknown scenarios {sorted(unknown)}; known: {[s.key for s in SCENARIOS]}")
    for fig in run_scenarios(chosen):
        base = f" | {fig.baseline.label}: {fig.baseline.cell(fig.unit)}" if fig.baseline else ""
        ratio = f" ({fig.ratio:.3g}x)" if fig.ratio is not None else ""
        goal = f" goal {fig.goal} {'met' if fig.goal_met else 'MISSED'}" if fig.goal else ""
        print(f"{fig.name}: {fig.ours.cell(fig.unit)}{base}{ratio}{goal}")

"""The trigger bench's figures, from the watchers' measurements and the fake API's counts.

- Share of one core: CPU seconds of the watcher process over the watch / wall seconds.
- Requests per poll round: the job API's requests (gets and lists of either backend) in the
  busiest round. When the requests come in bursts (a shared poller's rounds: gaps longer than a
  third of the interval between them, each burst shorter than half of it), a round is a burst;
  otherwise (each job polled on its own clock) it is the busiest sliding window of one poll
  interval. Either way it is "how many requests one poll interval costs at full load".
- Detection lag: when the watcher had its event minus the job's exact ``endTime``.
- Logs: entries.list calls a minute (over the watch, and in the busiest 60 s), each job's lines
  accounted for (delivered once, or counted in a "lines dropped" notice: the per-job line cap
  drops chatty lines by design), and line latency (logged minus the entry's timestamp).
"""

from __future__ import annotations

import bisect
import math
import statistics
from typing import Any, Protocol

from bench.common import Figure, Series

TOPIC = "trigger at scale"
JOB_API = ("ml.", "vertex.")


class _Scenario(Protocol):
    @property
    def key(self) -> str: ...
    @property
    def mode(self) -> str: ...
    @property
    def api(self) -> str: ...
    @property
    def jobs(self) -> int: ...


def calls_in_watch(result: dict[str, Any], prefixes: tuple[str, ...]) -> list[float]:
    """Times of the fake API's requests of those methods made during the watch, sorted."""
    t0, t1 = result["t0"], result["t1"]
    times = [
        at
        for method, ats in result["api"]["calls"].items()
        if method.startswith(prefixes)
        for at in ats
        if t0 <= at <= t1
    ]
    return sorted(times)


def busiest_window(times: list[float], width: float) -> int:
    """The most requests in any window ``[t, t + width)``."""
    return max((bisect.bisect_left(times, t + width) - i for i, t in enumerate(times)), default=0)


def per_round(times: list[float], poll: float) -> tuple[int, str]:
    """Requests in the busiest poll round, and how rounds were told apart (module docstring)."""
    bursts: list[list[float]] = []
    for at in times:
        if bursts and at - bursts[-1][-1] <= poll / 3:
            bursts[-1].append(at)
        else:
            bursts.append([at])
    if len(bursts) >= 3 and all(b[-1] - b[0] < poll / 2 for b in bursts):
        return max(len(b) for b in bursts), "bursts"
    return busiest_window(times, poll), "sliding window"


def quantile(values: list[float], q: float) -> float:
    if len(values) < 2:
        return values[0] if values else math.nan
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def job_stats(result: dict[str, Any], poll: float) -> dict[str, Any]:
    """Share of a core, RSS, requests per round, detection lag and where that lag was spent."""
    rounds, how = per_round(calls_in_watch(result, JOB_API), poll)
    # The watcher's lags are in the order of the jobs, as the fake API lists them.
    told, delivered = [], []
    for lag, job in zip(result["lags"], result["api"]["jobs"].values(), strict=True):
        if job["told_end"] is not None:
            told.append(job["told_end"] - job["end"])
            delivered.append(job["end"] + lag - job["told_end"])
    steady = result.get("steady")
    return {
        "core": 100 * result["cpu"] / result["wall"],
        "steady_core": 100 * steady["cpu"] / steady["wall"] if steady else float("nan"),
        "rss": result["rss"],
        "p50": quantile(result["lags"], 0.50),
        "p99": quantile(result["lags"], 0.99),
        "told_p99": quantile(told, 0.99),
        "delivered_p99": quantile(delivered, 0.99),
        "rounds": rounds,
        "rounds_how": how,
    }


def last_running(result: dict[str, Any]) -> float:
    """Seconds into the watch when the last job turned RUNNING (its news comes a round later)."""
    t0 = float(result["t0"])
    return max((float(job["run"]) for job in result["api"]["jobs"].values() if job["run"]), default=t0) - t0


def service_ms(result: dict[str, Any], prefixes: tuple[str, ...]) -> tuple[float, float]:
    """Mean and max milliseconds the fake API spent answering one request of those methods."""
    rows = [row for method, row in result["api"]["service"].items() if method.startswith(prefixes)]
    n = sum(row[0] for row in rows)
    return 1000 * sum(row[1] for row in rows) / max(n, 1), 1000 * max((row[2] for row in rows), default=0)


def log_stats(result: dict[str, Any]) -> dict[str, Any]:
    """entries.list rates, each job's lines accounted for, and line latencies."""
    calls = calls_in_watch(result, ("logging.",))
    report, jobs = result["log"], result["api"]["jobs"]
    written = delivered = dropped = duplicates = unaccounted = 0
    for job_id, job in jobs.items():
        unique, dups, lost, _ = report["per_job"].get(job_id, [0, 0, 0, 0.0])
        written += job["log_lines"]
        delivered += unique
        dropped += lost
        duplicates += dups
        unaccounted += abs(job["log_lines"] - unique - lost)
    lags = report["lags"]["quiet"] + report["lags"]["chatty"]
    return {
        "per_minute": 60 * len(calls) / result["wall"],
        "peak_minute": busiest_window(calls, 60.0),
        "written": written,
        "delivered": delivered,
        "dropped": dropped,
        "duplicates": duplicates,
        "unaccounted": unaccounted,
        "p50": quantile(lags, 0.50),
        "p99": quantile(lags, 0.99),
        "quiet_p99": quantile(report["lags"]["quiet"], 0.99),
        "worst_job": max((row[3] for row in report["per_job"].values()), default=math.nan),
        "exhausted": report["exhausted"],
    }


def refused(result: dict[str, Any]) -> str:
    """The fake API's answers other than 200, by method ("" when there were none)."""
    bad = {
        f"{method} {status}": n
        for method, by in result["api"]["statuses"].items()
        for status, n in by.items()
        if status != "200"
    }
    return ", ".join(f"{k}: {n}" for k, n in sorted(bad.items()))


def progress_line(scenario: _Scenario, result: dict[str, Any], poll: float) -> str:
    s = job_stats(result, poll)
    line = (
        f"{scenario.jobs} waits ({scenario.mode}, {scenario.api}): {s['core']:.2f}% of a core, "
        f"RSS +{s['rss']:.1f} MiB, lag p99 {s['p99']:.2f}s, {s['rounds']} requests/round ({s['rounds_how']})"
    )
    if "log" in result:
        g = log_stats(result)
        line += (
            f"; entries.list {g['per_minute']:.1f}/min (peak {g['peak_minute']}), "
            f"{g['delivered']}+{g['dropped']} dropped of {g['written']} lines, dup {g['duplicates']}, "
            f"unaccounted {g['unaccounted']}, line lag p99 {g['p99']:.2f}s"
        )
    bad = refused(result)
    return line + (f"; non-200: {bad}" if bad else "")


def _one(label: str, value: float) -> Series:
    return Series(label, [value])


def _big_rows(big: _Scenario, ours: dict[str, Any], base: dict[str, Any] | None, poll: float) -> list[Figure]:
    """Share of a core, RSS, requests per round and lag at 5,000 waits, against per-job gets at 1,000."""
    n, where = big.jobs, f"{big.api}, {big.jobs} waits"

    def fig(key: str, name: str, unit: str, goal: str, met: bool | None) -> Figure:
        baseline = _one(f"per-job gets, {base['n']} waits", base[key]) if base else None
        return Figure(TOPIC, f"{where}: {name}", unit, _one("one triggerer", ours[key]), baseline, goal, met)

    budget = math.ceil(n / 100)
    steady = ours["steady_core"]
    return [
        fig("steady_core", f"share of one core waiting (poll {poll:g}s)", "%", "<= 3%", steady <= 3),
        fig("core", "share of one core over the whole watch (starts and ends included)", "%", "", None),
        fig("rss", "RSS added", "MiB", "<= 60 MiB", ours["rss"] <= 60),
        fig("rounds", "job-API requests per poll round", "req", f"<= {budget}", ours["rounds"] <= budget),
        fig("p99", "detection lag p99", "s", f"<= {poll + 1:g} s", ours["p99"] <= poll + 1),
    ]


def _guard_rows(scenarios: dict[str, _Scenario], stats: dict[str, Any], poll: float) -> list[Figure]:
    """The budget guard's cost at 5,000 waits: against the same waits without it, and per-job gets."""
    guard, n = stats["vertex_big_guard"], scenarios["vertex_big_guard"].jobs
    where = f"Vertex AI, {n} waits, budget guard on"
    rows = []
    if "vertex_big" in stats:
        off = stats["vertex_big"]["steady_core"]
        met = guard["steady_core"] <= 1.1 * off
        rows.append(
            Figure(
                TOPIC,
                f"{where}: share of one core waiting (poll {poll:g}s)",
                "%",
                _one("guard on", guard["steady_core"]),
                _one("the same waits, guard off", off),
                "<= 1.1x guard off",
                met,
            )
        )
    if "vertex_per_job" in stats:
        base = stats["vertex_per_job"]["steady_core"]
        per_job = scenarios["vertex_per_job"].jobs
        rows.append(
            Figure(
                TOPIC,
                f"{where}: share of one core waiting, against per-job gets",
                "%",
                _one("guard on", guard["steady_core"]),
                _one(f"per-job gets, {per_job} waits", base),
                "<= 0.05x per-job gets",
                guard["steady_core"] <= 0.05 * base,
            )
        )
    budget = math.ceil(n / 100)
    rows.append(
        Figure(
            TOPIC,
            f"{where}: job-API requests per poll round",
            "req",
            _one("guard on", guard["rounds"]),
            None,
            f"<= {budget}",
            guard["rounds"] <= budget,
        )
    )
    return rows


def _small_rows(ours: dict[str, Any], threads: dict[str, Any], n: int, poll: float) -> list[Figure]:
    label = f"{n} blocking poll threads"

    def fig(key: str, name: str, unit: str, goal: str = "", met: bool | None = None) -> Figure:
        return Figure(
            TOPIC,
            f"ml v1, {n} waits: {name}",
            unit,
            _one("one triggerer", ours[key]),
            _one(label, threads[key]),
            goal,
            met,
        )

    ratio = ours["core"] / threads["core"] if threads["core"] else math.inf
    return [
        fig("core", f"share of one core (poll {poll:g}s)", "%", "<= 0.2x the threads", ratio <= 0.2),
        fig("rss", "RSS added", "MiB"),
        fig("rounds", "job-API requests per poll round", "req"),
        fig("p99", "detection lag p99", "s", f"<= {poll + 1:g} s", ours["p99"] <= poll + 1),
    ]


def _log_rows(g: dict[str, Any], core: float, quiet_core: float | None, n: int, budget: int) -> list[Figure]:
    where = f"ml v1, {n} waits, log streaming on (10 chatty)"
    accounted = g["duplicates"] + g["unaccounted"]
    no_logs = None if quiet_core is None else _one("log streaming off", quiet_core)
    rows = [
        (
            "entries.list calls in the busiest 60 s",
            "calls",
            g["peak_minute"],
            f"<= {budget} (the budget, a minute)",
            g["peak_minute"] <= budget,
        ),
        ("entries.list calls a minute (mean over the watch)", "calls/min", g["per_minute"], "", None),
        (
            f"log lines duplicated or unaccounted, of {g['written']} written",
            "lines",
            accounted,
            "0 (each delivered once or reported dropped)",
            accounted == 0,
        ),
        ("line latency p50 (logged - entry timestamp)", "s", g["p50"], "", None),
        ("line latency p99", "s", g["p99"], "", None),
        ("quiet jobs' line latency p99, chatty jobs present", "s", g["quiet_p99"], "", None),
        ("worst line latency of any job (starvation)", "s", g["worst_job"], "", None),
    ]
    figs = [
        Figure(TOPIC, f"{where}: {name}", unit, _one("one triggerer", v), None, goal, met)
        for name, unit, v, goal, met in rows
    ]
    figs.append(Figure(TOPIC, f"{where}: share of one core", "%", _one("log streaming on", core), no_logs))
    return figs


def _drain_row(n: int, on: dict[str, Any], off: dict[str, Any] | None) -> Figure:
    return Figure(
        TOPIC,
        f"ml v1, {n} waits, log streaming on: job end -> event p99 (includes the log drain)",
        "s",
        _one("log streaming on", on["p99"]),
        None if off is None else _one("log streaming off", off["p99"]),
    )


def figures(
    scenarios: dict[str, _Scenario], results: dict[str, dict[str, Any]], poll: float, log_budget: int
) -> list[Figure]:
    """The section's rows, for the scenarios that were run."""
    stats = {key: job_stats(result, poll) for key, result in results.items()}
    out: list[Figure] = []
    for big, per_job in (("ml_big", "ml_per_job"), ("vertex_big", "vertex_per_job")):
        if big in stats:
            base = {**stats[per_job], "n": scenarios[per_job].jobs} if per_job in stats else None
            out += _big_rows(scenarios[big], stats[big], base, poll)
    if "vertex_big_guard" in stats:
        out += _guard_rows(scenarios, stats, poll)
    if "ml_small" in stats and "threads" in stats:
        out += _small_rows(stats["ml_small"], stats["threads"], scenarios["ml_small"].jobs, poll)
    if "ml_small" in stats and "ml_per_job" in stats:
        n = scenarios["ml_small"].jobs
        out.append(
            Figure(
                TOPIC,
                f"ml v1, {n} waits: share of one core, against the same triggers' per-job gets",
                "%",
                _one("one triggerer", stats["ml_small"]["core"]),
                _one(f"per-job gets, {scenarios['ml_per_job'].jobs} waits", stats["ml_per_job"]["core"]),
            )
        )
    if "logs" in results:
        quiet = stats["ml_small"]["core"] if "ml_small" in stats else None
        g = log_stats(results["logs"])
        out += _log_rows(g, stats["logs"]["core"], quiet, scenarios["logs"].jobs, log_budget)
        out.append(_drain_row(scenarios["logs"].jobs, stats["logs"], stats.get("ml_small")))
    if out:
        out[0].notes += notes(scenarios, results, poll)
    return out


def notes(scenarios: dict[str, _Scenario], results: dict[str, dict[str, Any]], poll: float) -> list[str]:
    lines = [
        "Each scenario is one fresh watcher process against a fake ml v1 / Vertex AI / Cloud Logging "
        "API (bench/trigger_api.py, its own process, not measured); jobs end 2-6 poll intervals "
        f"({poll:g}s) after they are first named (10-12 for the 5,000-wait scenarios and their "
        "per-job-get baselines, RUNNING from 25-30 s: 'waiting' is their CPU from 45 s to 95 s into "
        "the watch, every job running and seen so, none changing, five whole rounds). Share of one "
        "core = the watcher's CPU seconds over the watch / its wall seconds; RSS added = its peak "
        "during the watch over its size before. One measurement per scenario (CPU figures are noisy "
        "on a shared 2-core machine).",
        "The 5,000-wait rows' baseline is the same TrainingJobTrigger waiting the way it did before "
        "the shared poller (its own hook, one get per poll; bench/trigger_watch.py PerJobGetTrigger) "
        "at 1,000 waits: five times fewer jobs, which favours the baseline.",
    ]
    for key, result in results.items():
        s, bad = job_stats(result, poll), refused(result)
        mean, worst = service_ms(result, JOB_API)
        lines.append(
            f"{key}: job end -> first answer saying so p99 {s['told_p99']:.2f}s, that answer -> "
            f"event p99 {s['delivered_p99']:.2f}s; requests per round told apart by {s['rounds_how']}; "
            f"the fake API answered a job-API call in {mean:.2f} ms (mean), {worst:.0f} ms (max); RSS "
            f"added at the end +{result['rss_end']:.1f} MiB; {result['lines_logged']} trigger log lines"
            f"; last job RUNNING {last_running(result):.1f}s into the watch; load average "
            f"{result.get('load', math.nan):.2f} as it started" + (f"; non-200 answers: {bad}" if bad else "")
        )
    if "logs" in results:
        g = log_stats(results["logs"])
        lines.append(
            f"logs: of {g['written']} lines written up to the jobs' ends, {g['delivered']} delivered and "
            f"{g['dropped']} reported dropped by the per-job cap (max_log_lines_per_minute); "
            f"{g['duplicates']} duplicates, {g['unaccounted']} unaccounted; {g['exhausted']} drains "
            "stopped at their 60 s limit; the fake API answered an entries.list in "
            "{:.1f} ms (mean), {:.0f} ms (max).".format(*service_ms(results["logs"], ("logging.",)))
        )
    return lines

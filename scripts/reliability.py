"""`make reliability`: run the reliability and security tests many times and measure what was lost.

Each row of RELIABILITY.md's measured table comes from here: the example pipeline N times against
``aip-local serve --fault-rate 0.2``, and the other reliability tests (faulty creates, crashes,
kills, the real triggerer, bad input, security, staging races) repeated, each a pytest run of its
own so the tiers' fixtures start and stop as they do in ``make test``. Figures are counted from
pytest's JUnit XML and from the JSON reports the tests write when AIP_RELIABILITY_REPORT is set.

    python scripts/reliability.py --runs 20 --repeats 3 --write   # rewrites RELIABILITY.md's table
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RELIABILITY_MD = REPO / "RELIABILITY.md"
BEGIN, END = "<!-- measured:begin -->", "<!-- measured:end -->"


@dataclass
class Outcome:
    """What repeated pytest runs of one selection gave."""

    cases: int = 0
    passed: int = 0
    failed: int = 0
    xfailed: int = 0
    seconds: float = 0.0
    reports: list[Any] = field(default_factory=list)

    @property
    def lost(self) -> int:
        return self.failed


def run_pytest(selection: list[str], repeats: int, env: dict[str, str] | None = None) -> Outcome:
    """Run ``pytest selection`` ``repeats`` times; count test outcomes and collect JSON reports."""
    outcome = Outcome()
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="aip-reliability-") as tmp:
            junit, report = Path(tmp) / "junit.xml", Path(tmp) / "report.json"
            argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}"]
            started = time.monotonic()
            done = subprocess.run(
                argv + selection,
                cwd=REPO,
                env={**os.environ, **(env or {}), "AIP_RELIABILITY_REPORT": str(report)},
                capture_output=True,
                text=True,
            )
            outcome.seconds += time.monotonic() - started
            if not junit.exists():
                raise RuntimeError(
                    f"pytest {selection} produced no result:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
                )
            _count(ElementTree.parse(junit).getroot(), outcome)
            if done.returncode not in (0, 1):
                raise RuntimeError(
                    f"pytest {selection} could not run ({done.returncode}):\n{done.stdout[-3000:]}"
                )
            if report.exists():
                outcome.reports.append(json.loads(report.read_text()))
            if done.returncode:
                print(done.stdout[-5000:], file=sys.stderr)
    return outcome


def _count(root: ElementTree.Element, outcome: Outcome) -> None:
    for case in root.iter("testcase"):
        outcome.cases += 1
        skipped = case.find("skipped")
        if case.find("failure") is not None or case.find("error") is not None:
            outcome.failed += 1
        elif skipped is not None and "xfail" in (skipped.get("type", "") + skipped.get("message", "")):
            outcome.xfailed += 1
        elif skipped is None:
            outcome.passed += 1


def pipeline_row(runs: int) -> tuple[list[str], dict[str, Any]]:
    outcome = run_pytest(
        ["tests/integration/test_reliability_pipeline.py"], 1, {"AIP_RELIABILITY_RUNS": str(runs)}
    )
    if not outcome.reports:
        raise RuntimeError("the fault-rate pipeline test wrote no report")
    report = outcome.reports[0]
    results = report["runs"]
    succeeded = sum(r["state"] == "success" and r.get("manifests") == 1 for r in results)
    duplicates = sum(max(0, len(r["jobs"]) - 1) for r in results)
    missing = sum(len(r["jobs"]) == 0 for r in results)
    creates = sum(r["creates_applied"] for r in results)
    faults = report["service"]["faults"]
    kinds = Counter(label for counts in faults.values() for label, n in counts.items() for _ in range(n))
    # The job API's creates: customJobs/hyperparameterTuningJobs on Vertex AI, jobs on ml v1.
    create_faults = [n for method, n in faults.items() if method.endswith("obs.create")]
    on_creates = sum(sum(n.values()) for n in create_faults)
    after_creates = sum(c for n in create_faults for label, c in n.items() if label.startswith("after"))
    calls = sum(r.get("calls", 0) for r in results)
    on_storage = sum(sum(n.values()) for method, n in faults.items() if method.startswith("storage."))
    detail = {
        "runs": runs,
        "succeeded": succeeded,
        "jobs_created": creates,
        "duplicates": duplicates,
        "missing": missing,
        "calls": calls,
        "faults": sum(kinds.values()),
        "faults_on_create": on_creates,
        "faults_after_create": after_creates,
        "faults_on_storage": on_storage,
        "kinds": dict(sorted(kinds.items())),
        "seed": report["seed"],
        "seconds_per_run": round(sum(r.get("seconds", 0) for r in results) / max(1, len(results)), 1),
    }
    row = [
        "Example pipeline (`dag.test()`) against `aip-local serve --fault-rate 0.2`: "
        f"{detail['faults']} faults injected in {calls} Vertex AI, logging and Cloud Storage calls "
        f"({on_creates} on creates, {after_creates} of them after the create was applied; "
        f"{on_storage} on Cloud Storage)",
        f"{runs} runs",
        f"{succeeded}/{runs} succeeded; {creates} jobs for {runs} submits; "
        f"duplicates {duplicates}, missing {missing}",
        "`make reliability` (or `AIP_RELIABILITY_RUNS=20 pytest "
        "tests/integration/test_reliability_pipeline.py`)",
    ]
    return row, detail


def ladder_row(runs: int) -> tuple[list[str], dict[str, Any]]:
    """The capacity ladder [an out-of-stock rung, a good one] at a 20% fault rate: one job per rung."""
    outcome = run_pytest(
        ["tests/integration/test_reliability_ladder.py"], 1, {"AIP_RELIABILITY_RUNS": str(runs)}
    )
    if not outcome.reports:
        raise RuntimeError("the fault-rate ladder test wrote no report")
    results = outcome.reports[0]["runs"]

    def rungs_as_expected(result: dict[str, Any]) -> bool:
        states = [(job.get("rung"), job.get("state"), job.get("code")) for job in result["jobs"]]
        expected = [("a100", "FAILED", 8), ("cpu", "SUCCEEDED", None)]
        return result["state"] == "success" and states == expected and result["creates_applied"] == 2

    succeeded = sum(rungs_as_expected(r) for r in results)
    jobs = sum(len(r["jobs"]) for r in results)
    duplicates = sum(max(0, len(r["jobs"]) - 2) for r in results)
    missing = sum(max(0, 2 - len(r["jobs"])) for r in results)
    calls, faults = sum(r.get("calls", 0) for r in results), sum(r.get("faults", 0) for r in results)
    on_creates = sum(sum(r.get("create_faults", {}).values()) for r in results)
    detail = {
        "runs": runs,
        "succeeded": succeeded,
        "jobs": jobs,
        "duplicates": duplicates,
        "missing": missing,
    }
    detail |= {"calls": calls, "faults": faults, "faults_on_create": on_creates}
    row = [
        "A capacity ladder [an A100 rung the region is out of (`--stockout`), a CPU rung] (`dag.test()`) "
        f"against `aip-local serve --fault-rate 0.2`: {faults} faults injected in {calls} calls "
        f"({on_creates} on creates)",
        f"{runs} runs",
        f"{succeeded}/{runs} with one job per rung (rung 1 FAILED code 8, rung 2 SUCCEEDED); {jobs} jobs "
        f"for {runs} two-rung ladders; duplicates {duplicates}, missing {missing}",
        "`AIP_RELIABILITY_RUNS=20 pytest tests/integration/test_reliability_ladder.py`",
    ]
    return row, detail


def registry_row(runs: int) -> tuple[list[str], dict[str, Any]]:
    """A Model Registry upload whose answer is lost after the service applied it: one version."""
    outcome = run_pytest(
        ["tests/integration/test_reliability_registry.py"], 1, {"AIP_RELIABILITY_RUNS": str(runs)}
    )
    if not outcome.reports:
        raise RuntimeError("the registry fault test wrote no report")
    results = outcome.reports[0]["runs"]
    one = sum(len(r.get("versions", [])) == 1 and r.get("uploads_sent") == 1 for r in results)
    versions = sum(len(r.get("versions", [])) for r in results)
    kinds = sorted({str(r["kind"]) for r in results})
    detail = {"runs": runs, "one_version": one, "versions": versions, "kinds": kinds}
    row = [
        "A Model Registry upload whose answer is lost after the service applied it "
        f"(`models.upload` {'/'.join(kinds)} after apply), then the task retried: `RegisterModelOperator` "
        "with the champion gate",
        f"{runs} runs",
        f"{one}/{runs} with exactly one version (holding `champion`) and one upload applied; "
        f"{versions} versions for {runs} models; duplicates {max(0, versions - runs)}",
        "`AIP_RELIABILITY_RUNS=20 pytest tests/integration/test_reliability_registry.py`",
    ]
    return row, detail


def repeated_row(
    what: str, selection: list[str], repeats: int, command: str
) -> tuple[list[str], dict[str, Any]]:
    outcome = run_pytest(selection, repeats)
    lost = f"{outcome.lost} failed" if outcome.lost else "nothing"
    known = f", {outcome.xfailed} known-gap case(s) (xfail)" if outcome.xfailed else ""
    row = [
        what,
        f"{outcome.cases} cases ({repeats}x)",
        f"{outcome.passed}/{outcome.cases} passed{known}; lost: {lost}",
        command,
    ]
    detail: dict[str, Any] = {
        "cases": outcome.cases,
        "passed": outcome.passed,
        "failed": outcome.failed,
        "xfailed": outcome.xfailed,
    }
    if outcome.reports:
        detail["reports"] = outcome.reports
    return row, detail


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="pipeline runs at a 20%% fault rate")
    parser.add_argument("--repeats", type=int, default=3, help="repetitions of every other selection")
    parser.add_argument("--staging-repeats", type=int, default=10, help="repetitions of the staging races")
    parser.add_argument(
        "--outage-repeats", type=int, default=2, help="repetitions of the 60 s outage (about 3 min each)"
    )
    parser.add_argument(
        "--celery-repeats", type=int, default=2, help="repetitions of each Celery row (about 3 min each)"
    )
    parser.add_argument(
        "--write", action="store_true", help=f"rewrite the measured table in {RELIABILITY_MD.name}"
    )
    args = parser.parse_args()
    started = time.monotonic()
    rows, details = [], {}

    def add(name: str, made: tuple[list[str], dict[str, Any]]) -> None:
        rows.append(made[0])
        details[name] = made[1]
        print(f"{name}: {made[0][2]}", flush=True)

    add("pipeline_faults", pipeline_row(args.runs))
    add("ladder_faults", ladder_row(args.runs))
    add("registry_faults", registry_row(args.runs))
    add(
        "create_faults",
        repeated_row(
            "Faulty creates on both backends (`customJobs.create` on Vertex AI, `jobs.create` on ml "
            "v1; 429/500/503/drop/reset, before or after applied; if_exists adopt/new/fail), a create "
            "failing 6 times, SIGKILL between create and XCom push then retry, FAILED then retry",
            ["tests/integration/test_reliability_faults.py"],
            args.repeats,
            "`pytest tests/integration/test_reliability_faults.py`",
        ),
    )
    add(
        "storage_faults",
        repeated_row(
            "Faulty Cloud Storage calls (429/500/503/drop/reset, before or after applied) aimed at "
            "staging (one-request and resumable uploads), export (list, get, copy, manifest write) "
            "and an export re-run; streaming through the fault proxy",
            ["tests/integration/test_reliability_gcs_faults.py"],
            1,
            "`pytest tests/integration/test_reliability_gcs_faults.py`",
        ),
    )
    add(
        "outage",
        repeated_row(
            "An API outage while waiting: every `jobs.get` and `jobs.list` answers 503 for 60 s (ml v1 "
            "jobs: the wait step is the same on both backends) while five `dag.test()` runs wait at "
            "once, the submit operator in the worker and deferred, the sensor in poke, "
            "reschedule and deferrable mode (`retries=0`): each task succeeds after it, its job never "
            "cancelled, one job each",
            ["tests/integration/test_reliability_outage.py"],
            args.outage_repeats,
            "`pytest tests/integration/test_reliability_outage.py`",
        ),
    )
    add(
        "kill_worker",
        repeated_row(
            "SIGTERM to a task waiting in the worker (a `dag.test()` process), the submit operator and a "
            "poke-mode sensor (`cancel_on_kill=True`): job CANCELLED by `on_kill`",
            ["tests/integration/test_reliability_kill.py"],
            args.repeats,
            "`pytest tests/integration/test_reliability_kill.py`",
        ),
    )
    add(
        "e2e",
        repeated_row(
            "`airflow standalone`: pipeline deferred to the real triggerer; user marks failed (REST API) "
            "a task waiting in each mode: submit in the worker and deferred, sensor poke, deferred and "
            "reschedule (between pokes: the cancelling teardown); secrets in stored task logs, worker "
            "and triggerer",
            ["tests/e2e"],
            args.repeats,
            "`pytest tests/e2e`",
        ),
    )
    add(
        "deferral_race",
        repeated_row(
            "Airflow's executor-event race (apache/airflow#67287) under `airflow standalone`: 20 runs at "
            "once of a Dag whose deferred tasks (`retries=0`) meet jobs ending 0.5 to 3 s after the "
            "deferral: one succeeds, one fails 1 s in, one climbs a capacity ladder after 2 s; with "
            "`[aip] deferral_hold` at its default, each task ends as its job did",
            ["tests/e2e/test_deferral_race.py", "-m", "soak"],
            1,
            "`pytest tests/e2e/test_deferral_race.py -m soak`",
        ),
    )
    add(
        "celery_race",
        repeated_row(
            "The same race on CeleryExecutor: 5 runs at once of the race Dag",
            ["tests/celery", "-k", "race"],
            1,
            "`pytest tests/celery -k race`",
        ),
    )
    add(
        "celery_no_shared_disk",
        repeated_row(
            "Tasks on workers that share no disk: the example pipeline on CeleryExecutor, build on one "
            "worker and stage on another (own HOME, queue, and TMPDIR on a private tmpfs): stage rebuilds "
            "the build's exact bytes; one job, model exported",
            ["tests/celery", "-k", "share_no_disk"],
            args.celery_repeats,
            "`pytest tests/celery -k share_no_disk`",
        ),
    )
    add(
        "celery_worker_killed",
        repeated_row(
            "A worker killed while its job trains: SIGKILL to a Celery worker and every process under it "
            "while its task waits on a running job; the retry runs on the other worker and adopts the "
            "job; one job",
            ["tests/celery", "-k", "killed"],
            args.celery_repeats,
            "`pytest tests/celery -k killed`",
        ),
    )
    add(
        "bad_input",
        repeated_row(
            "Bad-input table: job IDs, every trainingInput rule, hyperparameters, URIs, buckets, "
            "package trees, export destinations, config files",
            ["tests/unit/test_bad_input_table.py"],
            1,
            "`pytest tests/unit/test_bad_input_table.py`",
        ),
    )
    add(
        "security",
        repeated_row(
            "Loopback binding, ids in paths, per-job work dirs, keys/tokens/flagged args out of XCom, "
            "rendered fields and manifest",
            ["tests/integration/test_security.py"],
            args.repeats,
            "`pytest tests/integration/test_security.py`",
        ),
    )
    add(
        "staging",
        repeated_row(
            "Staging races: two stagers of one package, stagers of different bytes, "
            "checksum mismatch removed",
            ["tests/integration/test_staging.py", "-k", "concurrent or checksum"],
            args.staging_repeats,
            "`pytest tests/integration/test_staging.py -k 'concurrent or checksum'`",
        ),
    )
    table = render(rows, details, time.monotonic() - started)
    print(table)
    if args.write:
        text = RELIABILITY_MD.read_text()
        head, _, rest = text.partition(BEGIN)
        _, _, tail = rest.partition(END)
        RELIABILITY_MD.write_text(f"{head}{BEGIN}\n{table}\n{END}{tail}")
    return (
        0
        if all(d.get("failed", 0) == 0 for d in details.values())
        and details["pipeline_faults"]["succeeded"] == args.runs
        else 1
    )


def render(rows: list[list[str]], details: dict[str, Any], seconds: float) -> str:
    lines = ["| What was tried | How many times | What was lost | Reproduce |", "|---|---|---|---|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    kills = [r.get("kill_to_cancelled_seconds") for r in details["kill_worker"].get("reports", [])]
    e2e = [r.get("kill_to_cancelled_seconds") for r in details["e2e"].get("reports", [])]
    pipeline = details["pipeline_faults"]
    outages = [r.get("modes") for r in details["outage"].get("reports", [])]
    celery = [r.get("celery_kill") for r in details["celery_worker_killed"].get("reports", [])]
    lines += [
        "",
        f"Measured {time.strftime('%Y-%m-%d')} in {seconds / 60:.0f} min on this machine "
        f"(`python scripts/reliability.py --runs {pipeline['runs']}`).",
        f"- Faults drawn in the pipeline runs, by kind: {pipeline['kinds']} (seed {pipeline['seed']}; "
        f"{pipeline['seconds_per_run']} s per run).",
        "- API outage of 60 s while waiting (poll interval 2 s), per run and mode: the outage as the task "
        "logged it (seconds, failed reads; a reschedule sensor logs one line per poke that met it) and "
        f"how long after the outage's end the task ended (its job's own remaining run included): {outages}.",
        f"- Kill to CANCELLED, task waiting in the worker (poll interval 2 s): {kills} s.",
        f"- Kill to CANCELLED under airflow standalone (poll interval 2 s; reschedule sensor 10 s): {e2e} s.",
        "- A Celery worker SIGKILLed under a task waiting on a 60 s job (heartbeat timeout 30 s): processes "
        f"killed and seconds from the kill to the run's success, the retry's wait included: {celery}.",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())

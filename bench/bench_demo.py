"""`make demo` wall time, against the time its training job itself took on the service.

The ratio says what the orchestration costs on top of training: Airflow's `dags test`, building,
staging, deferral and export, plus starting the local stack.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from bench.common import Figure, Series

REPO = Path(__file__).resolve().parent.parent


def _job_seconds() -> float:
    """The demo's tuning job that ran (its ladder's STANDARD rung; the Spot rung's job failed at once)."""
    records = (REPO / ".airflow" / "aip-local" / "projects").glob("*/jobs/*/job.json")
    jobs = [json.loads(path.read_text())["job"] for path in records]  # the record wraps the API's Job
    ran = [job for job in jobs if job.get("state") == "SUCCEEDED"]  # the record keeps its own state names
    if len(ran) != 1:
        raise RuntimeError(f"expected the demo's one succeeded job, found {len(ran)} of {len(jobs)}")
    start, end = (datetime.fromisoformat(ran[0][k].replace("Z", "+00:00")) for k in ("createTime", "endTime"))
    return (end - start).total_seconds()


def run(repeats: int) -> list[Figure]:
    walls, jobs = [], []
    for _ in range(max(1, min(repeats, 2))):  # ~25 s each
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "scripts/demo.py"], cwd=REPO, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"make demo failed:\n{done.stderr[-2000:]}")
        walls.append(time.perf_counter() - start)
        jobs.append(_job_seconds())
    return [
        Figure(
            "make demo",
            "wall time of `make demo` (a Spot stockout climbed to STANDARD; 6 trials, 2 in parallel)",
            "s",
            Series("make demo", walls),
            Series("its tuning job, createTime -> endTime", jobs),
            goal="<= 25 s on a warm machine (after install)",
            goal_met=Series("make demo", walls).median <= 25.0,
        )
    ]

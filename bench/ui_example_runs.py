"""Issue 52's figure: how long `make ui`'s two example runs take, per deferral hold and defer_after.

``python -m bench.ui_example_runs``: for each ``HOLD:DEFER_AFTER`` (``--settings``; default
the hold's default with ``defer_after`` 0, the code before the first wait in the worker, then
both defaults), a fresh start of the ``make ui`` stack (``scripts/ui.py`` in a new empty
home, on free ports, with ``AIRFLOW__AIP__DEFERRAL_HOLD`` and ``..._DEFER_AFTER`` set), then,
as a user of the page would, one run of ``aip_training_pipeline`` and, once it ended, one of
``aip_retraining``, each triggered with its form's defaults through the REST API. A run's time is
Airflow's own (the run's ``start_date`` to its ``end_date``). The stack's own first runs (aip_prepare_data's
and the aip_retraining run its Asset event starts) are let finish first, so the runs timed share
the machine with nothing of the stack's. ``30:0`` stands for the code before issue 52.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from airflow_aip import config
from bench.ui_first_trigger import REPO, UiStart

RUNS = ("aip_training_pipeline", "aip_retraining")
RUN_BOUND = 600.0  # seconds: a bound to fail on rather than hang, never a measure
TERMINAL = {"success", "failed"}


def _seconds(run: dict[str, Any]) -> float:
    start, end = (
        datetime.fromisoformat(str(run[k]).replace("Z", "+00:00")) for k in ("start_date", "end_date")
    )
    return round((end - start).total_seconds(), 1)


def _runs(stack: UiStart, dag_id: str) -> list[dict[str, Any]]:
    answer = stack.http.get(f"/api/v2/dags/{dag_id}/dagRuns", params={"limit": 100})
    return list(answer.json()["dag_runs"]) if answer.status_code == 200 else []


def _settle(stack: UiStart) -> None:
    """Wait until the stack's own first runs have ended: aip_prepare_data's, and what its Asset starts."""
    deadline = time.monotonic() + RUN_BOUND
    while time.monotonic() < deadline:
        stack.look()
        prepared = _runs(stack, "aip_prepare_data")
        runs = prepared + _runs(stack, "aip_retraining")
        if prepared and all(r["state"] in TERMINAL for r in runs):
            return
        time.sleep(2)
    states = [
        (r["dag_id"], r["state"]) for r in _runs(stack, "aip_prepare_data") + _runs(stack, "aip_retraining")
    ]
    raise RuntimeError(f"the stack's own first runs did not end: {states}")


def _timed(stack: UiStart, dag_id: str) -> dict[str, Any]:
    answer = stack.http.post(f"/api/v2/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": {}})
    answer.raise_for_status()
    run_id = answer.json()["dag_run_id"]
    deadline = time.monotonic() + RUN_BOUND
    while time.monotonic() < deadline:
        stack.look()
        run = stack.http.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}").json()
        if run["state"] in TERMINAL:
            tis = stack.http.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances").json()
            tasks = {ti["task_id"]: round(ti.get("duration") or 0, 1) for ti in tis["task_instances"]}
            return {"dag_id": dag_id, "state": run["state"], "seconds": _seconds(run), "tasks": tasks}
        time.sleep(1)
    raise RuntimeError(f"{dag_id} {run_id} did not end")


def one_hold(hold: int, defer_after: int) -> dict[str, Any]:
    os.environ["AIRFLOW__AIP__DEFERRAL_HOLD"] = str(hold)
    os.environ["AIRFLOW__AIP__DEFER_AFTER"] = str(defer_after)
    stack = UiStart(hold, REPO)
    try:
        stack.log_in()
        _settle(stack)
        runs = [_timed(stack, dag_id) for dag_id in RUNS]
        return {"hold": hold, "defer_after": defer_after, "runs": runs}
    finally:
        stack.stop(Path(os.environ["AIP_BENCH_KEEP"]) if os.environ.get("AIP_BENCH_KEEP") else None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    hold, after = (config.OPTIONS[name].default for name in ("deferral_hold", "defer_after"))
    parser.add_argument(
        "--settings",
        nargs="+",
        default=[f"{hold}:0", f"{hold}:{after}"],
        help="HOLD:DEFER_AFTER pairs, each on a fresh stack (default: deferring at once, then the defaults)",
    )
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    figures = []
    for setting in args.settings:
        hold_s, _, after_s = setting.partition(":")
        figures.append(one_hold(int(hold_s), int(after_s or 0)))
        print(json.dumps(figures[-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    failed = [r for f in figures for r in f["runs"] if r["state"] != "success"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

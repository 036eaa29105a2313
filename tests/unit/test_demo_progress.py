"""`make demo`'s progress, on a recorded sequence of looks at a run (the real run: tests/e2e/test_ui.py)."""

from __future__ import annotations

import io
import re
from typing import Any

from airflow_aip.jobs.mlv1.view import view_from_ml
from scripts.progress import LivePrinter, PlainPrinter, ProgressTracker, Snapshot, printer_for

SPEC = {"goal": "MAXIMIZE", "hyperparameterMetricTag": "accuracy"}


def _job(state: str, *trials: tuple[str, str, float | None]) -> dict[str, Any]:
    out = []
    for trial_id, trial_state, value in trials:
        trial: dict[str, Any] = {
            "trialId": trial_id,
            "state": trial_state,
            "hyperparameters": {"C": f"{trial_id}.000123456", "kernel": "rbf"},
        }
        if value is not None:
            trial["finalMetric"] = {"objectiveValue": value}
        out.append(trial)
    job = {
        "jobId": "iris_1",
        "state": state,
        "trainingInput": {"hyperparameters": SPEC},
        "trainingOutput": {"trials": out},
    }
    return view_from_ml(job)  # what the demo hands the tracker: the neutral view


BEFORE = {"prepare_data": "success", "build_trainer": "success", "stage_trainer": "success"}
RECORDED = [
    Snapshot({"prepare_data": "running", "build_trainer": None}),
    Snapshot({"prepare_data": "success", "build_trainer": "success", "stage_trainer": "running"}),
    # `airflow dags test` keeps a deferred task "queued" while it runs the trigger: its start date tells
    Snapshot({**BEFORE, "tune": "queued"}, [_job("QUEUED")], frozenset(BEFORE) | {"tune"}),
    Snapshot(
        {**BEFORE, "tune": "deferred"}, [_job("RUNNING", ("1", "RUNNING", None), ("2", "RUNNING", None))]
    ),
    Snapshot(
        {**BEFORE, "tune": "deferred"}, [_job("RUNNING", ("1", "RUNNING", None), ("2", "SUCCEEDED", 0.9))]
    ),
    Snapshot(
        {**BEFORE, "tune": "deferred"}, [_job("RUNNING", ("1", "RUNNING", None), ("2", "SUCCEEDED", 0.9))]
    ),
    Snapshot(
        {**BEFORE, "tune": "scheduled"}, [_job("RUNNING", ("1", "RUNNING", None), ("2", "SUCCEEDED", 0.9))]
    ),
    Snapshot(
        {**BEFORE, "tune": "running"},
        [_job("SUCCEEDED", ("1", "SUCCEEDED", 0.95), ("2", "SUCCEEDED", 0.9), ("3", "FAILED", None))],
    ),
    Snapshot(
        {**BEFORE, "tune": "success", "export_best_model": "success"},
        [_job("SUCCEEDED", ("1", "SUCCEEDED", 0.95), ("2", "SUCCEEDED", 0.9), ("3", "FAILED", None))],
    ),
]
EXPECTED = [
    "task prepare_data started",
    "task prepare_data ended: success",
    "task build_trainer started",
    "task build_trainer ended: success",
    "task stage_trainer started",
    "task stage_trainer ended: success",
    "task tune started",
    "job iris_1: QUEUED",
    "job iris_1: RUNNING",
    "trial 2 SUCCEEDED: C=2 kernel=rbf  accuracy=0.9000  best so far=0.9000",
    "trial 1 SUCCEEDED: C=1 kernel=rbf  accuracy=0.9500  best so far=0.9500",
    "trial 3 FAILED: C=3 kernel=rbf  accuracy=none  best so far=0.9500",
    "job iris_1: SUCCEEDED",
    "task tune ended: success",
    "task export_best_model started",
    "task export_best_model ended: success",
]


def _replay(printer: PlainPrinter) -> ProgressTracker:
    tracker = ProgressTracker()
    for snapshot in RECORDED:
        printer.show(tracker.update(snapshot), tracker)
    printer.close()
    return tracker


def test_plain_lines_in_order_one_per_trial() -> None:
    out = io.StringIO()

    _replay(printer_for(out, started=0.0))

    lines = out.getvalue().splitlines()
    assert all(re.match(r"^\[ *\d+s\] ", line) for line in lines), lines
    assert [line.split("] ", 1)[1] for line in lines] == EXPECTED
    assert "\x1b" not in out.getvalue()  # not a terminal: no control sequences


def test_live_display_redraws_a_status_line_below_the_same_lines() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    printer = printer_for(out, started=0.0)

    tracker = _replay(printer)

    assert isinstance(printer, LivePrinter)
    shown = out.getvalue()
    assert shown.count("\r\x1b[K") == len(RECORDED) + 1  # each redraw, and the final clear
    assert "running: tune · trials done: 1 · best: 0.9000" in shown
    assert [line for line in EXPECTED if line in shown] == EXPECTED
    assert tracker.status() == "running: — · trials done: 3 · best: 0.9500"

"""Every configured rung in the ladder's records, and the rung a job runs on: what the UI shows."""

from __future__ import annotations

from airflow_aip.jobs.vertex.capacity import Ending
from airflow_aip.jobs.vertex.ladder import Rung
from airflow_aip.jobs.vertex.ladder_trials import every_rung, rung_position, rung_record, with_rungs

SPOT, STANDARD = Rung(label="spot", strategy="SPOT"), Rung(label="standard", strategy="STANDARD")
SPOT_JOB = {"job_id": "iris_spot", "state": "RUNNING", "labels": {"aip_rung": "spot"}}
STANDARD_JOB = {"job_id": "iris_standard", "state": "SUCCEEDED", "labels": {"aip_rung": "standard"}}


def test_a_rung_not_reached_is_listed_if_needed_then_not_needed() -> None:
    """The issue's case: Spot ran, and the STANDARD rung the form configured is still listed."""
    current = rung_record(0, SPOT, SPOT_JOB, None, 0.0)
    running = every_rung((SPOT, STANDARD), [], current, ended=False)
    assert [(r["label"], r["status"], r["job_id"]) for r in running] == [
        ("spot", "running", "iris_spot"),
        ("standard", "if needed", None),
    ]
    ended = every_rung((SPOT, STANDARD), [], current, ended=True)
    assert [(r["rung"], r["status"], r["state"]) for r in ended] == [
        (1, "ran", "RUNNING"),
        (2, "not needed", None),
    ]


def test_after_a_climb_the_rung_passed_says_why() -> None:
    passed = rung_record(0, SPOT, {**SPOT_JOB, "state": "FAILED"}, Ending("stockout", "no Spot VMs"), 0.0)
    current = rung_record(1, STANDARD, STANDARD_JOB, None, 0.0)
    records = every_rung((SPOT, STANDARD), [passed], current, ended=True)
    assert [(r["label"], r["status"], r["ended_because"]) for r in records] == [
        ("spot", "out of capacity", "stockout"),
        ("standard", "ran", None),
    ]
    assert every_rung((SPOT, STANDARD), [passed, passed], None, ended=True)[1]["status"] == "out of capacity"


def test_the_rung_a_job_is_on_by_its_id_else_by_its_label() -> None:
    ladder = every_rung((SPOT, STANDARD), [], rung_record(0, SPOT, SPOT_JOB, None, 0.0), ended=False)
    assert rung_position({**SPOT_JOB, "ladder": ladder}) == {
        "rung": 1,
        "of": 2,
        "label": "spot",
        "placement": "SPOT",
        "text": "rung 1 of 2 · SPOT",
    }
    # A live read of rung 2's job, before its task announced it: its label still finds its rung.
    climbed = with_rungs(STANDARD_JOB, ladder)
    assert (rung_position(climbed) or {}).get("text") == "rung 2 of 2 · STANDARD"
    # A rung with no strategy is named as the ladder describes it; a job without a ladder has none.
    machine = Rung(label="big", machine_type="n1-standard-16")
    record = rung_record(0, machine, {"job_id": "j"}, None, 0.0)
    assert (rung_position({"job_id": "j", "ladder": [record]}) or {}).get(
        "text"
    ) == "rung 1 of 1 · big (n1-standard-16)"
    assert rung_position({"job_id": "j"}) is None
    assert with_rungs({"job_id": "j", "ladder": [record]}, ladder)["ladder"] == [
        record
    ]  # its own ladder wins


def test_a_ladder_whose_every_rung_ran_out_lists_them_all_as_such() -> None:
    """The summary of a wait that ended after the last rung was passed: no rung reached, none made up."""
    from types import SimpleNamespace
    from typing import Any, cast

    from airflow_aip.operators.climbing import Position
    from airflow_aip.operators.submit_run import SubmitPlan, SubmitRun

    passed = [
        rung_record(i, rung, {"job_id": f"j{i}"}, Ending("stockout", ""), 0.0)
        for i, rung in enumerate((SPOT, STANDARD))
    ]
    plan = SubmitPlan(rungs=(SPOT, STANDARD), requests=cast(Any, (None, None)), base_id="iris")
    ladder = SubmitRun(plan, cast(Any, None), cast(Any, None), cast(Any, SimpleNamespace(log=None)))
    out = ladder._summary({"job_id": "j1", "trials": []}, Position(2, None, records=passed))
    assert [(r["label"], r["status"]) for r in out["ladder"]] == [
        ("spot", "out of capacity"),
        ("standard", "out of capacity"),
    ]


def test_a_live_read_brings_its_rung_up_to_the_read() -> None:
    """The header and the ladder row of one page read the same state: the row the task announced
    when it created the job (QUEUED, running) takes the live read's state, times and part."""
    announced = rung_record(0, SPOT, {**SPOT_JOB, "state": "QUEUED"}, None, 0.0)
    ladder = every_rung((SPOT, STANDARD), [], announced, ended=False)
    running = {**SPOT_JOB, "create_time": "2026-11-25T10:00:00Z", "start_time": "2026-11-25T10:00:04Z"}
    now = 1795600810.0  # 2026-11-25T10:00:10Z
    rows = with_rungs(running, ladder, now)["ladder"]
    assert [(r["state"], r["status"], r["waited_seconds"], r["ran_seconds"]) for r in rows] == [
        ("RUNNING", "running", 4.0, 6.0),
        (None, "if needed", None, None),
    ]
    done = {**running, "state": "SUCCEEDED", "end_time": "2026-11-25T10:00:07Z"}
    rows = with_rungs(done, ladder, now)["ladder"]
    assert [(r["state"], r["status"], r["ran_seconds"]) for r in rows] == [
        ("SUCCEEDED", "ran", 3.0),
        (None, "not needed", None),
    ]
    assert ladder[0]["state"] == "QUEUED"  # the announced records are left as they were


def test_a_live_read_of_the_next_rung_marks_the_rung_before_passed() -> None:
    """Rung 2's job read before its task announced it: rung 1 can no longer be running."""
    ladder = every_rung((SPOT, STANDARD), [], rung_record(0, SPOT, SPOT_JOB, None, 0.0), ended=False)
    rows = with_rungs({**STANDARD_JOB, "state": "RUNNING"}, ladder)["ladder"]
    assert [(r["label"], r["status"], r["state"], r["job_id"]) for r in rows] == [
        ("spot", "out of capacity", "RUNNING", "iris_spot"),
        ("standard", "running", "RUNNING", "iris_standard"),
    ]

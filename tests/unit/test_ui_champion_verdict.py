"""What the pages say of a champion decision: the gate's sentence, what was promoted, and a tab that
waits for a decision a later task makes.

The sentence is the gate's own (``registry/gate.py``): the page shows it as written, with whether
the data were the same, and what was promoted (the registry's version and its job, or the export).
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_aip.ui.live import awaits_decision
from airflow_aip.ui.views import champion_comparison, job_list_row

SENTENCE = "accuracy 0.9556 on this run's data against the champion's 0.9333 (v3) on the same data: promoted"
REGISTERED = {
    "model": "projects/p/locations/us-central1/models/iris",
    "version_id": "4",
    "job_id": "iris_retrain_7",
    "metric": 0.9556,
    "metric_tag": "accuracy",
    "champion_alias": "champion",
    "promoted": True,
    "reason": SENTENCE,
    "champion_before": {"version_id": "3", "metric": 0.9},
    "champion_metric": 0.9333,
    "same_eval_data": True,
}
EXPORTED = {
    "job_id": "iris_retrain_8",
    "metric": 0.9556,
    "metric_tag": "accuracy",
    "exported": True,
    "promoted": True,
    "destination": "gs://b/models/iris_retrain_8",
    "champion_metric": 0.9333,
    "same_eval_data": False,
    "reason": "accuracy 0.9556 on this run's data against the champion's 0.9333 (j1) on other data: promoted",
}


def test_the_registrys_verdict_is_the_gates_sentence_and_names_the_version() -> None:
    shown = champion_comparison([REGISTERED])
    assert shown is not None
    assert (shown["verdict"], shown["same_eval_data"]) == (SENTENCE, True)
    assert shown["champion_metric"] == 0.9333  # the one compared: re-measured, not the recorded 0.9
    assert shown["promoted_what"] == f"Promoted version 4 of {REGISTERED['model']}, from job iris_retrain_7"
    kept = champion_comparison([{**REGISTERED, "promoted": False}])
    assert kept is not None
    assert kept["promoted_what"] is None


def test_the_exports_verdict_says_the_data_differed() -> None:
    shown = champion_comparison([EXPORTED])
    assert shown is not None
    assert (shown["verdict"], shown["same_eval_data"]) == (EXPORTED["reason"], False)
    assert shown["promoted_what"] == "Promoted job iris_retrain_8, exported to gs://b/models/iris_retrain_8"


def test_an_older_result_keeps_the_pages_own_sentence() -> None:
    older = {k: v for k, v in REGISTERED.items() if k != "same_eval_data"}
    shown = champion_comparison([older])
    assert shown is not None
    assert (shown["verdict"], shown["same_eval_data"]) == (None, None)


@pytest.mark.parametrize(
    ("export", "registration", "promoted", "promoted_as"),
    [
        (None, REGISTERED, True, f"version 4 of {REGISTERED['model']}"),
        (None, {**REGISTERED, "promoted": False}, False, None),
        (EXPORTED, None, True, "gs://b/models/iris_retrain_8"),
        ({**EXPORTED, "promoted": False, "exported": False}, None, False, None),
        (None, None, None, None),
    ],
)
def test_browse_says_what_was_promoted(
    export: Any, registration: Any, promoted: Any, promoted_as: Any
) -> None:
    row = job_list_row({"job_id": "j"}, None, "success", export, registration)
    assert (row["promoted"], row["promoted_as"]) == (promoted, promoted_as)


@pytest.mark.parametrize(
    ("has_job", "champion", "active", "expected"),
    [
        (True, None, True, True),  # the job ended, the run goes on, no decision yet: keep fetching
        (True, None, False, False),  # the run ended without a decision: stop
        (True, {"promoted": True}, True, False),  # the decision arrived: stop
        (False, None, True, False),  # not a training job's tab
    ],
)
def test_a_tab_waits_for_a_decision_only_while_the_run_may_make_it(
    has_job: bool, champion: Any, active: bool, expected: bool
) -> None:
    asked: list[bool] = []

    def run_active() -> bool:
        asked.append(True)
        return active

    assert awaits_decision(has_job, champion, run_active=run_active) is expected
    assert bool(asked) is (has_job and champion is None)  # the database is read only when it decides

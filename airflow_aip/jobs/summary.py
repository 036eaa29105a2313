"""The job summary every waiter returns to XCom: one shape for both backends and every waiter.

Built from the neutral job view (:mod:`.view`) alone (no API call), JSON-serialisable, so the
trigger can put it in its event and the extra link can read its URL from XCom while the UI
renders. Each thing is in it once, the answers first: which job, how it ended, which trial won;
then where it ran and what it tried.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_aip.jobs.backends import backend_of
from airflow_aip.jobs.cost import estimate
from airflow_aip.jobs.pricing import PriceTable
from airflow_aip.jobs.states import JobState
from airflow_aip.jobs.trials import best_trial

__all__ = ["SUMMARY_KEYS", "google_console_url", "summarize_job"]

SUMMARY_KEYS = (
    "job_id",
    "state",
    "best_trial",
    "error_message",
    "backend",
    "name",
    "console_url",
    "project_id",
    "region",
    "output_dir",
    "image_uri",
    "create_time",
    "start_time",
    "end_time",
    "labels",
    "is_hyperparameter_tuning_job",
    "hyperparameter_metric_tag",
    "goal",
    "parameters",
    "trials",
    "usage",
    "cost",
)


def google_console_url(view: Mapping[str, Any]) -> str | None:
    """The job's page in the Google Cloud console, for either backend; None when it cannot be named."""
    project, name = view.get("project_id"), str(view.get("name") or "")
    if not project or not name:
        return None
    return backend_of(view).console_url(str(project), name, view)


def summarize_job(view: Mapping[str, Any], now: float | None = None) -> dict[str, Any]:
    """What a DAG wants to know about a job (keys: :data:`SUMMARY_KEYS`), JSON-serialisable.

    ``parameters`` is the tuned hyperparameters' names, types and scales (from the spec), so the
    UI can draw a log axis for a log-scaled one without asking the API again. ``cost`` is the
    job's estimate (:mod:`.cost`, the shipped price table) up to its end, or to ``now`` while it runs.
    """
    tuning = bool(view.get("is_hyperparameter_tuning_job"))
    trials = [dict(t) for t in view.get("trials") or []]
    out = {key: view.get(key) for key in SUMMARY_KEYS}
    out.update(
        state=JobState.parse(view.get("state")).value,
        best_trial=best_trial(trials, view.get("goal")) if tuning else None,
        console_url=view.get("console_url") or google_console_url(view),
        labels=dict(view.get("labels") or {}),
        parameters=list(view.get("parameters") or []),
        trials=trials,
        cost=estimate(view, PriceTable.load(), now).to_json(),
    )
    return out

"""Browse → Training jobs: the recent jobs of the Dags a user may read, with their state now.

A job whose task stored its summary (or, when the wait did not succeed, how it ended) is drawn
from XCom. A job whose task still waits has no summary yet, and neither has one whose task was
killed while it waited: their state comes from one read of the job through the task's own hook,
shared with the live tab (:class:`airflow_aip.ui.live.LiveReads`: at most one read per job per
refresh interval, however many pages ask; an ended job's read is kept). So the filter's RUNNING
and QUEUED match the jobs that run, or are queued, now.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from airflow.models.taskinstance import TaskInstance
from airflow.models.xcom import XComModel
from sqlalchemy import and_, select, tuple_
from sqlalchemy.orm import Session

from airflow_aip.jobs.vertex.ladder_trials import with_rungs
from airflow_aip.links import ENDED_JOB_XCOM_KEY, JOB_API_XCOM_KEY, JOB_ID_XCOM_KEY, LADDER_XCOM_KEY
from airflow_aip.ui.live import LiveReads, job_api_of
from airflow_aip.ui.results import evaluation_of, evaluations
from airflow_aip.ui.views import (
    ended_job,
    is_export_result,
    is_job_summary,
    is_registration,
    job_list_row,
    passed_rung_rows,
    state_text,
)

RETURN_VALUE = "return_value"
# Reads of jobs without a summary are made side by side, so a page of waiting jobs loads in about
# one read's time rather than one per job (the hooks' HTTP client is thread-safe).
READ_THREADS = 8

Key = tuple[str, str, str, int]  # dag_id, run_id, task_id, map_index


def _submitted(session: Session, readable: set[str], limit: int) -> list[Any]:
    """The ``limit`` newest job ids pushed by readable Dags' tasks, with each task's state."""
    same_ti = and_(
        TaskInstance.dag_id == XComModel.dag_id,
        TaskInstance.run_id == XComModel.run_id,
        TaskInstance.task_id == XComModel.task_id,
        TaskInstance.map_index == XComModel.map_index,
    )
    return list(
        session.execute(
            select(
                XComModel.dag_id,
                XComModel.run_id,
                XComModel.task_id,
                XComModel.map_index,
                XComModel.value,
                XComModel.timestamp,
                TaskInstance.state,
            )
            .join(TaskInstance, same_ti, isouter=True)
            .where(XComModel.key == JOB_ID_XCOM_KEY, XComModel.dag_id.in_(readable))
            .order_by(XComModel.timestamp.desc())
            .limit(limit)
        ).all()
    )


def _stored(session: Session, runs: set[tuple[str, str]]) -> dict[str, dict[Key, Any]]:
    """The runs' return values, wait endings, job addresses and ladders, by XCom key then task instance."""
    keys = [RETURN_VALUE, ENDED_JOB_XCOM_KEY, JOB_API_XCOM_KEY, LADDER_XCOM_KEY]
    stored: dict[str, dict[Key, Any]] = {key: {} for key in keys}
    if not runs:
        return stored
    rows = session.execute(
        select(
            XComModel.dag_id,
            XComModel.run_id,
            XComModel.task_id,
            XComModel.map_index,
            XComModel.key,
            XComModel.value,
        ).where(XComModel.key.in_(keys), tuple_(XComModel.dag_id, XComModel.run_id).in_(runs))
    ).all()
    for r in rows:
        stored[r.key][(r.dag_id, r.run_id, r.task_id, r.map_index)] = XComModel.deserialize_value(r)
    return stored


def _summary_of(key: Key, stored: dict[str, dict[Key, Any]]) -> Any:
    """The job as the task left it: its returned summary, else how its wait ended, else None."""
    returned = stored[RETURN_VALUE].get(key)
    if is_job_summary(returned):
        return returned
    return ended_job(stored[ENDED_JOB_XCOM_KEY].get(key))


def _read_now(pending: list[dict[str, Any]], reads: LiveReads) -> list[dict[str, Any] | None]:
    """The summaries of jobs that have none in XCom, each read once (shared with the live tab)."""
    if not pending:
        return []
    with ThreadPoolExecutor(max_workers=min(READ_THREADS, len(pending))) as pool:
        return [read.summary for read in pool.map(reads.read, pending)]


def jobs_payload(
    session: Session,
    readable: set[str],
    dag_id: str | None,
    state: str | None,
    limit: int,
    *,
    reads: LiveReads,
) -> dict[str, Any]:
    """Recent jobs from readable Dags, newest first; filtered by Dag and by job state.

    The job state lives in the summary's JSON (or the job itself), so that filter applies to the
    ``limit`` most recent jobs (the Dag filter is SQL): "the failed ones among the last 100",
    which is what the page says.
    """
    dags = sorted(readable)
    if dag_id is not None:
        readable = readable & {dag_id}
    submitted = _submitted(session, readable, limit)
    stored = _stored(session, {(r.dag_id, r.run_id) for r in submitted})
    exports = {
        (d, run, str(v["job_id"])): v
        for (d, run, _, _), v in stored[RETURN_VALUE].items()
        if is_export_result(v)
    }
    registrations = {
        (d, run, str(v["job_id"])): v
        for (d, run, _, _), v in stored[RETURN_VALUE].items()
        if is_registration(v)
    }
    scored: dict[tuple[str, str], list[Any]] = {}
    for (d, run, _, _), v in stored[RETURN_VALUE].items():
        if is_export_result(v) or is_registration(v):
            scored.setdefault((d, run), []).append(v)
    summaries = {}
    pending: list[tuple[Key, dict[str, Any]]] = []
    for r in submitted:
        key = (r.dag_id, r.run_id, r.task_id, r.map_index)
        summaries[key] = _summary_of(key, stored)
        api = job_api_of(stored[JOB_API_XCOM_KEY].get(key))
        if summaries[key] is None and api is not None:
            pending.append((key, api))
    read_now = dict(
        zip([key for key, _ in pending], _read_now([api for _, api in pending], reads), strict=True)
    )
    rows = []
    for r in submitted:
        key = (r.dag_id, r.run_id, r.task_id, r.map_index)
        job_id = str(XComModel.deserialize_value(r))
        ident = {
            "job_id": job_id,
            "dag_id": r.dag_id,
            "run_id": r.run_id,
            "task_id": r.task_id,
            "map_index": r.map_index,
            "submitted": r.timestamp.isoformat() if r.timestamp else None,
        }
        summary = summaries[key] if summaries[key] is not None else read_now.get(key)
        if summary is not None:  # a running job's rung, as its task announced the ladder
            summary = with_rungs(summary, stored[LADDER_XCOM_KEY].get(key), time.time())
        found = (r.dag_id, r.run_id, job_id)
        evaluation = (
            evaluation_of(summary, evaluations(scored.get((r.dag_id, r.run_id), []))) if summary else None
        )
        row = job_list_row(
            ident, summary, state_text(r.state), exports.get(found), registrations.get(found), evaluation
        )
        row = {**row, "read_now": key in read_now and read_now[key] is not None}
        rows += [row, *passed_rung_rows(row, summary)]  # a ladder's passed rungs: their own jobs
    if state is not None:
        rows = [row for row in rows if (row["state"] or "") == state]
    return {"dags": dags, "jobs": rows}

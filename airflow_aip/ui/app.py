"""The FastAPI app Airflow's API server mounts at ``/aip``; imported only by the plugin's lazy factory.

A mounted app inherits none of the core API's authentication, so every route declares Airflow's
own dependencies: anonymous callers get 401, a user who may not read the Dag's XComs 403. Routes
are sync (database work, and a live job read, run in the threadpool). The one POST, the task tab's
"Cancel job", also needs edit rights on the Dag's task instances, and a custom header that a
cross-site form cannot send (the UI's cookie authenticates it: that header is the CSRF guard).

While a task waits, its tab reads the job live through :mod:`airflow_aip.ui.live` (one read per
job per refresh interval, shared by every page); once the task ended, only XCom.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from importlib.resources import files
from typing import Any

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.auth.managers.models.base_user import BaseUser
from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
from airflow.api_fastapi.common.db.common import SessionDep
from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_dag, requires_authenticated
from airflow.models.dag import DagModel
from airflow.models.dagrun import DagRun
from airflow.models.taskinstance import TaskInstance
from airflow.models.xcom import XComModel
from fastapi import Depends, FastAPI, Header, HTTPException, Query
from fastapi.responses import HTMLResponse, Response
from sqlalchemy import select
from sqlalchemy.orm import Session

from airflow_aip.compat import delete_xcom, xcom_set_options
from airflow_aip.jobs.vertex.ladder_trials import with_rungs
from airflow_aip.links import (
    CANCELLED_BY_XCOM_KEY,
    ENDED_JOB_XCOM_KEY,
    JOB_API_XCOM_KEY,
    JOB_ID_XCOM_KEY,
    LADDER_XCOM_KEY,
)
from airflow_aip.ui import live
from airflow_aip.ui.browse import RETURN_VALUE, jobs_payload
from airflow_aip.ui.costs import run_total
from airflow_aip.ui.live import (
    WAITING_TASK_STATES,
    LiveReads,
    awaits_decision,
    job_api_of,
    keeps_refreshing,
    resumes,
)
from airflow_aip.ui.views import (
    XComRow,
    built_image,
    champion_comparison,
    is_export_result,
    is_job_summary,
    is_registration,
    job_values,
    map_index_param,
    run_view,
    state_text,
)

# dag_id comes from the query string; with none, the check is "may this user read XComs at all".
READ_XCOM = Depends(requires_access_dag(method="GET", access_entity=DagAccessEntity.XCOM))
READ_TI = Depends(requires_access_dag(method="GET", access_entity=DagAccessEntity.TASK_INSTANCE))
EDIT_TI = Depends(requires_access_dag(method="PUT", access_entity=DagAccessEntity.TASK_INSTANCE))
# Sent by the page's own fetch; a cross-site form cannot set a header, and a cross-site fetch
# with one needs a CORS preflight that this app never grants.
CSRF_HEADER, CSRF_VALUE = "X-Requested-With", "aip"
LOGGED_IN = Depends(requires_authenticated())
STATIC_TYPES = {".js": "text/javascript", ".css": "text/css"}
PAGES = {"task": "Training job", "run": "Training jobs of the run", "jobs": "Training jobs"}


def _static(name: str) -> str:
    return (files("airflow_aip.ui") / "static" / name).read_text(encoding="utf-8")


def page_html(page: str) -> str:
    """A page's shell: its data comes from /api, its code and style from /static (same origin)."""
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{PAGES[page]}</title><link rel='stylesheet' href='../static/style.css'></head>"
        "<body><main><p id='status' class='status' role='status'>Loading…</p><div id='content'></div></main>"
        "<script src='../static/common.js'></script><script src='../static/charts.js'></script>"
        "<script src='../static/cost.js'></script>"
        f"<script src='../static/{page}.js'></script></body></html>"
    )


def _summaries(values: list[XComRow]) -> list[Any]:
    """The run's job summaries among its tasks' return values (the run tab's total)."""
    return [value for _, _, value in values if is_job_summary(value)]


def _return_values(session: Session, dag_id: str, run_id: str) -> list[XComRow]:
    """The run's return values; a task whose wait did not succeed stands for its job by how it ended."""
    rows = session.execute(
        select(XComModel.task_id, XComModel.map_index, XComModel.key, XComModel.value)
        .where(
            XComModel.dag_id == dag_id,
            XComModel.run_id == run_id,
            XComModel.key.in_([RETURN_VALUE, ENDED_JOB_XCOM_KEY]),
        )
        .order_by(XComModel.task_id, XComModel.map_index)
    ).all()
    # The raw DB value, as core's XCom endpoint reads it: a custom XCom backend may have stored a
    # reference there, which then simply is not a job summary (no remote fetch in the API server).
    values = {
        key: [(r.task_id, r.map_index, XComModel.deserialize_value(r)) for r in rows if r.key == key]
        for key in (RETURN_VALUE, ENDED_JOB_XCOM_KEY)
    }
    return job_values(values[RETURN_VALUE], values[ENDED_JOB_XCOM_KEY])


TiKey = tuple[str, str, str, int]  # dag_id, run_id, task_id, map_index


def _ti_xcoms(session: Session, ti: TiKey, keys: list[str]) -> dict[str, Any]:
    dag_id, run_id, task_id, map_index = ti
    rows = session.execute(
        select(XComModel.key, XComModel.value).where(
            XComModel.dag_id == dag_id,
            XComModel.run_id == run_id,
            XComModel.task_id == task_id,
            XComModel.map_index == map_index,
            XComModel.key.in_(keys),
        )
    ).all()
    return {r.key: XComModel.deserialize_value(r) for r in rows}


def _task_state(session: Session, ti: TiKey) -> str | None:
    dag_id, run_id, task_id, map_index = ti
    return state_text(
        session.scalar(
            select(TaskInstance.state).where(
                TaskInstance.dag_id == dag_id,
                TaskInstance.run_id == run_id,
                TaskInstance.task_id == task_id,
                TaskInstance.map_index == map_index,
            )
        )
    )


def _release_at(session: Session, ti: TiKey) -> float | None:
    """When the deferred task's trigger may first fire (its ``release_at``: ``[aip] deferral_hold``
    after the deferral), or None: not deferred, no hold, or not one of our triggers. Only that one
    argument is read out of the trigger's (encrypted) arguments; nothing else leaves the server."""
    from airflow.models.trigger import Trigger

    dag_id, run_id, task_id, map_index = ti
    found = session.scalar(
        select(Trigger)
        .join(TaskInstance, TaskInstance.trigger_id == Trigger.id)
        .where(
            TaskInstance.dag_id == dag_id,
            TaskInstance.run_id == run_id,
            TaskInstance.task_id == task_id,
            TaskInstance.map_index == map_index,
        )
    )
    if found is None:
        return None
    try:
        release = found.kwargs.get("release_at")
    except Exception:  # another key, a trigger of another package: no hold to say
        return None
    return float(release) if isinstance(release, (int, float)) else None


def _run_active(session: Session, ti: TiKey) -> bool:
    """Whether the task instance's run is queued or running (its tasks may still be scheduled)."""
    dag_id, run_id = ti[0], ti[1]
    found = session.scalar(select(DagRun.state).where(DagRun.dag_id == dag_id, DagRun.run_id == run_id))
    return state_text(found) in ("queued", "running")


def _live_fields(
    ti: TiKey,
    state: str | None,
    job: dict[str, Any] | None,
    api: dict[str, Any] | None,
    reads: LiveReads,
    ladder: Any = None,
) -> dict[str, Any]:
    """What XCom holds of the job; else the job read live while the task waits, or read once more
    when the task ended without leaving a word of it (killed, or marked failed, while it waited).
    A live read carries the rungs the task announced (``ladder``): the tab says which one runs."""
    if job is not None or api is None:
        return {"job": job, "live": False, "read_now": False, "waiting": None, "read_error": None}
    waits = state in WAITING_TASK_STATES
    read = reads.read(api)
    summary = with_rungs(read.summary, ladder, time.time()) if read.summary else None
    runs = run_view([(ti[2], ti[3], summary)]) if summary else []
    return {
        "job": runs[0] if runs else None,
        "live": waits,
        "read_now": not waits,
        "waiting": read.waiting if waits else None,
        "read_error": read.error,
    }


def task_payload(
    session: Session,
    dag_id: str,
    run_id: str,
    task_id: str,
    map_index: int,
    *,
    may_edit: bool = False,
    reads: LiveReads | None = None,
) -> dict[str, Any]:
    """The task instance's job: its summary once the task ended; read live while it still waits.

    ``refresh_s`` tells the page to fetch again after that many seconds (None: it stopped);
    ``can_cancel`` whether to offer "Cancel job" (the viewer may edit, and the job runs).
    """
    reads = reads or live.LIVE_READS  # read at call time: one process-wide cache
    ti = (dag_id, run_id, task_id, map_index)
    stored = _ti_xcoms(
        session, ti, [JOB_ID_XCOM_KEY, JOB_API_XCOM_KEY, CANCELLED_BY_XCOM_KEY, LADDER_XCOM_KEY]
    )
    state = _task_state(session, ti)
    run_values = _return_values(session, dag_id, run_id)
    own = [row for row in run_values if row[:2] == (task_id, map_index)]
    # the job's metric, if it exported, or if it was the evaluation the gate read
    decisions = [row for row in run_values if is_export_result(row[2]) or is_registration(row[2])]
    runs = run_view([*own, *decisions])
    api = job_api_of(stored.get(JOB_API_XCOM_KEY))
    fields = _live_fields(ti, state, runs[0] if runs else None, api, reads, stored.get(LADDER_XCOM_KEY))
    job_state = fields["job"]["state"] if fields["job"] else None
    refresh = keeps_refreshing(state, job_state, run_active=state is None and _run_active(session, ti))
    job_id = stored.get(JOB_ID_XCOM_KEY)
    cancelled_by = stored.get(CANCELLED_BY_XCOM_KEY)
    champion = _champion_of_task(own[0][2] if own else None, fields["job"], run_values)
    ended = fields["job"] is not None and state == "success"
    decision = not refresh and awaits_decision(ended, champion, run_active=lambda: _run_active(session, ti))
    held = resumes(state, job_state, lambda: _release_at(session, ti)) if fields["live"] else None
    return {
        "task_state": state,
        "job_id": job_id if isinstance(job_id, str) else None,
        **fields,
        "refresh_s": reads.ttl if refresh or decision else None,
        "awaiting_decision": decision,
        "held": held,
        "can_cancel": may_edit and api is not None and refresh and fields["live"] and held is None,
        "cancelled_by": cancelled_by if isinstance(cancelled_by, dict) else None,
        "champion": champion,
        "image": built_image(own[0][2]) if own else None,  # build_image's: the image it built
    }


def _champion_of_task(
    own: Any, job: dict[str, Any] | None, run_values: list[XComRow]
) -> dict[str, Any] | None:
    """The run's champion comparison, on the tabs of the tasks it concerns: a training job's, the
    export's and the registration's (a data-preparation task's tab has nothing to compare)."""
    if job is None and not is_export_result(own) and not is_registration(own):
        return None
    return champion_comparison(value for _, _, value in run_values)


def may_edit_task_instances(session: Session, user: BaseUser, dag_id: str) -> bool:
    """The check ``EDIT_TI`` makes, answered instead of raised: whether to show "Cancel job"."""
    team = DagModel.get_team_name(dag_id, session=session)
    return get_auth_manager().is_authorized_dag(
        method="PUT",
        access_entity=DagAccessEntity.TASK_INSTANCE,
        details=DagDetails(id=dag_id, team_name=team),
        user=user,
    )


def cancel_job(
    session: Session, user_name: str, ti: TiKey, *, reads: LiveReads | None = None
) -> dict[str, Any]:
    """Cancel the task's job as ``CancelTrainingJobOperator`` does (the hook's ``cancel``).

    Who and when goes to XCom first, so the task finds it however soon the job ends; it is
    taken back when nothing was cancelled (the job had already ended, or the call failed).
    """
    reads = reads or live.LIVE_READS
    dag_id, run_id, task_id, map_index = ti
    api = job_api_of(_ti_xcoms(session, ti, [JOB_API_XCOM_KEY]).get(JOB_API_XCOM_KEY))
    if api is None:
        raise HTTPException(404, "This task instance has no training job to cancel")
    if _task_state(session, ti) not in WAITING_TASK_STATES:
        raise HTTPException(409, "The task has ended: its job is no longer its to cancel")
    record = {"user": user_name, "at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    XComModel.set(
        CANCELLED_BY_XCOM_KEY,
        record,
        dag_id=dag_id,
        run_id=run_id,
        task_id=task_id,
        map_index=map_index,
        **xcom_set_options(),  # as the task SDK stores it, so its xcom_pull reads it back (compat.py)
        session=session,
    )
    session.commit()
    failure: str | None = None
    try:
        requested = reads.hook(api).cancel(str(api["name"]))
    except Exception as err:  # shown to the user, who may try again
        requested, failure = False, f"could not cancel the job: {err}"
    reads.forget(api)
    if not requested:
        delete_xcom(  # by row, or by task try from 3.4 (compat.py)
            session,
            dag_id=dag_id,
            run_id=run_id,
            task_id=task_id,
            map_index=map_index,
            key=CANCELLED_BY_XCOM_KEY,
        )
        session.commit()
    if failure is not None:
        raise HTTPException(502, failure)
    return {"cancel_requested": requested, "cancelled_by": record if requested else None}


def same_site(x_requested_with: str | None = Header(None)) -> None:
    """403 unless the page's own script sent the request (see ``CSRF_HEADER``)."""
    if x_requested_with != CSRF_VALUE:
        raise HTTPException(403, f"Missing the {CSRF_HEADER} header this page sends")


def create_app() -> FastAPI:
    """The sub-app; no /docs or /openapi.json, which would be served to anyone."""
    app = FastAPI(title="airflow_aip UI", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/ui/{page}", response_class=HTMLResponse, dependencies=[LOGGED_IN, READ_XCOM])
    def page(page: str) -> str:
        if page not in PAGES:
            raise HTTPException(404, "No such page")
        return page_html(page)

    @app.get("/static/{name}", dependencies=[LOGGED_IN])
    def static(name: str) -> Response:
        suffix = name[name.rfind(".") :] if "." in name else ""
        if suffix not in STATIC_TYPES or "/" in name or name.startswith("."):
            raise HTTPException(404, "No such file")
        try:
            return Response(_static(name), media_type=STATIC_TYPES[suffix])
        except FileNotFoundError:
            raise HTTPException(404, "No such file") from None

    @app.get("/api/task", dependencies=[READ_XCOM, READ_TI])
    def task(
        user: GetUserDep,
        session: SessionDep,
        dag_id: str,
        run_id: str,
        task_id: str,
        map_index: str | None = None,
    ) -> dict[str, Any]:
        may_edit = may_edit_task_instances(session, user, dag_id)
        return task_payload(session, dag_id, run_id, task_id, map_index_param(map_index), may_edit=may_edit)

    @app.post("/api/task/cancel", dependencies=[LOGGED_IN, Depends(same_site), EDIT_TI])
    def cancel(
        user: GetUserDep,
        session: SessionDep,
        dag_id: str,
        run_id: str,
        task_id: str,
        map_index: str | None = None,
    ) -> dict[str, Any]:
        return cancel_job(session, user.get_name(), (dag_id, run_id, task_id, map_index_param(map_index)))

    @app.get("/api/run", dependencies=[READ_XCOM])
    def run(session: SessionDep, dag_id: str, run_id: str) -> dict[str, Any]:
        values = _return_values(session, dag_id, run_id)
        champion = champion_comparison(v for _, _, v in values)
        return {"jobs": run_view(values), "champion": champion, "cost": run_total(_summaries(values))}

    @app.get("/api/jobs", dependencies=[READ_XCOM])
    def jobs(
        user: GetUserDep,
        session: SessionDep,
        dag_id: str | None = None,
        state: str | None = None,
        limit: int = Query(100, ge=1, le=500),
    ) -> dict[str, Any]:
        """Only Dags this user may read, as core's list endpoints filter them."""
        readable = get_auth_manager().get_authorized_dag_ids(user=user, method="GET", session=session)
        return jobs_payload(session, set(readable), dag_id, state, limit, reads=live.LIVE_READS)

    return app

"""airflow_aip's pages in Airflow's own UI (Airflow 3.3+), registered by the ``airflow.plugins`` entry point.

- "Training job" tab on every task instance: the job's state and timeline, its links, the trials
  table and charts (or a sentence saying the task ran no training job).
- "Training jobs" tab on every Dag run: each job of the run, its best trial, exported or promoted.
- Browse → "Training jobs": recent jobs across the Dags the user may read.

The tabs are iframes (``external_views``) on pages served by the plugin's own FastAPI app, so
there is no npm build and nothing from a CDN. Import-cheap on purpose: Airflow imports this
module in every process that loads plugins (each task, the scheduler, the dag-processor); only
the API server reads ``fastapi_apps``, and only then are FastAPI and the app imported and built.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from airflow.plugins_manager import AirflowPlugin

# Mount point in the API server. Must not start with /api/v2, /ui, /execution, /auth or
# /pluginsv2 (Airflow rejects those), nor shadow /static, /docs or /health (mounts win).
URL_PREFIX = "/aip"
# No leading slash: resolved against the UI's <base href> ([api] base_url), so sub-paths work.
_PAGES = URL_PREFIX.lstrip("/") + "/ui"
# The UI fills in {DAG_ID}, {RUN_ID}, {TASK_ID} (URI-encoded) and {MAP_INDEX}; the last stays
# literal on an unmapped task instance, which the app reads as -1.
TASK_TAB_HREF = _PAGES + "/task?dag_id={DAG_ID}&run_id={RUN_ID}&task_id={TASK_ID}&map_index={MAP_INDEX}"
RUN_TAB_HREF = _PAGES + "/run?dag_id={DAG_ID}&run_id={RUN_ID}"
JOBS_PAGE_HREF = _PAGES + "/jobs"


class _BuiltOnFirstRead:
    """A class attribute computed on first read, whether read from the class or an instance."""

    def __init__(self, factory: Callable[[], list[dict[str, Any]]]) -> None:
        self._factory = factory
        self._value: list[dict[str, Any]] | None = None

    def __get__(self, obj: object, owner: type) -> list[dict[str, Any]]:
        if self._value is None:
            self._value = self._factory()
        return self._value


def _fastapi_apps() -> list[dict[str, Any]]:
    from airflow_aip.ui.app import create_app  # FastAPI, SQLAlchemy models: the API server only

    return [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "airflow_aip"}]


class AipUiPlugin(AirflowPlugin):
    """Training jobs and their trials in Airflow's UI, read from XCom."""

    name = "airflow_aip"
    fastapi_apps = _BuiltOnFirstRead(_fastapi_apps)
    external_views = [
        {
            "name": "Training job",
            "href": TASK_TAB_HREF,
            "destination": "task_instance",
            "url_route": "aip-training-job",  # a tab needs a url_route, unique across plugins
        },
        {
            "name": "Training jobs",
            "href": RUN_TAB_HREF,
            "destination": "dag_run",
            "url_route": "aip-run-training-jobs",
        },
        {
            "name": "Training jobs",
            "href": JOBS_PAGE_HREF,
            "destination": "nav",
            "category": "browse",
            "url_route": "aip-training-jobs",
        },
    ]

"""The "Training job" button: the job's page, read from XCom.

On Google Cloud it is the job's Cloud Console page (Vertex AI's training page, or AI
Platform's); on the local training service it is the service's own page of the job
(``/console/<resource name>``), never Google's console for a project that does not exist.

The operator and the sensor push the URL under :data:`CONSOLE_URL_XCOM_KEY` (the link's
``xcom_key``) before they start waiting, so the button works while the task is still running
or deferred: Airflow 3's UI reads that XCom directly, and ``get_link`` reads it too. Rendering
the button never calls the API.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperatorLink

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator
    from airflow.sdk.types import TaskInstanceKey

CONSOLE_URL_XCOM_KEY = "training_job_console_url"
JOB_ID_XCOM_KEY = "training_job_id"
# How the UI's live tab reads and cancels the job without the operator object (the API server has
# none): ``{"name": resource name, "project_id": ..., **JobApi.arguments}``, pushed with the job id.
JOB_API_XCOM_KEY = "aip_job_api"
# Who cancelled the job from the Training job tab, and when: ``{"user": ..., "at": ISO time}``,
# written by the UI's API before it cancels, read by the task when the job ends CANCELLED.
CANCELLED_BY_XCOM_KEY = "aip_cancelled_by"


def log_cancelled_by(event: Any, log: Any) -> None:
    """Say in the task log who cancelled the job from the UI: the job's own error says only CANCELLED.

    Called where a wait's event is turned into the task's outcome; a no-op for other endings,
    outside a running task, or when nobody cancelled from the tab.
    """
    if not isinstance(event, dict) or event.get("status") != "cancelled":
        return
    from airflow.sdk import get_current_context

    try:
        who = get_current_context()["ti"].xcom_pull(key=CANCELLED_BY_XCOM_KEY)
    except Exception:  # no task context (a unit test calling the waiter), or XCom unreachable
        return
    if isinstance(who, dict) and who.get("user"):
        log.warning(
            "Job %s was cancelled from the Training job tab by %s at %s",
            event.get("job_id"),
            who["user"],
            who.get("at"),
        )


class TrainingJobConsoleLink(BaseOperatorLink):
    """Link to the training job's page (Google Cloud console, or the local service's)."""

    name = "Training job"

    @property
    def xcom_key(self) -> str:
        return CONSOLE_URL_XCOM_KEY

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        from airflow.sdk.execution_time.xcom import XCom  # the configured XCom backend

        url: Any = XCom.get_one(
            key=CONSOLE_URL_XCOM_KEY,
            dag_id=ti_key.dag_id,
            task_id=ti_key.task_id,
            run_id=ti_key.run_id,
            map_index=ti_key.map_index,
        )
        return url if isinstance(url, str) else ""

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
# A capacity ladder's rungs as the submit knows them when it announces a rung's job (each rung's
# status: out of capacity, running, if needed): the UI shows the rung a running job is on.
LADDER_XCOM_KEY = "aip_ladder"


# How a wait ended when it did not succeed: ``{"job_id", "name", "status", "state", "message",
# "summary"}`` (``summary``: the job as last read, or None), pushed before the task fails, so the
# UI still shows the job, its finished trials and why it ended once the task has failed (a wait
# that succeeded returns its summary instead).
ENDED_JOB_XCOM_KEY = "aip_job_ended"


def record_ending(event: Any, log: Any) -> None:
    """Keep what a wait that did not succeed leaves for the UI, and say who cancelled it, if anyone.

    Called where a wait's event is turned into the task's outcome, before a failure is raised.
    The job's own error says only CANCELLED: who cancelled it from the Training job tab (and
    when) goes to the task log. A no-op for a success, or outside a running task.
    """
    if not isinstance(event, dict) or event.get("status") == "success":
        return
    from airflow.sdk import get_current_context

    try:
        ti = get_current_context()["ti"]
    except Exception:  # no task context: a unit test calling the waiter
        return
    summary = event.get("summary")
    ending = {
        "job_id": event.get("job_id"),
        "name": event.get("job_name"),
        "status": event.get("status"),
        "state": event.get("state"),
        "message": event.get("message"),
        "summary": summary if isinstance(summary, dict) else None,
    }
    try:
        ti.xcom_push(key=ENDED_JOB_XCOM_KEY, value=ending)
        who = ti.xcom_pull(key=CANCELLED_BY_XCOM_KEY) if event.get("status") == "cancelled" else None
    except Exception as err:  # XCom unreachable: the task still fails as the job did
        log.warning("Could not keep how job %s ended for the UI: %s", event.get("job_id"), err)
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

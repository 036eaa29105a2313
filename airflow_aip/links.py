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

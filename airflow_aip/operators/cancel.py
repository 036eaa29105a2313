"""Cancel a training job: on its own, or as the teardown that makes sure a job does not outlive its run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import Context

from airflow_aip.hooks.job_reference import API_FIELDS
from airflow_aip.operators.connected import JobOperator


class CancelTrainingJobOperator(JobOperator):
    """Cancel a training job; a job that already ended is a no-op success (the API answers 400).

    As a teardown (``.as_teardown(setups=submit)``) it runs once the tasks between it and the
    submit ended, however they ended: a job outlives its run only if it already ended. Its result
    says whether a cancel was needed (``cancel_requested``).

    :param job_id: our job ID or the job's resource name (as the sensor's).
    :param backend: "vertex" (default ``[aip] backend``) or "ai_platform".
    :param region: the job's location on Vertex AI (default ``[aip] region``).

    The connection's arguments: :class:`~airflow_aip.hooks.job_reference.JobConnection`.
    """

    template_fields: Sequence[str] = ("job_id", *API_FIELDS)
    ui_color = "#fce8e6"

    def __init__(self, *, job_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.job_id = job_id

    def execute(self, context: Context) -> dict[str, Any]:
        name = self.job_name_for(self.job_id)
        project = self.hook.project_id
        requested = self.hook.cancel(name)
        return {"job_id": self.job_id, "name": name, "project_id": project, "cancel_requested": requested}

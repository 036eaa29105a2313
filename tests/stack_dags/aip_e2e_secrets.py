"""A job whose arguments hold secrets (a Variable named like a token, a value flagged by the author).

The job prints its arguments, and the task relays the job's log into its own: Airflow must mask
them there, in the worker (poke-style wait) and in the triggerer (deferred wait) alike.
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG
from airflow.sdk.log import mask_secret
from stack_dag_parts import JOB_DIR, training_input

from airflow_aip.operators import ExportArtifactsOperator, SubmitTrainingJobOperator

FLAGGED = os.environ.get("AIP_E2E_FLAGGED_SECRET", "")
mask_secret(FLAGGED)  # the author flags a value as secret, then passes it to the job

with DAG("aip_e2e_secrets", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    # The deferred job runs 15 s: one that ends within seconds of the deferral meets Airflow's
    # executor-event race (apache/airflow#67287, unfixed in 3.3.2), which fails the task with no
    # log line of ours: the scheduler reads the deferring try's late SUCCESS as an outside change.
    for task_id, deferrable in (("submit_in_worker", False), ("submit_deferred", True)):
        submit = SubmitTrainingJobOperator(
            task_id=task_id,
            project_id="{{ dag_run.conf['project_id'] }}",
            gcp_conn_id="aip_secret_conn",
            training_input=training_input(
                "succeed",
                [
                    "--message",
                    "{{ var.value.aip_api_token }} " + FLAGGED,
                    "--hold",
                    "15" if deferrable else "0",
                ],
                f"{JOB_DIR}/{task_id}",
            ),
            deferrable=deferrable,
            defer_after=0,
            poll_interval=1,
            retries=0,
        )
        export = ExportArtifactsOperator(
            task_id=f"export_{task_id}",
            project_id="{{ dag_run.conf['project_id'] }}",
            gcp_conn_id="aip_secret_conn",
            job_id="{{ ti.xcom_pull(task_ids='" + task_id + "')['job_id'] }}",
            destination_uri="{{ dag_run.conf['job_dir'] }}/models",
            source_subdir="",  # the test trainer writes to --job-dir, not to AIP_MODEL_DIR
        )
        submit >> export

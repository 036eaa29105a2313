"""Calls Vertex AI by its regional name from inside a job, as a trainer's own code does on Vertex:
a gapic ``JobServiceClient`` (gRPC, ADC from the job's metadata server) reads its own job and
lists its project's, through whatever proxy and roots the environment gives. The report goes to
``<job-dir>/vertex.json``.
"""

from __future__ import annotations

import json
import os
from typing import Any

from aip_test_trainer.common import parser, write_to_job_dir


def _gapic(project: str, job_id: str) -> dict[str, Any]:
    from google.cloud.aiplatform_v1 import JobServiceClient

    client = JobServiceClient(client_options={"api_endpoint": "us-central1-aiplatform.googleapis.com"})
    parent = f"projects/{project}/locations/us-central1"
    job = client.get_custom_job(name=f"{parent}/customJobs/{job_id}")
    listed = [found.name for found in client.list_custom_jobs(parent=parent)]
    return {"name": job.name, "state": job.state.name, "listed": listed}


def main() -> None:
    known, _ = parser().parse_known_args()
    project, job_id = os.environ["CLOUD_ML_PROJECT_ID"], os.environ["CLOUD_ML_JOB_ID"]
    try:
        report = _gapic(project, job_id)
    except Exception as exc:  # the report says what went wrong; the test reads it
        report = {"error": repr(exc)}
    print(json.dumps(report))
    write_to_job_dir(known.job_dir, "vertex.json", report)


if __name__ == "__main__":
    main()

"""Calls Google's hosts by name, as TensorFlow's ``gs://``, curl or gsutil do, and reports.

With no emulator variable at all, through whatever proxy and CA bundle the environment gives:
- curl (libcurl, as TensorFlow's file system uses it) uploads to
  ``https://www.googleapis.com/upload/storage/v1`` with the metadata server's token, and reads
  the object back from ``https://storage.googleapis.com/<bucket>/<object>``;
- Python's urllib reads the same object;
- curl calls ``oauth2.googleapis.com``, which must fail;
- urllib reads the job itself from Vertex AI's regional host (REST), which the service answers;
- curl lists BigQuery datasets with the job's token: refused, unless the service passes that host.
The report goes to ``<job-dir>/egress.json`` through google-cloud-storage.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request
from typing import Any

from aip_test_trainer.common import parser, write_to_job_dir


def _curl(*args: str) -> dict[str, Any]:
    done = subprocess.run(["curl", "-sS", *args], capture_output=True, text=True, timeout=60)
    return {"code": done.returncode, "out": done.stdout, "err": done.stderr.strip()}


def _urllib(url: str) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(url, timeout=60) as answer:
            return {"status": answer.status, "body": answer.read().decode()}
    except urllib.error.URLError as exc:
        return {"error": str(exc.reason)}


def _token() -> str:
    import google.auth
    import google.auth.transport.requests

    credentials, _ = google.auth.default()
    credentials.refresh(google.auth.transport.requests.Request())
    return str(credentials.token)


def main() -> None:
    known, _ = parser().parse_known_args()
    bucket, _, prefix = known.job_dir[len("gs://") :].partition("/")
    name = f"{prefix.rstrip('/')}/by-name.txt"
    upload = f"https://www.googleapis.com/upload/storage/v1/b/{bucket}/o?uploadType=media&name={name}"
    public = f"https://storage.googleapis.com/{bucket}/{name}"
    report = {
        "upload": _curl(
            "-X", "POST", upload, "-H", f"Authorization: Bearer {_token()}", "--data-binary", "by name"
        ),
        "curl_read": _curl(public),
        "urllib_read": _urllib(public),
        "curl_oauth": _curl("https://oauth2.googleapis.com/token"),
        "urllib_vertex": _urllib(
            f"https://us-central1-aiplatform.googleapis.com/v1/projects/{os.environ['CLOUD_ML_PROJECT_ID']}"
            f"/locations/us-central1/customJobs/{os.environ['CLOUD_ML_JOB_ID']}"
        ),
        "curl_bigquery": _curl(
            f"https://bigquery.googleapis.com/bigquery/v2/projects/{os.environ['CLOUD_ML_PROJECT_ID']}/datasets",
            "-H",
            f"Authorization: Bearer {_token()}",
        ),
    }
    print(json.dumps(report))
    write_to_job_dir(known.job_dir, "egress.json", report)


if __name__ == "__main__":
    main()

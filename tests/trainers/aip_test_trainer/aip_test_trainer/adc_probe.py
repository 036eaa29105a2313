"""Reports the Application Default Credentials it finds, as a Vertex AI trainer would use them.

``google.auth.default()`` (the metadata server's project, service account and token), then
google-cloud-storage with those very credentials writes the report to ``--job-dir``; and when
Google's Vertex AI SDK is importable here, ``aiplatform.init()`` as a trainer calls it (no
arguments: project and location from the environment) and a ``Model.list()`` through it, with
the endpoint, transport and project the SDK settled on.
"""

from __future__ import annotations

import importlib.util
import json
import os
from typing import Any

from aip_test_trainer.common import parser


def _vertex_sdk() -> dict[str, Any]:
    from google.cloud import aiplatform
    from google.cloud.aiplatform import initializer

    aiplatform.init()
    config = initializer.global_config
    listed = aiplatform.Model.list()
    return {
        "api_endpoint": config.api_endpoint,
        "api_transport": config._api_transport,
        "project": config.project,
        "location": config.location,
        "models": len(listed),
    }


def main() -> None:
    import google.auth
    import google.auth.transport.requests
    from google.cloud import storage

    known, _ = parser().parse_known_args()
    credentials, project = google.auth.default()
    credentials.refresh(google.auth.transport.requests.Request())
    report: dict[str, Any] = {
        "credentials": type(credentials).__module__ + "." + type(credentials).__qualname__,
        "project": project,
        "service_account": getattr(credentials, "service_account_email", None),
        "token": credentials.token,
        "variables": {n: os.environ.get(n) for n in ("GCE_METADATA_HOST", "GOOGLE_APPLICATION_CREDENTIALS")},
    }
    if importlib.util.find_spec("google.cloud.aiplatform") is not None:
        report["vertex_sdk"] = _vertex_sdk()
    bucket, _, prefix = known.job_dir[len("gs://") :].partition("/")
    client = storage.Client(project=project, credentials=credentials)
    blob = client.bucket(bucket).blob(f"{prefix.rstrip('/')}/adc.json")

    blob.upload_from_string(json.dumps(report))
    print(f"wrote gs://{bucket}/{blob.name} as {report['service_account']}")


if __name__ == "__main__":
    main()

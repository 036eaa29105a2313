"""Reports the runtime it got (Python, packages, variables) and uses ``/gcs/`` as Vertex mounts it.

``--read /gcs/B/in.txt`` is copied into the report; the report goes to ``--write /gcs/B/out.json``
through the mount, not through a Cloud Storage client, so a test sees both directions work.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

from aip_test_trainer.common import environment_report, parser

# Packages of the service (Airflow, our provider, its web stack) that must not be importable in
# the job's environment, and the declared ones that must.
SERVICE_ONLY = ("airflow", "airflow_aip", "fastapi", "optuna")
DECLARED = ("google.cloud.storage", "hypertune")


def main() -> None:
    args = parser()
    args.add_argument("--read", default="")
    args.add_argument("--write", required=True)
    known, _ = args.parse_known_args()
    report = environment_report(
        python="{}.{}".format(*sys.version_info[:2]),
        visible={name: importlib.util.find_spec(name) is not None for name in (*SERVICE_ONLY, *DECLARED)},
        variables={name: os.environ.get(name) for name in ("GOOGLE_CLOUD_PROJECT", "AIP_JOB_NAME")},
        read=Path(known.read).read_text() if known.read else None,
    )
    out = Path(known.write)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

"""Succeeds: logs a line on each stream and writes what it saw to ``<job-dir>/report.json``.

Replicas other than the master write ``report-<type>-<index>.json`` instead, and the master
waits for the workers' reports before it ends, as a chief waits for its workers (the service
stops the other replicas once the master exits).
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings

from aip_test_trainer.common import environment_report, parser, write_to_job_dir


def _wait_for_workers(job_dir: str, count: int, timeout: float = 60.0) -> None:
    from google.cloud import storage

    bucket, _, prefix = job_dir[len("gs://") :].partition("/")
    names = [f"{prefix.rstrip('/')}/report-worker-{i}.json".lstrip("/") for i in range(count)]
    deadline = time.monotonic() + timeout
    client = storage.Client()
    while not all(client.bucket(bucket).blob(n).exists() for n in names):
        if time.monotonic() > deadline:
            sys.exit("workers never reported")
        time.sleep(0.1)


def main() -> None:
    args = parser()
    args.add_argument("--message", default="hello")
    args.add_argument("--hold", type=float, default=0.0, help="seconds to run before ending")
    known, _ = args.parse_known_args()
    print(f"training with message={known.message}")
    print(f"runtime prefix {sys.prefix}")
    print("a warning on stderr", file=sys.stderr)
    # As google-api-core warns on an old Python: two stderr lines, ERROR to Google, a warning in the task log.
    warnings.warn("a harmless future warning", FutureWarning, stacklevel=1)
    tf_config = json.loads(os.environ.get("TF_CONFIG", "{}"))
    task = tf_config.get("task", {})
    is_master = task.get("type", "master") in ("master", "chief")  # Vertex: chief
    name = "report.json" if is_master else f"report-{task['type']}-{task['index']}.json"
    uri = write_to_job_dir(known.job_dir, name, environment_report(message=known.message))
    print(f"wrote {uri}")
    if is_master:
        _wait_for_workers(known.job_dir, len(tf_config.get("cluster", {}).get("worker", [])))
    time.sleep(known.hold)


if __name__ == "__main__":
    main()

"""What every test trainer shares: argument parsing and writing a JSON report to the job dir."""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from typing import Any


def parser() -> argparse.ArgumentParser:
    args = argparse.ArgumentParser()
    args.add_argument("--job-dir", dest="job_dir", default="")
    return args


def environment_report(**extra: Any) -> dict[str, Any]:
    """What the service gave this process: the variables the real service sets, and where it ran."""
    names = [
        "TF_CONFIG",
        "CLUSTER_SPEC",
        "CLOUD_ML_JOB_ID",
        "CLOUD_ML_PROJECT_ID",
        "CLOUD_ML_TRIAL_ID",
        "CLOUD_ML_HP_METRIC_FILE",
        "STORAGE_EMULATOR_HOST",
        "AIP_MODEL_DIR",
        "AIP_CHECKPOINT_DIR",
        "AIP_TENSORBOARD_LOG_DIR",
        "AIP_TEST_ENV",  # what a test sets through a worker pool's env
        "MASTER_ADDR",  # PyTorch's rendezvous (init_process_group(init_method="env://"))
        "MASTER_PORT",
        "WORLD_SIZE",
        "RANK",
    ]
    report: dict[str, Any] = {name: os.environ.get(name) for name in names}
    report.update(cwd=os.getcwd(), prefix=sys.prefix, pid=os.getpid(), argv=sys.argv[1:], **extra)
    report.update(executable=sys.executable, python_version=platform.python_version())
    report["environ"] = dict(os.environ)  # everything it was given: nothing of the host's must be here
    return report


def write_to_job_dir(job_dir: str, name: str, value: Any) -> str:
    """Upload ``value`` as JSON to ``<job_dir>/<name>`` with google-cloud-storage (the emulator)."""
    from google.cloud import storage

    bucket, _, prefix = job_dir[len("gs://") :].partition("/")
    path = f"{prefix.rstrip('/')}/{name}" if prefix else name
    storage.Client().bucket(bucket).blob(path).upload_from_string(json.dumps(value))
    return f"gs://{bucket}/{path}"

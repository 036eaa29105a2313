"""What the example DAGs share: the trainer, its data, its hyperparameter spec and their Params.

Kept out of DAG parsing by ``.airflowignore``; imported by the DAG files (cheaply: no client
library at module level), so each rule of the examples is written once.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from airflow.sdk import Param, get_current_context

TRAINER_PACKAGE = str(Path(__file__).resolve().parent.parent / "trainers" / "iris" / "trainer")
TRAINER_MODULE = "trainer.task"
METRIC_TAG = "accuracy"
# Assets need a URI at parse time, so the retraining examples take their bucket from the
# environment (the pipeline DAG's bucket is a Param instead).
EXAMPLE_BUCKET = os.environ.get("AIP_EXAMPLE_BUCKET", "aip-demo")
BUCKET_PATTERN = r"^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$"

TUNING_PARAMS: list[dict[str, Any]] = [
    {
        "parameterName": "C",
        "type": "DOUBLE",
        "minValue": 0.0001,
        "maxValue": 100.0,
        "scaleType": "UNIT_LOG_SCALE",
    },
    {
        "parameterName": "max_iter",
        "type": "INTEGER",
        "minValue": 2,
        "maxValue": 200,
        "scaleType": "UNIT_LINEAR_SCALE",
    },
]


def job_params() -> dict[str, Param]:
    """What a user sets when triggering from the UI: where the job runs and on what."""
    return {
        "project_id": Param("local-project", type="string", minLength=6, description="Google Cloud project"),
        "region": Param(
            "us-central1",
            type="string",
            enum=["us-central1", "us-east1", "us-west1", "europe-west1", "europe-west4", "asia-east1"],
        ),
        "scale_tier": Param(
            "BASIC", type="string", enum=["BASIC", "STANDARD_1", "PREMIUM_1", "BASIC_GPU", "BASIC_TPU"]
        ),
        "runtime_version": Param("2.11", type="string", description="AI Platform runtime version"),
        "python_version": Param("3.7", type="string", enum=["3.7"]),
    }


def queue(step: str) -> dict[str, str]:
    """``queue=`` for an example step on Celery: ``AIP_EXAMPLE_QUEUE_<STEP>``, else Airflow's default.

    Lets a deployment (and the Celery test tier) send build and stage to different workers: they
    share no disk, and the handoff between them must not need one. Other executors ignore queues.
    """
    name = os.environ.get(f"AIP_EXAMPLE_QUEUE_{step.upper()}", "").strip()
    return {"queue": name} if name else {}


def run_stamp() -> str:
    """A folder name for this DAG run's data and outputs (run_after: set even with no logical date)."""
    return str(get_current_context()["dag_run"].run_after.strftime("%Y%m%dT%H%M%S"))


def write_split(bucket: str, folder: str, seed: int, eval_fraction: float) -> dict[str, str]:
    """Split the trainer's dataset and write train/eval CSVs under ``gs://bucket/folder``."""
    from trainers.iris.trainer import util

    from airflow_aip.hooks import StorageHook

    train, evaluation = util.load_split(seed=seed, eval_fraction=eval_fraction)
    hook = StorageHook()
    out = {}
    for name, rows in (("train", train), ("eval", evaluation)):
        uri = f"gs://{bucket}/{folder}/{name}.csv"
        hook.write_bytes(uri, util.rows_to_csv(rows), content_type="text/csv")
        out[name] = uri
    return out


# The retraining examples: a data DAG produces this Asset; the retraining DAG runs on it.
IRIS_DATA_URI = f"gs://{EXAMPLE_BUCKET}/data/iris"
RETRAINED_MODELS_URI = f"gs://{EXAMPLE_BUCKET}/models/iris-retrained"
CHAMPION_MANIFEST_URI = f"{RETRAINED_MODELS_URI}/champion.json"

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


# The example's capacity ladder on Vertex AI: Spot VMs first, standard VMs when there are none.
CAPACITY_LADDER = ["SPOT", "STANDARD"]

# What the form's local_stockout offers: no stockout, or a rung's strategy out of stock.
LOCAL_STOCKOUTS = ["none", "SPOT", "STANDARD"]

REGIONS = ["us-central1", "us-east1", "us-west1", "europe-west1", "europe-west4", "asia-east1"]


def job_params() -> dict[str, Param]:
    """What a user sets when triggering from the UI: where the job runs and on what.

    Scale tier, runtime and Python version keep AI Platform's vocabulary (what a ``config.yaml``
    says); on Vertex AI they are translated to a machine type and a pre-built training
    container, so only values both backends understand are offered.
    """
    return {
        "project_id": Param(
            "local-project",
            type="string",
            minLength=6,
            title="Google Cloud project",
            description="The project ID the job runs and is billed in. On the local service any "
            "name works (local-project).",
        ),
        "backend": Param(
            "vertex",
            type="string",
            enum=["vertex", "ai_platform"],
            title="Training service",
            description="vertex: Vertex AI custom training; ai_platform: the ml v1 API (the local service "
            "only: Google shut AI Platform Training down on 2025-01-31).",
        ),
        "region": Param(
            "us-central1",
            type="string",
            enum=REGIONS,
            title="Region",
            description="Where the job runs on Vertex AI: the location Vertex AI runs and keeps it in "
            "(projects/<project>/locations/<region>/...). Each region listed serves Vertex AI custom "
            "training, and served AI Platform Training (backend ai_platform).",
        ),
        "scale_tier": Param(
            "BASIC",
            type="string",
            enum=["BASIC", "STANDARD_1", "PREMIUM_1", "BASIC_GPU"],
            title="Scale tier",
            description="The machines, in AI Platform's words: BASIC is one worker (on Vertex AI one "
            "n1-standard-4); STANDARD_1 and PREMIUM_1 add workers and parameter servers; BASIC_GPU "
            "is one worker with a GPU. The local service runs every replica on this machine.",
        ),
        "runtime_version": Param(
            "2.11",
            type="string",
            enum=["2.11"],
            title="Runtime version",
            description="On Vertex AI: which pre-built training container runs the trainer. With this "
            "Dag's framework (scikit-learn), 2.11 is sklearn-cpu.1-6, from the container registry "
            "nearest the region. The name is AI Platform's (a config.yaml's runtimeVersion). The "
            "local service installs that container's framework version in an environment of its own.",
        ),
        "python_version": Param(
            "3.7",
            type="string",
            enum=["3.7"],
            title="Python version",
            description="On Vertex AI, with the runtime version, it names the pre-built training "
            "container (sklearn-cpu.1-6), which runs the trainer on the Python it ships. 3.7 was "
            "AI Platform's only Python for runtime 2.11. The local service runs the container's "
            "Python too, when this machine has it.",
        ),
    }


def bucket_param() -> Param:
    """The bucket a pipeline example reads its data from and writes its jobs' output and model to."""
    return Param(
        EXAMPLE_BUCKET,
        type="string",
        pattern=BUCKET_PATTERN,
        title="Bucket",
        description="The Cloud Storage bucket for the data, the staged trainer, the jobs' output "
        "and the exported model. It must exist (make ui and make demo create aip-demo). A bucket "
        "name has 3-63 characters: lowercase letters, digits, '-', '_' and '.'; it starts and ends "
        "with a letter or digit.",
    )


def trial_params(max_trials: int) -> dict[str, Param]:
    """How many trials a tuning example tries in all, and how many at once."""
    return {
        "max_trials": Param(
            max_trials,
            type="integer",
            minimum=1,
            maximum=100,
            title="Trials",
            description="How many trials (hyperparameter sets) the tuning job tries in all.",
        ),
        "max_parallel_trials": Param(
            2,
            type="integer",
            minimum=1,
            maximum=20,
            title="Trials at once",
            description="How many trials run at the same time. Fewer at once lets the search learn "
            "from more finished trials.",
        ),
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


def write_split(
    bucket: str, folder: str, seed: int, eval_fraction: float, bucket_source: str = "bucket"
) -> dict[str, str]:
    """Split the trainer's dataset and write train/eval CSVs under ``gs://bucket/folder``.

    ``bucket_source`` names where the bucket came from (a Param, a variable) in the error a
    missing bucket raises.
    """
    from trainers.iris.trainer import util

    from airflow_aip.hooks import StorageHook

    require_bucket(bucket, bucket_source)
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
# The registry's champion: versions of one model; the ledger records every promotion and rollback.
REGISTRY_MODEL_ID = "iris-retrained"
CHAMPION_ALIAS = "champion"
# One ledger per model: a project and region hold their own iris-retrained.
CHAMPION_LEDGER_URI = (
    f"{RETRAINED_MODELS_URI}/ledgers/"
    + "{{ params.project_id }}-{{ params.region }}-"
    + f"{REGISTRY_MODEL_ID}.json"
)


def eval_fraction_param() -> Param:
    return Param(
        0.3,
        type="number",
        exclusiveMinimum=0,
        exclusiveMaximum=1,
        title="Evaluation share",
        description="The share of the 150 iris rows held out to score each model (0.3: 45 rows), "
        "the rest trains it. The split is stratified: each species in the same proportion.",
    )


def require_bucket(bucket: str, param: str = "bucket") -> None:
    """Fail in one line, naming the bucket and where it came from, before anything is written.

    Without it a missing bucket surfaced as a 40-frame ``FileNotFoundError ... not found`` from
    the first upload, after other tasks had already run.
    """
    from google.api_core.exceptions import Forbidden

    from airflow_aip.compat import AirflowFailException
    from airflow_aip.hooks import StorageHook

    try:
        found = StorageHook().client.lookup_bucket(bucket)
    except Forbidden:  # may write objects but not read the bucket's metadata: let the writes tell
        return
    if found is None:
        raise AirflowFailException(
            f"{param}: bucket {bucket} does not exist. Create it (gsutil mb gs://{bucket}; "
            "`make ui` and `make demo` create aip-demo) or pick another bucket."
        )


def local_stockout_param() -> Param:
    """The form's way to watch a capacity ladder climb: a rung's VMs out of stock, on the local service."""
    return Param(
        "none",
        type="string",
        enum=LOCAL_STOCKOUTS,
        title="Local stockout",
        description="The local training service only (make ui, make demo): its region has no VMs of "
        "this strategy for this run, as when Vertex AI runs out of Spot VMs, so the capacity ladder "
        "climbs to the next rung. none: every rung has capacity. Refused on Google Cloud.",
    )


def set_local_stockout(stockout: str, project_id: str, region: str, backend: str) -> list[str]:
    """Tell the local service which strategy's VMs it lacks for this run (none: restock); its stockouts."""
    from airflow_aip.hooks.local_capacity import set_local_stockouts

    strategies = [] if stockout == "none" else [stockout]
    if backend != "vertex" and strategies:
        from airflow_aip.exceptions import ValidationError

        raise ValidationError("local_stockout", "needs backend vertex: the ml v1 API has no Spot VMs")
    if backend != "vertex":
        return []
    return set_local_stockouts(strategies, project_id=project_id, region=region)

"""Retrain when new data lands; promote the model only if it beats the current champion.

Runs on the ``iris_training_data`` Asset (see ``aip_prepare_data``). It trains one job with
fixed hyperparameters: the champion's, when there is one and ``reuse_champion_hyperparameters``
is on, else the Params. The export compares the new model's eval accuracy with the champion
manifest and replaces it only when the new one is better (ties keep the champion).
"""

from __future__ import annotations

import json
from typing import Any

import pendulum
from aip_examples import (
    CHAMPION_MANIFEST_URI,
    IRIS_DATA_URI,
    METRIC_TAG,
    RETRAINED_MODELS_URI,
    TRAINER_MODULE,
    TRAINER_PACKAGE,
    job_params,
)
from airflow.sdk import DAG, Asset, Param, get_current_context, task

from airflow_aip.operators import (
    BuildTrainerPackageOperator,
    ExportArtifactsOperator,
    StagePackagesOperator,
    SubmitTrainingJobOperator,
)

IRIS_DATA = Asset(name="iris_training_data", uri=IRIS_DATA_URI)
BUCKET = IRIS_DATA_URI.split("/")[2]

with DAG(
    dag_id="aip_retraining",
    description="Retrain the iris model on new data and promote it only when it is better",
    schedule=[IRIS_DATA],
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["airflow_aip", "example"],
    params={
        **job_params(),
        "C": Param(1.0, type="number", exclusiveMinimum=0, description="inverse regularisation"),
        "max_iter": Param(100, type="integer", minimum=1, maximum=10_000),
        "reuse_champion_hyperparameters": Param(True, type="boolean"),
        "train_data": Param(None, type=["null", "string"], description="override the Asset's train CSV"),
        "eval_data": Param(None, type=["null", "string"], description="override the Asset's eval CSV"),
    },
) as dag:

    @task(multiple_outputs=True)
    def new_data() -> dict[str, str]:
        """The CSVs of the Asset event that triggered this run (or the Params, when given)."""
        context = get_current_context()
        params = context["params"]
        if params.get("train_data") and params.get("eval_data"):
            return {"train": params["train_data"], "eval": params["eval_data"]}
        events = context["triggering_asset_events"].get(IRIS_DATA) or []
        if not events:
            raise ValueError("train_data/eval_data: no iris_training_data event; pass both as Params")
        extra = events[-1].extra
        return {"train": extra["train"], "eval": extra["eval"]}

    @task(multiple_outputs=True)
    def hyperparameters() -> dict[str, str]:
        """The champion's hyperparameters when asked and available; otherwise the Params."""
        params = get_current_context()["params"]
        chosen = {"C": params["C"], "max_iter": params["max_iter"]}
        if params["reuse_champion_hyperparameters"]:
            from airflow_aip.hooks import StorageHook

            hook = StorageHook()
            if hook.exists(CHAMPION_MANIFEST_URI):
                champion = json.loads(hook.read_bytes(CHAMPION_MANIFEST_URI))
                found = champion.get("hyperparameters") or {}
                chosen = {k: found.get(k, v) for k, v in chosen.items()}
        # The API takes args as strings.
        return {"C": str(float(chosen["C"])), "max_iter": str(int(float(chosen["max_iter"])))}

    # Task outputs are XComArgs that the operators' templated fields resolve when the task runs.
    # They stand in for those values here, so they are typed Any (as Airflow's own mypy plugin types
    # task outputs): data["train"] is a CSV's URI, hp["C"] a string, staged_uris the staged URIs.
    data: Any = new_data()
    hp: Any = hyperparameters()
    build = BuildTrainerPackageOperator(task_id="build_trainer", package_path=TRAINER_PACKAGE)
    stage = StagePackagesOperator(
        task_id="stage_trainer", packages=[build.output], staging_uri=f"gs://{BUCKET}/staging"
    )
    staged_uris: Any = stage.output
    train = SubmitTrainingJobOperator(
        task_id="train",
        project_id="{{ params.project_id }}",
        backend="{{ params.backend }}",
        region="{{ params.region }}",
        job_id_prefix="iris_retrain",
        package_uris=staged_uris,
        python_module=TRAINER_MODULE,
        job_dir=f"gs://{BUCKET}/jobs/retrain/" + "{{ dag_run.run_after.strftime('%Y%m%dT%H%M%S') }}",
        args=[
            "--train-data",
            data["train"],
            "--eval-data",
            data["eval"],
            "--C",
            hp["C"],
            "--max-iter",
            hp["max_iter"],
            "--metric-tag",
            METRIC_TAG,
        ],
        scale_tier="{{ params.scale_tier }}",
        runtime_version="{{ params.runtime_version }}",
        python_version="{{ params.python_version }}",
        framework="scikit-learn",  # on Vertex AI: the container the iris trainer needs
        deferrable=True,
    )
    promote = ExportArtifactsOperator(
        task_id="promote_if_better",
        project_id="{{ params.project_id }}",
        backend="{{ params.backend }}",
        job_id="{{ ti.xcom_pull(task_ids='train')['name'] }}",  # the resource name: it carries the region
        destination_uri=RETRAINED_MODELS_URI,
        metrics_file="metrics.json",
        metric_key=METRIC_TAG,
        champion_manifest_uri=CHAMPION_MANIFEST_URI,
    )
    train >> promote

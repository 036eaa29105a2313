"""Prepare data, build and stage the trainer, tune its hyperparameters, export the best model.

Trigger it from the UI ("Trigger DAG w/ config") to change the trials, the parallelism, the
scale tier, the region or the bucket. ``make demo`` runs it end to end on the local training
service; pointed at Google (no endpoint override), the same DAG runs on AI Platform Training.
"""

from __future__ import annotations

from typing import Any

import pendulum
from aip_examples import (
    BUCKET_PATTERN,
    EXAMPLE_BUCKET,
    METRIC_TAG,
    TRAINER_MODULE,
    TRAINER_PACKAGE,
    TUNING_PARAMS,
    job_params,
    queue,
    run_stamp,
    write_split,
)
from airflow.sdk import DAG, Param, task

from airflow_aip.operators import (
    BuildTrainerPackageOperator,
    ExportArtifactsOperator,
    StagePackagesOperator,
    SubmitTrainingJobOperator,
)

with DAG(
    dag_id="aip_training_pipeline",
    description="Tune the iris trainer on AI Platform Training and export the best model",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["airflow_aip", "example"],
    params={
        **job_params(),
        "bucket": Param(EXAMPLE_BUCKET, type="string", pattern=BUCKET_PATTERN, description="GCS bucket"),
        "max_trials": Param(6, type="integer", minimum=1, maximum=100, description="trials in all"),
        "max_parallel_trials": Param(2, type="integer", minimum=1, maximum=20, description="trials at once"),
        "algorithm": Param(
            "ALGORITHM_UNSPECIFIED",
            type="string",
            enum=["ALGORITHM_UNSPECIFIED", "GRID_SEARCH", "RANDOM_SEARCH"],
            description="ALGORITHM_UNSPECIFIED is Google's model-based (Bayesian) search",
        ),
        "eval_fraction": Param(0.3, type="number", exclusiveMinimum=0, exclusiveMaximum=1),
    },
) as dag:

    @task(multiple_outputs=True)
    def prepare_data(bucket: str, eval_fraction: str) -> dict[str, str]:
        """Split the dataset into train/eval CSVs in the bucket, in a folder of this run's own."""
        return write_split(bucket, f"data/{run_stamp()}", seed=0, eval_fraction=float(eval_fraction))

    # Task outputs are XComArgs that the operators' templated fields resolve when the task runs.
    # They stand in for those values here, so they are typed Any (as Airflow's own mypy plugin types
    # task outputs): data["train"] is a CSV's URI, staged_uris the list of staged gs:// URIs.
    data: Any = prepare_data("{{ params.bucket }}", "{{ params.eval_fraction }}")

    # Build and stage may run on different workers (queues): stage rebuilds the same bytes from the
    # trainer's source there when the built file is not on its disk, and checks the sha256.
    build = BuildTrainerPackageOperator(
        task_id="build_trainer", package_path=TRAINER_PACKAGE, **queue("build")
    )

    stage = StagePackagesOperator(
        task_id="stage_trainer",
        packages=[build.output],
        staging_uri="gs://{{ params.bucket }}/staging",
        **queue("stage"),
    )
    staged_uris: Any = stage.output

    tune = SubmitTrainingJobOperator(
        task_id="tune",
        project_id="{{ params.project_id }}",
        region="{{ params.region }}",
        job_id_prefix="iris_tuning",
        package_uris=staged_uris,
        python_module=TRAINER_MODULE,
        job_dir="gs://{{ params.bucket }}/jobs/{{ dag_run.run_after.strftime('%Y%m%dT%H%M%S') }}",
        args=["--train-data", data["train"], "--eval-data", data["eval"], "--metric-tag", METRIC_TAG],
        scale_tier="{{ params.scale_tier }}",
        runtime_version="{{ params.runtime_version }}",
        python_version="{{ params.python_version }}",
        hyperparameters={
            "goal": "MAXIMIZE",
            "hyperparameterMetricTag": METRIC_TAG,
            "maxTrials": "{{ params.max_trials }}",
            "maxParallelTrials": "{{ params.max_parallel_trials }}",
            "algorithm": "{{ params.algorithm }}",
            "params": TUNING_PARAMS,
        },
        deferrable=True,
    )

    export = ExportArtifactsOperator(
        task_id="export_best_model",
        project_id="{{ params.project_id }}",
        job_id="{{ ti.xcom_pull(task_ids='tune')['job_id'] }}",
        destination_uri="gs://{{ params.bucket }}/models/iris",
    )

    data >> tune
    tune >> export

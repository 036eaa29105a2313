"""
# Tune the iris trainer in a custom container, then export the best model

AI Platform's custom-container workflow as one Dag: write a Dockerfile, build the image, push it,
submit a job that runs it (`masterConfig.imageUri`), tune it with hypertune inside the container.
Trigger it with **Trigger**; the form sets the image's registry, the bucket and the trials.

1. **prepare_data** writes a train/eval split of the iris data to the bucket (it must exist).
   Meanwhile **build_image** builds `dags/trainers/iris_container` (a Dockerfile and one Python
   file) with the worker's podman or docker. The image's tag is a hash of what the build reads,
   so a rerun with the same files finds the image in the registry and neither builds nor pushes.
2. **tune** runs the image as a hyperparameter-tuning job (`learning_rate` on a log scale,
   `epochs`), maximising `accuracy`, which the trainer reports with cloudml-hypertune from inside
   the container. The image's URI comes from build_image's XCom.
3. **export_best_model** copies the best trial's `model.json` to `models/iris-container/`.

On Google Cloud, the image repository is Artifact Registry's
(`REGION-docker.pkg.dev/PROJECT/REPOSITORY/iris-trainer`; the Airflow connection's identity logs
in). `make ui` starts a registry on this machine instead (Debian's docker-registry) and the local
training service runs the image with podman or docker.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pendulum
from aip_examples import METRIC_TAG, bucket_param, job_params, run_stamp, trial_params, write_split
from airflow.sdk import DAG, Param, task

from airflow_aip.operators import (
    BuildTrainerImageOperator,
    ExportArtifactsOperator,
    SubmitTrainingJobOperator,
)

CONTEXT = str(Path(__file__).resolve().parent / "trainers" / "iris_container")
# Where the image goes and what it starts FROM: Artifact Registry and a Python image on Google
# Cloud; make ui's registry and the base image `make prepare` builds from Debian's packages here.
IMAGE_REPOSITORY = os.environ.get("AIP_EXAMPLE_IMAGE_REPOSITORY", "localhost:5000/aip-examples/iris-trainer")
BASE_IMAGE = os.environ.get("AIP_EXAMPLE_BASE_IMAGE", "python:3.11-slim")
CONTAINER_TUNING_PARAMS: list[dict[str, Any]] = [
    {
        "parameterName": "learning_rate",
        "type": "DOUBLE",
        "minValue": 0.001,
        "maxValue": 2.0,
        "scaleType": "UNIT_LOG_SCALE",
    },
    {
        "parameterName": "epochs",
        "type": "INTEGER",
        "minValue": 1,
        "maxValue": 60,
        "scaleType": "UNIT_LINEAR_SCALE",
    },
]

with DAG(
    dag_id="aip_container_pipeline",
    description="Build the iris trainer's image, tune it in its container, export the best model",
    doc_md=__doc__,
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["airflow_aip", "example", "container"],
    params={
        **{name: job_params()[name] for name in ("project_id", "backend", "region")},
        "bucket": bucket_param(),
        "image_repository": Param(
            IMAGE_REPOSITORY,
            type="string",
            title="Image repository",
            description="Where the trainer's image is pushed, without a tag (the tag is a hash of its "
            "files): REGION-docker.pkg.dev/PROJECT/REPOSITORY/NAME on Google Cloud.",
        ),
        "base_image": Param(
            BASE_IMAGE,
            type="string",
            title="Base image",
            description="The image the Dockerfile starts FROM (any Python 3; cloudml-hypertune is "
            "installed when it lacks it).",
        ),
        **trial_params(max_trials=4),
    },
) as dag:

    @task(multiple_outputs=True)
    def prepare_data(bucket: str) -> dict[str, str]:
        """Check the bucket, then split the dataset into train/eval CSVs in a folder of this run's own."""
        return write_split(bucket, f"data/{run_stamp()}", seed=0, eval_fraction=0.2)

    data: Any = prepare_data("{{ params.bucket }}")

    image = BuildTrainerImageOperator(
        task_id="build_image",
        context_path=CONTEXT,
        repository="{{ params.image_repository }}",
        build_args={"BASE_IMAGE": "{{ params.base_image }}"},
    )
    image_uri: Any = image.output

    tune = SubmitTrainingJobOperator(
        task_id="tune",
        project_id="{{ params.project_id }}",
        backend="{{ params.backend }}",
        region="{{ params.region }}",
        job_id_prefix="iris_container_tuning",
        training_input={
            "scaleTier": "BASIC",
            "masterConfig": {"imageUri": image_uri},
            "jobDir": "gs://{{ params.bucket }}/jobs/{{ dag_run.run_after.strftime('%Y%m%dT%H%M%S') }}",
            "args": ["--train-data", data["train"], "--eval-data", data["eval"], "--metric-tag", METRIC_TAG],
            "hyperparameters": {
                "goal": "MAXIMIZE",
                "hyperparameterMetricTag": METRIC_TAG,
                "maxTrials": "{{ params.max_trials }}",
                "maxParallelTrials": "{{ params.max_parallel_trials }}",
                "params": CONTAINER_TUNING_PARAMS,
            },
        },
        deferrable=True,
        budget=10,  # USD for all its trials: the tuning job is cancelled past it (an estimate)
    )

    export = ExportArtifactsOperator(
        task_id="export_best_model",
        project_id="{{ params.project_id }}",
        backend="{{ params.backend }}",
        job_id="{{ ti.xcom_pull(task_ids='tune')['name'] }}",
        destination_uri="gs://{{ params.bucket }}/models/iris-container",
    )

    data >> tune
    tune >> export

"""
# Tune the iris trainer and export the best model

Stands alone (no schedule, no Asset): trigger it with **Trigger** and fill in the form to
change the bucket, the number of trials, how many run at once, the search algorithm, the
region or the machines.

1. **prepare_data** checks that the bucket exists (else it fails in one line, before anything
   is written) and writes a train/eval split of the iris data to it. Meanwhile
   **build_trainer** builds the trainer's sdist (`dags/trainers/iris`); then **stage_trainer**
   uploads it under `staging/`, named by its sha256.
2. **tune** submits a hyperparameter-tuning job (`C` on a log scale, `max_iter`), maximising
   `accuracy`, and waits for it deferred: the job's log lines stream into this task's log, and
   its **Training job** tab shows the trials. On Vertex AI it climbs a **capacity ladder**
   (the form's, SPOT then STANDARD by default): first on Spot VMs, and only if Vertex AI has
   none to give (a stockout, Spot VMs reclaimed, a quota refusal) the rest of the trials on
   standard VMs, as a second job (IDs ending `_spot`, `_standard`). A trainer's error never
   climbs. The tab shows the rung each job runs on, lists the rungs and which job ran each trial.
   To watch it climb on the local training service, set **Local stockout** to SPOT: the
   **local_capacity** task tells the service it has no Spot VMs for the run.
3. **export_best_model** copies the best trial's model, of any rung's job, to `models/iris/`
   with a `manifest.json`.

`make demo` runs it end to end on the local training service; with no endpoint override it
runs on Google Cloud. For data that arrives on its own and a model promoted only when it is
better, see `aip_prepare_data` and `aip_retraining`.
"""

from __future__ import annotations

from typing import Any

import pendulum
from aip_examples import (
    CAPACITY_LADDER,
    METRIC_TAG,
    TRAINER_MODULE,
    TRAINER_PACKAGE,
    TUNING_PARAMS,
    bucket_param,
    eval_fraction_param,
    job_params,
    local_stockout_param,
    queue,
    run_stamp,
    set_local_stockout,
    trial_params,
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
    description="Tune the iris trainer's hyperparameters on one bucket's data; export the best model",
    doc_md=__doc__,
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["airflow_aip", "example"],
    params={
        **job_params(),
        "bucket": bucket_param(),
        **trial_params(max_trials=6),
        "algorithm": Param(
            "ALGORITHM_UNSPECIFIED",
            type="string",
            enum=["ALGORITHM_UNSPECIFIED", "GRID_SEARCH", "RANDOM_SEARCH"],
            title="Search algorithm",
            description="ALGORITHM_UNSPECIFIED is Google's model-based (Bayesian) search; GRID_SEARCH "
            "tries a grid; RANDOM_SEARCH draws at random. The same three exist on Vertex AI.",
        ),
        "eval_fraction": eval_fraction_param(),
        "capacity_ladder": Param(
            CAPACITY_LADDER,
            type=["array", "null"],
            items={"type": "string", "enum": ["SPOT", "STANDARD"]},
            uniqueItems=True,
            title="Capacity ladder",
            description="Vertex AI only: where the tuning job gets its machines, one scheduling "
            "strategy per line, tried in order. SPOT (cheaper, can be reclaimed) first, then "
            "STANDARD: the next line is tried only when Vertex AI has no capacity for this one, "
            "never when the trainer fails. Empty: one job, on STANDARD. FLEX_START, reservations "
            "and other machines or regions per rung are set in code (placement=[...]).",
        ),
        "local_stockout": local_stockout_param(),
        "budget": Param(
            10,
            type=["number", "null"],
            minimum=0,
            title="Budget (USD)",
            description="At most this much for the tuning job, every rung of the capacity ladder "
            "included, in the price table's currency. An estimate from the jobs' machines and times "
            "(airflow_aip/jobs/prices/): past it, the job is cancelled and the task fails. Empty: no "
            "budget (the cost is still logged). The local service bills nothing, but the same guard runs.",
        ),
    },
) as dag:

    @task(multiple_outputs=True)
    def prepare_data(bucket: str, eval_fraction: str) -> dict[str, str]:
        """Check the bucket, then split the dataset into train/eval CSVs in a folder of this run's own."""
        return write_split(bucket, f"data/{run_stamp()}", seed=0, eval_fraction=float(eval_fraction))

    @task
    def local_capacity(stockout: str, project_id: str, region: str, backend: str) -> list[str]:
        """The local service's stockouts for this run (the form's local_stockout); refused on Google."""
        return set_local_stockout(stockout, project_id, region, backend)

    capacity: Any = local_capacity(
        "{{ params.local_stockout }}",
        "{{ params.project_id }}",
        "{{ params.region }}",
        "{{ params.backend }}",
    )

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
        backend="{{ params.backend }}",
        region="{{ params.region }}",
        job_id_prefix="iris_tuning",
        # AI Platform's trainingInput, as in gcloud's config.yaml; upstream outputs and templates
        # inside it are resolved when the task runs (and make those tasks upstream of this one).
        training_input={
            "packageUris": staged_uris,
            "pythonModule": TRAINER_MODULE,
            "jobDir": "gs://{{ params.bucket }}/jobs/{{ dag_run.run_after.strftime('%Y%m%dT%H%M%S') }}",
            "args": ["--train-data", data["train"], "--eval-data", data["eval"], "--metric-tag", METRIC_TAG],
            "scaleTier": "{{ params.scale_tier }}",
            "runtimeVersion": "{{ params.runtime_version }}",
            "pythonVersion": "{{ params.python_version }}",
            # Each trial ends after an hour at most (Vertex AI's default is 7 days): it bounds the
            # worst case the budget is checked against before submit, and before each ladder rung.
            "scheduling": {"maxRunningTime": "3600s"},
            "hyperparameters": {
                "goal": "MAXIMIZE",
                "hyperparameterMetricTag": METRIC_TAG,
                "maxTrials": "{{ params.max_trials }}",
                "maxParallelTrials": "{{ params.max_parallel_trials }}",
                "algorithm": "{{ params.algorithm }}",
                "params": TUNING_PARAMS,
            },
        },
        framework="scikit-learn",  # on Vertex AI: the container the iris trainer needs
        # A list of placements is a capacity ladder: each rung one job, created once; a rung is
        # given up only for capacity. A rung may also be a mapping, e.g. {"label": "l4", "strategy":
        # "FLEX_START", "max_wait_duration": "3600s", "machine_type": "g2-standard-4",
        # "accelerator_type": "NVIDIA_L4", "accelerator_count": 1}; one mapping places the one job.
        # The form's list goes as JSON, and none on ai_platform: the ml v1 API has no Spot VMs, so
        # there is nothing to climb.
        placement="{{ params.capacity_ladder | tojson if params.backend == 'vertex' else '' }}",
        deferrable=True,
        budget="{{ params.budget if params.budget is not none else '' }}",
    )

    export = ExportArtifactsOperator(
        task_id="export_best_model",
        project_id="{{ params.project_id }}",
        backend="{{ params.backend }}",
        job_id="{{ ti.xcom_pull(task_ids='tune')['name'] }}",  # the resource name: it carries the region
        # Tuning jobs of the rungs before it (their trials count): the best trial may be in one.
        earlier_jobs="{{ ti.xcom_pull(task_ids='tune').get('earlier_jobs', []) | tojson }}",
        destination_uri="gs://{{ params.bucket }}/models/iris",
    )

    # prepare_data checks the bucket before it writes; staging waits for it, so a missing bucket
    # stops the run before anything is written (build_trainer writes only locally: it runs meanwhile).
    data >> stage
    data >> tune
    capacity >> tune
    tune >> export

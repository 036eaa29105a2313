"""
# Retrain on new data; promote the model only when it beats the champion

Runs whenever **aip_prepare_data** lands new data (an event of the **iris_training_data**
Asset), on exactly the files that run wrote. Triggered by hand, it trains on the newest data
aip_prepare_data landed, or on the two CSVs given in the form (both, as `gs://` URIs); with
neither, it stops at once and says to run aip_prepare_data first.

It trains one job with fixed hyperparameters: the champion's, when there is one and
*Reuse the champion's hyperparameters* is on, else the form's `C` and `max_iter`.

Meanwhile **evaluate_champion** scores the current champion on this run's evaluation CSV (an
evaluation-only job of the same trainer, on the same service: skipped when there is no champion
yet). The gate then compares two metrics measured on the same rows, and its verdict says so:
"accuracy 0.9556 on this run's data against the champion's 0.9333 (v3) on the same data:
promoted". Were the data to differ (the champion changed while this run evaluated the one
before), the gate refuses (`require_same_eval_data`) instead of comparing scores on different rows.

Then the *Champion store* decides where the champion lives:

- **registry** (default): **export_model** copies the model to Cloud Storage with its manifest,
  and **register_model** uploads it as a new version of `iris-retrained` in Vertex AI Model
  Registry, then moves the alias `champion` to it only if its eval accuracy beats the
  champion's (a tie keeps the champion). Every promotion is recorded in
  a ledger in `models/iris-retrained/ledgers/`; **aip_rollback_champion** moves the alias back.
  A promotion emits an event of the Asset **iris_champion_model**.
- **gcs**: **export_model** compares the accuracy with the champion's manifest
  (`models/iris-retrained/champion.json`) and exports and promotes the model only when it is
  better.
"""

from __future__ import annotations

import logging
from typing import Any

import pendulum
from aip_examples import (
    CHAMPION_ALIAS,
    CHAMPION_LEDGER_URI,
    CHAMPION_MANIFEST_URI,
    IRIS_DATA_URI,
    METRIC_TAG,
    REGISTRY_MODEL_ID,
    RETRAINED_MODELS_URI,
    TRAINER_MODULE,
    TRAINER_PACKAGE,
    job_params,
    require_bucket,
)
from aip_examples.retraining import (
    GCS_CSV_PATTERN,
    champion_hyperparameters,
    champion_model_uri,
    pick_training_data,
)
from airflow.sdk import DAG, Asset, Param, get_current_context, task

from airflow_aip.operators import (
    BuildTrainerPackageOperator,
    ExportArtifactsOperator,
    RegisterModelOperator,
    StagePackagesOperator,
    SubmitTrainingJobOperator,
)

log = logging.getLogger(__name__)
IRIS_DATA = Asset(name="iris_training_data", uri=IRIS_DATA_URI)
# Its events carry the new champion's version, alias, metric and job (only when the champion changed).
IRIS_CHAMPION = Asset(name="iris_champion_model", uri=f"{RETRAINED_MODELS_URI}/{REGISTRY_MODEL_ID}")
BUCKET = IRIS_DATA_URI.split("/")[2]
RUN_STAMP = "{{ dag_run.run_after.strftime('%Y%m%dT%H%M%S') }}"
# Where evaluate_champion writes the champion's score on this run's data, and the gate reads it.
CHAMPION_EVALUATION_URI = f"gs://{BUCKET}/jobs/champion_eval/{RUN_STAMP}/champion_metrics.json"

with DAG(
    dag_id="aip_retraining",
    description="On new iris data (from aip_prepare_data): retrain, promote only a better model",
    doc_md=__doc__,
    schedule=[IRIS_DATA],
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["airflow_aip", "example"],
    params={
        **job_params(),
        "champion_store": Param(
            "registry",
            type="string",
            enum=["registry", "gcs"],
            title="Champion store",
            description="registry: every model becomes a version in Vertex AI Model Registry, and the "
            "alias 'champion' moves to it only when it is better. gcs: the champion is a manifest in "
            "Cloud Storage, and only a better model is exported.",
        ),
        "C": Param(
            1.0,
            type="number",
            exclusiveMinimum=0,
            title="C (inverse regularisation)",
            description="Logistic regression's C: smaller is a simpler model. Used unless the "
            "champion's hyperparameters are reused.",
        ),
        "max_iter": Param(
            100,
            type="integer",
            minimum=1,
            maximum=10_000,
            title="Maximum iterations",
            description="The solver's iteration limit. Used unless the champion's are reused.",
        ),
        "reuse_champion_hyperparameters": Param(
            True,
            type="boolean",
            title="Reuse the champion's hyperparameters",
            description="Train with the current champion's C and max_iter (when there is a champion), "
            "so only the data changes.",
        ),
        "train_data": Param(
            None,
            type=["null", "string"],
            pattern=GCS_CSV_PATTERN,
            title="Training CSV (optional)",
            description="A gs:// URI. Leave empty to use the newest data aip_prepare_data landed; "
            "give it together with the evaluation CSV.",
        ),
        "eval_data": Param(
            None,
            type=["null", "string"],
            pattern=GCS_CSV_PATTERN,
            title="Evaluation CSV (optional)",
            description="A gs:// URI. Leave empty to use the newest data aip_prepare_data landed; "
            "give it together with the training CSV.",
        ),
    },
) as dag:

    @task(multiple_outputs=True, inlets=[IRIS_DATA])
    def new_data() -> dict[str, str]:
        """The CSVs to train on: the form's, else the triggering Asset event's, else the newest event's.

        Runs before anything is written (staging waits for it), so a run with nothing to train
        on stops here, in one line that says what to do.
        """
        context = get_current_context()
        require_bucket(BUCKET, "AIP_EXAMPLE_BUCKET")
        chosen = pick_training_data(
            context["params"],
            context["triggering_asset_events"].get(IRIS_DATA) or [],
            lambda: newest_event(context["inlet_events"][IRIS_DATA]),
        )
        log.info("Training on %s and %s (%s)", chosen["train"], chosen["eval"], chosen.pop("source"))
        return chosen

    def newest_event(events: Any) -> list[Any]:
        """The newest Asset event, read by the database (Airflow 3.2+) or from 3.1's oldest-first list."""
        if hasattr(events, "ascending"):
            return list(events.ascending(False).limit(1))
        return list(events)[-1:]

    @task(multiple_outputs=True)
    def hyperparameters() -> dict[str, str]:
        """The champion's hyperparameters when asked and available; otherwise the Params."""
        params = get_current_context()["params"]
        chosen = {"C": params["C"], "max_iter": params["max_iter"]}
        if params["reuse_champion_hyperparameters"]:
            found = champion_hyperparameters(params)
            chosen = {k: found.get(k, v) for k, v in chosen.items()}
        # The API takes args as strings.
        return {"C": str(float(chosen["C"])), "max_iter": str(int(float(chosen["max_iter"])))}

    @task.short_circuit(ignore_downstream_trigger_rules=False)
    def champion_model() -> str | None:
        """The champion's model directory, to score on this run's data; None (no champion) skips that."""
        found = champion_model_uri(get_current_context()["params"])
        log.info("The champion to evaluate: %s", found or "none yet")
        return found

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
        training_input={
            "packageUris": staged_uris,
            "pythonModule": TRAINER_MODULE,
            "jobDir": f"gs://{BUCKET}/jobs/retrain/{RUN_STAMP}",
            "args": [
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
            "scaleTier": "{{ params.scale_tier }}",
            "runtimeVersion": "{{ params.runtime_version }}",
            "pythonVersion": "{{ params.python_version }}",
        },
        framework="scikit-learn",  # on Vertex AI: the container the iris trainer needs
        deferrable=True,
        budget=5,  # USD, the price table's currency: the job is cancelled past it (an estimate)
    )
    champion: Any = champion_model()
    # The same trainer, scoring the champion's saved model: nothing is trained, one metrics file lands.
    evaluate_champion = SubmitTrainingJobOperator(
        task_id="evaluate_champion",
        project_id="{{ params.project_id }}",
        backend="{{ params.backend }}",
        region="{{ params.region }}",
        job_id_prefix="iris_champion_eval",
        training_input={
            "packageUris": staged_uris,
            "pythonModule": TRAINER_MODULE,
            "jobDir": f"gs://{BUCKET}/jobs/champion_eval/{RUN_STAMP}",
            "args": [
                "--evaluate-model",
                champion,
                "--eval-data",
                data["eval"],
                "--metric-tag",
                METRIC_TAG,
                "--metrics-uri",
                CHAMPION_EVALUATION_URI,
            ],
            "scaleTier": "{{ params.scale_tier }}",
            "runtimeVersion": "{{ params.runtime_version }}",
            "pythonVersion": "{{ params.python_version }}",
        },
        framework="scikit-learn",
        deferrable=True,
    )
    export = ExportArtifactsOperator(
        task_id="export_model",
        project_id="{{ params.project_id }}",
        backend="{{ params.backend }}",
        job_id="{{ ti.xcom_pull(task_ids='train')['name'] }}",  # the resource name: it carries the region
        destination_uri=RETRAINED_MODELS_URI,
        metrics_file="metrics.json",
        metric_key=METRIC_TAG,
        # The Cloud Storage gate, only when the champion lives there ("" is no gate).
        champion_manifest_uri="{{ '" + CHAMPION_MANIFEST_URI + "' if params.champion_store == 'gcs' }}",
        champion_evaluation=CHAMPION_EVALUATION_URI,
        require_same_eval_data=True,
        trigger_rule="none_failed",  # evaluate_champion is skipped when there is no champion yet
    )

    @task.short_circuit
    def registry_chosen() -> bool:
        """Register only when the champion lives in the Model Registry."""
        return bool(get_current_context()["params"]["champion_store"] == "registry")

    register = RegisterModelOperator(
        task_id="register_model",
        project_id="{{ params.project_id }}",
        region="{{ params.region }}",
        manifest_uri="{{ ti.xcom_pull(task_ids='export_model')['manifest_uri'] }}",
        model=REGISTRY_MODEL_ID,
        framework="scikit-learn",  # the pre-built sklearn prediction container serves it
        runtime_version="{{ params.runtime_version }}",
        champion_alias=CHAMPION_ALIAS,
        ledger_uri=CHAMPION_LEDGER_URI,
        training_data=[data["train"], data["eval"]],
        champion_evaluation=CHAMPION_EVALUATION_URI,
        require_same_eval_data=True,
        champion_asset=IRIS_CHAMPION,
        deferrable=True,
    )
    data >> [stage, champion]  # new_data checks the bucket and the data before anything is written
    train >> export >> registry_chosen() >> register
    evaluate_champion >> export

"""
# Roll the retrained model's champion back

Triggered by hand. Moves the alias `champion` of the Model Registry model `iris-retrained`
(written by **aip_retraining** with *Champion store* = registry) back to the version that held
it before the last promotion, as its ledger records it
(`models/iris-retrained/ledgers/<project>-<region>-iris-retrained.json`). The version rolled
back from stays registered, without the alias; a second run goes one champion further back.
The change emits an event of the Asset **iris_champion_model**.
"""

from __future__ import annotations

import pendulum
from aip_examples import CHAMPION_ALIAS, CHAMPION_LEDGER_URI, REGISTRY_MODEL_ID, RETRAINED_MODELS_URI
from airflow.sdk import DAG, Asset, Param

from airflow_aip.operators import RollbackChampionOperator

IRIS_CHAMPION = Asset(name="iris_champion_model", uri=f"{RETRAINED_MODELS_URI}/{REGISTRY_MODEL_ID}")

with DAG(
    dag_id="aip_rollback_champion",
    description="By hand: move the retrained model's champion alias back to the previous champion",
    doc_md=__doc__,
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["airflow_aip", "example"],
    params={
        "project_id": Param(
            "local-project",
            type="string",
            minLength=6,
            title="Google Cloud project",
            description="The project aip_retraining registered the model in (local-project locally).",
        ),
        "region": Param(
            "us-central1",
            type="string",
            title="Region",
            description="The Vertex AI region of the model (the region aip_retraining ran in).",
        ),
    },
) as dag:
    RollbackChampionOperator(
        task_id="rollback_champion",
        project_id="{{ params.project_id }}",
        region="{{ params.region }}",
        model=REGISTRY_MODEL_ID,
        champion_alias=CHAMPION_ALIAS,
        ledger_uri=CHAMPION_LEDGER_URI,
        champion_asset=IRIS_CHAMPION,
    )

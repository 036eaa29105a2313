"""Land a fresh train/eval split every day and announce it as an Asset.

Stands in for whatever produces new training data in a real pipeline. Each run draws a
different split (seeded by the run time), writes it to its own folder, and records the URIs in
the Asset event, so ``aip_retraining`` trains on exactly the data this run wrote.
"""

from __future__ import annotations

import pendulum
from aip_examples import EXAMPLE_BUCKET, IRIS_DATA_URI, run_stamp, write_split
from airflow.sdk import DAG, Asset, Param, get_current_context, task

IRIS_DATA = Asset(name="iris_training_data", uri=IRIS_DATA_URI)

with DAG(
    dag_id="aip_prepare_data",
    description="Write a new iris train/eval split and emit the iris_training_data Asset",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["airflow_aip", "example"],
    params={"eval_fraction": Param(0.3, type="number", exclusiveMinimum=0, exclusiveMaximum=1)},
) as dag:

    @task(outlets=[IRIS_DATA])
    def land_new_data() -> dict[str, str]:
        context = get_current_context()
        stamp = run_stamp()
        seed = int(stamp.replace("T", "")) % 10_000
        eval_fraction = float(context["params"]["eval_fraction"])
        uris = write_split(EXAMPLE_BUCKET, f"data/iris/{stamp}", seed, eval_fraction)
        context["outlet_events"][IRIS_DATA].extra = {**uris, "seed": seed}
        return uris

    land_new_data()

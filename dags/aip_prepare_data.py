"""
# Land new iris data every day and announce it

Stands in for whatever produces fresh training data in a real pipeline. Each run draws a
different train/eval split (seeded by the run's time), writes it to its own folder,
`gs://<bucket>/data/iris/<run time>/`, and records the two URIs in an event of the
**iris_training_data** Asset.

That event is what starts **aip_retraining**, which trains on exactly the files this run
wrote: trigger this DAG (or wait for its daily run) and a retraining run follows. The bucket is
`AIP_EXAMPLE_BUCKET` (default `aip-demo`), fixed when the DAG is parsed because an Asset's URI
is; a missing bucket fails the run in one line before anything is written.
"""

from __future__ import annotations

import pendulum
from aip_examples import EXAMPLE_BUCKET, IRIS_DATA_URI, eval_fraction_param, run_stamp, write_split
from airflow.sdk import DAG, Asset, get_current_context, task

IRIS_DATA = Asset(name="iris_training_data", uri=IRIS_DATA_URI)

with DAG(
    dag_id="aip_prepare_data",
    description="Daily: write a new iris train/eval split; its Asset event starts aip_retraining",
    doc_md=__doc__,
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["airflow_aip", "example"],
    params={"eval_fraction": eval_fraction_param()},
) as dag:

    @task(outlets=[IRIS_DATA])
    def land_new_data() -> dict[str, str]:
        """Write this run's split and put its URIs in the Asset event aip_retraining reads."""
        context = get_current_context()
        stamp = run_stamp()
        seed = int(stamp.replace("T", "")) % 10_000
        eval_fraction = float(context["params"]["eval_fraction"])
        folder = f"data/iris/{stamp}"
        uris = write_split(EXAMPLE_BUCKET, folder, seed, eval_fraction, "AIP_EXAMPLE_BUCKET")
        context["outlet_events"][IRIS_DATA].extra = {**uris, "seed": seed}
        return uris

    land_new_data()

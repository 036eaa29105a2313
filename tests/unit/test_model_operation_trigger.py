"""ModelOperationTrigger: every argument survives serialization (a restarted triggerer rebuilds it)."""

from __future__ import annotations

import inspect

from airflow_aip.hooks.job_reference import API_FIELDS
from airflow_aip.triggers.model_operation import CLASSPATH, ModelOperationTrigger


def test_the_trigger_serializes_every_argument_and_rebuilds_the_same() -> None:
    trigger = ModelOperationTrigger(
        operation_name="projects/p/locations/us-central1/models/m/operations/7",
        region="us-central1",
        project_id="p",
        gcp_conn_id="conn",
        api_endpoint="http://127.0.0.1:1/",
        impersonation_chain=["a@p.iam.gserviceaccount.com"],
        poll_interval=3.0,
        end_time=1_800_000_000.0,
        release_at=1_799_999_000.0,
    )
    classpath, kwargs = trigger.serialize()
    assert classpath == CLASSPATH
    rebuilt = ModelOperationTrigger(**kwargs)
    assert rebuilt.serialize() == (classpath, kwargs)
    own = set(inspect.signature(ModelOperationTrigger.__init__).parameters) - {"self", "connection"}
    assert set(kwargs) == own | set(API_FIELDS)  # its own arguments and its API's, every one
    assert kwargs["backend"] == "vertex"
    # Operations share the triggerer's poller with others of the same API, identity, project, region.
    assert rebuilt.poller_key == trigger.poller_key
    assert trigger.poller_key == (
        "models",
        "conn",
        "http://127.0.0.1:1/",
        ("a@p.iam.gserviceaccount.com",),
        "p",
        "us-central1",
    )
    # one account, as a string or a list of one: the same identity, the same poller (chain_key)
    alone = ModelOperationTrigger(**{**kwargs, "impersonation_chain": "a@p.iam.gserviceaccount.com"})
    assert alone.poller_key == trigger.poller_key

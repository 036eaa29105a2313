"""What the example-DAG tests share: the parsed example DAGs, and the examples' own bucket."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.dagbag import parse_dag_folder
from tests.fixtures.local_service import LocalService, storage_client

DAGS = Path(__file__).resolve().parents[2] / "dags"


@pytest.fixture(scope="module")
def dags() -> dict[str, Any]:
    """The example DAGs by ID, parsed as the dag-processor parses the DAG folder."""
    bag = parse_dag_folder(DAGS)
    assert bag.import_errors == {}
    # The operators' poll_interval defaults to [aip] poll_interval (30 s) as read when their module
    # was imported, before any test's environment: the local jobs end in seconds, so poll each second.
    for dag in bag.dags.values():
        for task in dag.tasks:
            if hasattr(task, "poll_interval"):
                task.poll_interval = 1
    return dict(bag.dags)


@pytest.fixture
def demo_bucket(local_env: LocalService, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A bucket of the test's own on the local fake GCS; the operators poll every second."""
    monkeypatch.setenv("AIRFLOW__AIP__POLL_INTERVAL", "1")
    return storage_client(local_env.gcs_url).create_bucket(f"aip-dags-{uuid.uuid4().hex[:10]}")


@pytest.fixture
def example_bucket(local_env: LocalService, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The retraining examples' bucket (``AIP_EXAMPLE_BUCKET``: their Assets' URIs name it), created
    on the local fake GCS when missing; the operators poll every second."""
    monkeypatch.syspath_prepend(str(DAGS))
    from aip_examples import EXAMPLE_BUCKET

    monkeypatch.setenv("AIRFLOW__AIP__POLL_INTERVAL", "1")
    client = storage_client(local_env.gcs_url)
    return client.lookup_bucket(EXAMPLE_BUCKET) or client.create_bucket(EXAMPLE_BUCKET)

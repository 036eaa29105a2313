"""Unit-test fixtures shared by modules: the local service's API without running any job.

``service`` is a ``TrainingService`` whose runner threads are never started; ``client`` serves it
through the real ASGI app (FastAPI's TestClient), so paths, status codes and error bodies are
what google-api-python-client sees. A module with fixtures of these names uses its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from airflow_aip.local.api import create_app
from airflow_aip.local.service import ServiceConfig, TrainingService


@pytest.fixture
def service(tmp_path: Path) -> Iterator[TrainingService]:
    """A service on a fresh data dir, no storage; stopped at the end of the test."""
    running = TrainingService(ServiceConfig(tmp_path / "data", storage_url=None))
    yield running
    running.stop()


@pytest.fixture
def client(service: TrainingService) -> TestClient:
    """Requests to ``service``'s app, as google-api-python-client would send them."""
    return TestClient(create_app(service))

"""Unit-test fixtures shared by modules: the local service's API without running any job, and the
fake ml v1 API.

``service`` is a ``TrainingService`` whose runner threads are never started; ``client`` serves it
through the real ASGI app (FastAPI's TestClient), so paths, status codes and error bodies are
what google-api-python-client sees. ``api`` is the fake ml v1 API of ml_fake.py. A module with
fixtures of these names uses its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from airflow_aip.hooks.http_shared import clear_shared_auth
from airflow_aip.local.api import create_app
from airflow_aip.local.service import ServiceConfig, TrainingService
from tests.unit.ml_fake import FakeMlApi


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


@pytest.fixture
def api() -> FakeMlApi:
    """The fake ml v1 API (tests/unit/ml_fake.py), with no shared auth left from another test."""
    clear_shared_auth()
    return FakeMlApi()

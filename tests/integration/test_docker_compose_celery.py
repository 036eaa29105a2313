"""docker-compose.yaml's ``celery`` profile: Airflow's official CeleryExecutor services, checked
without an engine like the rest of the file (tests/integration/test_docker_compose.py).

LocalExecutor stays the default: the profile's services (redis, airflow-worker; flower under
``flower``) run only when asked for, and ``AIRFLOW_EXECUTOR=CeleryExecutor`` switches every
Airflow service to Celery at once (one anchor).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from tests.fixtures.compose import (
    AIRFLOW_SERVICES,
    COMPOSE_FILE,
    COMPOSE_INSTALL,
    REPO,
    compose_cli,
    interpolate,
)
from tests.fixtures.tools import missing

pytestmark = pytest.mark.integration

PROFILED = {"redis": ["celery"], "airflow-worker": ["celery"], "flower": ["flower"]}


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    found: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    return found


def test_only_the_celery_services_are_behind_profiles(services: dict[str, Any]) -> None:
    assert {name: s["profiles"] for name, s in services.items() if "profiles" in s} == PROFILED
    for name in AIRFLOW_SERVICES:  # nothing the default stack runs waits for a profiled service
        assert not set(services[name]["depends_on"]) & PROFILED.keys(), name


def test_celery_profile_resolves_with_celery_executor(tmp_path: Path) -> None:
    """A real Compose CLI resolves the file with the profiles on and AIRFLOW_EXECUTOR set."""
    cli = compose_cli()
    if cli is None:
        missing("a Compose CLI (docker-compose)", COMPOSE_INSTALL)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPOSE_", "AIRFLOW_", "DOCKER_"))}
    argv = [*cli, "-f", str(COMPOSE_FILE), "--profile", "celery", "--profile", "flower", "config"]
    result = subprocess.run(
        argv, cwd=REPO, env={**env, "AIRFLOW_EXECUTOR": "CeleryExecutor"}, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    resolved = yaml.safe_load(result.stdout)["services"]
    assert {"redis", "airflow-worker", "flower"} <= resolved.keys()
    for name in [*AIRFLOW_SERVICES, "airflow-worker", "flower", "airflow-init"]:
        assert resolved[name]["environment"]["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor", name


def test_worker_has_the_official_shape_and_what_tasks_need(services: dict[str, Any]) -> None:
    worker, scheduler = services["airflow-worker"], services["airflow-scheduler"]
    assert worker["command"] == "celery worker"
    assert 'inspect ping -d "celery@$${HOSTNAME}"' in worker["healthcheck"]["test"][1]
    assert worker["environment"] == {**scheduler["environment"], "DUMB_INIT_SETSID": "0"}
    assert worker["depends_on"]["redis"]["condition"] == "service_healthy"
    assert worker["depends_on"]["airflow-init"]["condition"] == "service_completed_successfully"
    assert worker["depends_on"]["postgres"]["condition"] == "service_healthy"
    # The DAGs and the trainer's source, on every worker: what a stage task rebuilds from.
    assert "./dags:/opt/airflow/dags" in worker["volumes"]
    assert (worker["build"], interpolate(worker["image"])) == (
        scheduler["build"],
        interpolate(scheduler["image"]),
    )


def test_broker_and_result_backend_are_the_profiles_services(services: dict[str, Any]) -> None:
    env = services["airflow-worker"]["environment"]
    broker = urlsplit(env["AIRFLOW__CELERY__BROKER_URL"])
    assert (broker.scheme, broker.hostname, broker.port) == ("redis", "redis", 6379)
    assert broker.port in services["redis"]["expose"]
    backend = env["AIRFLOW__CELERY__RESULT_BACKEND"]
    # The metadata database, through the driver the image has (SQLAlchemy 2.1 defaults to psycopg 3).
    assert backend == "db+" + env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
    assert backend.startswith("db+postgresql+psycopg2://")


def test_flower_publishes_on_loopback_only(services: dict[str, Any]) -> None:
    assert services["flower"]["command"] == "celery flower"
    assert services["flower"]["ports"] == ["127.0.0.1:5555:5555"]

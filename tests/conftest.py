"""Test-wide setup: a private Airflow home, and the real local servers the tiers talk to.

Airflow reads its configuration at import time, so the environment is set here, before any
test module imports airflow.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.fixtures.shared import SharedServers, make_shared_dir, once, shared_dir

REPO = Path(__file__).resolve().parent.parent
_HOME = Path(tempfile.mkdtemp(prefix="aip-test-airflow-"))
atexit.register(shutil.rmtree, _HOME, ignore_errors=True)  # one per pytest process: none left behind

os.environ["AIRFLOW_HOME"] = str(_HOME)
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(REPO / "dags")
os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{_HOME / 'airflow.db'}"
os.environ.setdefault("AIRFLOW__CORE__ALLOWED_DESERIALIZATION_CLASSES", "airflow_aip.*")
# A deferrable task in these tests defers at once, as its test is about the deferral; the tests of
# the first wait in the worker name ``defer_after``.
os.environ["AIRFLOW__AIP__DEFER_AFTER"] = "0"
# Nothing in the tests may reach Google: a stray call fails fast instead of hanging on a metadata server.
os.environ["GCE_METADATA_HOST"] = "127.0.0.1:9"
os.environ["NO_GCE_CHECK"] = "True"
os.environ.pop("GOOGLE_APPLICATION_CREDENTIALS", None)
os.environ.pop("STORAGE_EMULATOR_HOST", None)
os.environ.pop("CLOUDSDK_API_ENDPOINT_OVERRIDES_ML", None)
os.environ.pop("CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM", None)
os.environ.pop("CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING", None)

pytest_plugins = [
    "tests.fixtures.tools",  # under CI: a missing tool fails, and a run with a skip fails
    "tests.fixtures.gcs",
    "tests.fixtures.local_service",
    "tests.fixtures.vertex",  # after local_service, which it imports
    "tests.fixtures.containers",
    "tests.fixtures.dags",
    "tests.fixtures.browser",
    "tests.fixtures.cpu",
    "tests.fixtures.ui_home",
    "tests.fixtures.google_standin",
    "tests.fixtures.in_process_api",  # dag.test() on Airflow 3.1 and 3.2 (a no-op from 3.3)
]


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """A migrated SQLite metadata DB for ``dag.test()`` runs: migrated once for the whole run (an
    Airflow CLI start and a full schema build), then copied into this process's home."""
    shutil.copyfile(once("airflow-db", _migrated_db), _HOME / "airflow.db")
    return _HOME


def _migrated_db() -> str:
    home = shared_dir() / "airflow-db"
    home.mkdir()
    env = {**os.environ, "AIRFLOW_HOME": str(home)}
    env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{home / 'airflow.db'}"
    airflow = str(Path(sys.executable).parent / "airflow")
    subprocess.run([airflow, "db", "migrate"], check=True, capture_output=True, env=env)
    return str(home / "airflow.db")


def pytest_configure(config: pytest.Config) -> None:
    """In the controller (or the only pytest process): the run's shared directory, and the
    plugin that stops the shared servers."""
    if not hasattr(config, "workerinput"):
        make_shared_dir()
        config.pluginmanager.register(SharedServers(), "aip-shared-servers")

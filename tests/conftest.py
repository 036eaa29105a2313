"""Test-wide setup: a private Airflow home, and the real local servers the tiers talk to.

Airflow reads its configuration at import time, so the environment is set here, before any
test module imports airflow.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
_HOME = Path(tempfile.mkdtemp(prefix="aip-test-airflow-"))

os.environ["AIRFLOW_HOME"] = str(_HOME)
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(REPO / "dags")
os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{_HOME / 'airflow.db'}"
os.environ.setdefault("AIRFLOW__CORE__ALLOWED_DESERIALIZATION_CLASSES", "airflow_aip.*")
# Nothing in the tests may reach Google: a stray call fails fast instead of hanging on a metadata server.
os.environ["GCE_METADATA_HOST"] = "127.0.0.1:9"
os.environ["NO_GCE_CHECK"] = "True"
os.environ.pop("GOOGLE_APPLICATION_CREDENTIALS", None)
os.environ.pop("STORAGE_EMULATOR_HOST", None)
os.environ.pop("CLOUDSDK_API_ENDPOINT_OVERRIDES_ML", None)
os.environ.pop("CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM", None)
os.environ.pop("CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING", None)

pytest_plugins = [
    "tests.fixtures.gcs",
    "tests.fixtures.local_service",
    "tests.fixtures.dags",
    "tests.fixtures.browser",
    "tests.fixtures.cpu",
]


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """A migrated SQLite metadata DB for ``dag.test()`` runs (once per session)."""
    subprocess.run(
        [str(Path(sys.executable).parent / "airflow"), "db", "migrate"],
        check=True,
        capture_output=True,
        env=os.environ.copy(),
    )
    return _HOME


# Parallel runs (pytest-xdist): most of the suite waits on real servers and training processes,
# not on the CPU, so several workers share the two cores well. A module's tests stay on one worker,
# so its module fixtures (a faulty service, a DagBag) start once; the e2e tier shares one
# ``airflow standalone`` and the Celery tier one stack, so each tier runs whole on one worker.
# (A scheduler of our own: xdist's ``loadgroup`` marks are not honoured under pytest 9.)
_WHOLE_TIERS = ("e2e", "celery")
# e2e modules that start stacks of their own (none of the tier's shared fixtures): a scope each,
# so they run beside the tier instead of after it.
_OWN_SCOPE = frozenset({"tests/e2e/test_ui_stop.py"})
# Seconds the long scopes took in a whole `make test` (2026-11-27, this 2-core machine, 4 workers).
# The longest start first and the short ones fill in around them at the end (longest processing
# time first). xdist's own order, by number of tests, started the e2e tier after 100 s of unit
# tests and the make-ui stop test 11 minutes in, leaving the run's end to the longest test.
# Only the order depends on these: a stale figure makes the run slower, never wrong.
_SCOPE_SECONDS = {
    "e2e": 1215,
    "tests/e2e/test_ui_stop.py": 852,
    "tests/dags/test_example_dags.py": 535,
    "celery": 402,
    "tests/integration/test_reliability_kill.py": 375,
    "tests/dags/test_lineage.py": 266,
    "tests/integration/test_reliability_outage.py": 230,
    "tests/integration/test_capacity_ladder.py": 204,
    "tests/integration/test_reliability_gcs_faults.py": 183,
    "tests/integration/test_reliability_pipeline.py": 157,
    "tests/integration/test_reliability_faults.py": 132,
    "tests/integration/test_local_service_restart.py": 127,
    "tests/integration/test_local_model_registry.py": 85,
    "tests/integration/test_example_trainer.py": 82,
    "tests/integration/test_log_streaming.py": 78,
    "tests/dags/test_example_guards.py": 73,
    "tests/integration/test_reliability_ladder.py": 72,
}


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    class TierScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            tier = path.split("/")[1] if path.count("/") >= 2 else ""
            return tier if tier in _WHOLE_TIERS and path not in _OWN_SCOPE else path

        def _assign_work_unit(self, node: Any) -> None:
            """Hand out the longest waiting scope (then the one with most tests) first."""
            queue = self.workqueue
            longest = max(queue, key=lambda scope: (_SCOPE_SECONDS.get(scope, 0), len(queue[scope])))
            queue.move_to_end(longest, last=False)
            super()._assign_work_unit(node)

    return TierScheduling(config, log)

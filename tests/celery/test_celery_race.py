"""No executor race can fail a deferred task on CeleryExecutor either (apache/airflow#66374 was
first reported there): ``aip_celery_race`` (tests/stack_dags/aip_e2e_race.py), 5 runs at once, each
with a job that succeeds, a trainer failing 1 s in, and a ladder climbing after 2 s, ``retries=0``.
"""

from __future__ import annotations

import pytest

from tests.celery.conftest import CeleryStack
from tests.fixtures.race import check_races, leave_region_without_a100s, run_races

pytestmark = [pytest.mark.celery, pytest.mark.soak]


def test_five_runs_of_jobs_ending_seconds_after_the_deferral(celery_stack: CeleryStack) -> None:
    stack = celery_stack
    leave_region_without_a100s(stack.ml_url)
    conf = {"package_uri": stack.package_uri, "job_dir": f"gs://{stack.bucket}/race"}
    check_races(stack, run_races(stack, "aip_celery_race", conf, 5))

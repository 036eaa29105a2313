"""Airflow itself discovers the provider through its entry point."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def test_airflow_providers_list_names_airflow_aip() -> None:
    airflow = Path(sys.executable).parent / "airflow"
    out = subprocess.run(
        [str(airflow), "providers", "list", "--output", "plain"],
        check=True,
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=180,
    )
    assert "airflow-aip" in out.stdout

"""airflow_aip: AI Platform Training's workflow on Vertex AI custom training, for Apache Airflow 3.

This module stays import-cheap: Airflow's providers manager imports it to read
``get_provider_info`` on every process start.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.2.0"

__all__ = ["__version__", "get_provider_info"]


def get_provider_info() -> dict[str, Any]:
    """Describe the provider to Airflow's providers manager (`airflow providers list`)."""
    from airflow_aip.config import OPTIONS

    return {
        "package-name": "airflow-aip",
        "name": "AI Platform Training on Vertex AI",
        "description": "Build, stage, train, tune, wait on and export Vertex AI custom training jobs "
        "written in AI Platform Training's vocabulary (or the ml v1 API), with a local training "
        "service for runs without a cloud account.",
        "versions": [__version__],
        "connection-types": [],
        "extra-links": ["airflow_aip.links.TrainingJobConsoleLink"],
        "config": {
            "aip": {
                "description": "airflow_aip defaults.",
                "options": {name: option.described() for name, option in OPTIONS.items()},
            }
        },
    }

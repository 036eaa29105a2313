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
                "options": {
                    "backend": {
                        "description": "The job API the operators use: vertex (Vertex AI custom "
                        "training) or ai_platform (the ml v1 API, which Google shut down on 2025-01-31; "
                        "for the local service or a compatible endpoint).",
                        "version_added": "0.2.0",
                        "type": "string",
                        "example": "vertex",
                        "default": "vertex",
                    },
                    "region": {
                        "description": "Where the sensor, cancel and export look for a Vertex AI job "
                        "given by our job ID (a resource name carries its own).",
                        "version_added": "0.2.0",
                        "type": "string",
                        "example": "europe-west4",
                        "default": "us-central1",
                    },
                    "poll_interval": {
                        "description": "Seconds between job state polls while waiting.",
                        "version_added": "0.1.0",
                        "type": "integer",
                        "example": "30",
                        "default": "30",
                    },
                    "max_log_lines_per_minute": {
                        "description": "Training-job log lines copied into the task log per minute while "
                        "waiting (stream_logs); beyond it, one line says how many were dropped.",
                        "version_added": "0.1.0",
                        "type": "integer",
                        "example": "1000",
                        "default": "1000",
                    },
                    "log_reads_per_minute": {
                        "description": "Cloud Logging entries.list calls a triggerer makes per minute "
                        "and per project, for every deferred wait's log lines together (one shared "
                        "read per round). Cloud Logging allows 60 a minute per project: the default "
                        "leaves half for workers, other triggerers and people's own tools.",
                        "version_added": "0.3.0",
                        "type": "integer",
                        "example": "30",
                        "default": "30",
                    },
                },
            }
        },
    }

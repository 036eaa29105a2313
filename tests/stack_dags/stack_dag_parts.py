"""What the tiers' test Dags share: the test trainer's job, and the capacity ladder's rungs.

Dag files import this module by name: Airflow puts a bundle's root on ``sys.path``.
"""

from __future__ import annotations

from typing import Any

JOB_DIR = "{{ dag_run.conf['job_dir'] }}"
CPU_RUNG = {"label": "cpu", "strategy": "STANDARD", "machine_type": "n1-standard-4", "accelerator_count": 0}
A100 = {"machine_type": "a2-highgpu-1g", "accelerator_type": "NVIDIA_TESLA_A100", "accelerator_count": 1}


def training_input(module: str, args: list[str], job_dir: str = JOB_DIR) -> dict[str, Any]:
    """A job of ``aip_test_trainer.<module>``, from the package the test staged (``conf``)."""
    return {
        "region": "us-central1",
        "runtimeVersion": "2.11",  # on Vertex AI: which pre-built container
        "packageUris": ["{{ dag_run.conf['package_uri'] }}"],
        "pythonModule": f"aip_test_trainer.{module}",
        "args": args,
        "jobDir": job_dir,
    }

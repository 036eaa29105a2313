"""What a named deployment of the service cannot give a job, refused when the job is created.

Run on a developer's machine (``aip-local serve``, ``make ui``), the service gives what it can and
says in the job's log what it could not (no ``/gcs/`` without root, for instance): the developer
started it and sees that log. A deployment made for others, such as docker-compose.yaml's
``aip-local`` service, names itself (``aip-local serve --deployment "docker compose"``); there a
job that needs what the deployment cannot give fails at create, with one line that names the
deployment and what it lacks, instead of running differently from Vertex AI without a word:

- a Vertex AI job needs ``/gcs/`` (Vertex mounts Cloud Storage there for every custom job:
  :mod:`.executor.gcs_mount`), so it is refused where nothing can be mounted (not root, no
  ``/dev/fuse``, no rclone);
- a tuning job whose trials run as processes needs each replica's private ``/tmp/hypertune``
  (:mod:`.executor.private_tmp`), so it is refused where no mount namespace can be made;
- a custom container needs a container engine: refused without one (the service's 400 names the
  deployment).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.local.executor.gcs_mount import mount_unavailable
from airflow_aip.local.executor.private_tmp import private_tmp_unavailable

DEPLOYMENT_FLAG = "--deployment"


def _lacks(deployment: str, field: str, why: str) -> ValidationError:
    return ValidationError(
        field,
        f"the {deployment} deployment of aip-local cannot run this job as Vertex AI would: {why} "
        "(docker-compose.yaml's aip-local service needs root, /dev/fuse and SYS_ADMIN; or run `make ui`)",
    )


def check_vertex_job(deployment: str, spec_key: str, spec: Mapping[str, Any], tuning: bool) -> None:
    """Refuse a Vertex AI job (``spec`` at ``spec_key``) the named deployment cannot run as Vertex
    would; nothing for a service that names no deployment."""
    if not deployment:
        return
    gcs = mount_unavailable()
    if gcs is not None:
        raise _lacks(deployment, spec_key, gcs)
    processes = any("pythonPackageSpec" in pool for pool in spec.get("workerPoolSpecs") or [])
    if tuning and processes:
        check_private_tmp(deployment, spec_key)


def check_private_tmp(deployment: str, field: str) -> None:
    """Refuse a tuning job with process replicas where no private ``/tmp/hypertune`` can be made."""
    why = private_tmp_unavailable() if deployment else None
    if why is not None:
        raise _lacks(deployment, field, f"a trial's private /tmp/hypertune: {why}")


def no_engine(deployment: str, engine_text: str) -> str:
    """The 400's words for a custom container where no engine runs, naming the deployment if any."""
    if not deployment:
        return engine_text
    return f"the {deployment} deployment of aip-local runs no container engine: {engine_text}"

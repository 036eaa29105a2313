"""Per-role images through the submit operator on Vertex AI: AI Platform's masterConfig, workerConfig and
parameterServerConfig ``imageUri`` become each pool's ``containerSpec``, and each replica runs its own.

(ml v1 runs the same trainingInput as it is: test_local_containers.py.)
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import pytest

from airflow_aip.local.executor.containers import ContainerEngine
from airflow_aip.local.store import project_number
from tests.fixtures.containers import containers_of, roles_training_input
from tests.fixtures.local_service import LocalService, StagedTrainer
from tests.fixtures.operators import FakeTI, task_context

pytestmark = pytest.mark.integration


def test_vertex_pools_run_each_roles_own_image_or_the_masters(
    local_service: LocalService,
    container_engine: ContainerEngine,
    trainer_images: Mapping[str, str],
    staged_trainer: StagedTrainer,
) -> None:
    from airflow_aip.operators import SubmitTrainingJobOperator

    out = f"gs://{staged_trainer.bucket}/roles/{uuid.uuid4().hex[:8]}/"
    project = f"roles-{uuid.uuid4().hex[:8]}"
    operator = SubmitTrainingJobOperator(
        task_id="roles",
        project_id=project,
        region="us-central1",
        backend="vertex",
        training_input=roles_training_input(trainer_images, out),
        api_endpoint=local_service.url,
        gcp_conn_id="aip_no_such_conn",
        deferrable=False,
        poll_interval=1,
        stream_logs=False,
    )
    context: Any = task_context(
        FakeTI(f"roles_{uuid.uuid4().hex[:6]}", "roles"), datetime(2026, 3, 9, 7, 5, 1)
    )
    summary = operator.execute(context)
    assert summary["state"] == "SUCCEEDED", summary
    images = {
        pool: staged_trainer.read_json(f"{out}role-{pool}-0.json")["AIP_TEST_IMAGE_ROLE"]
        for pool in ("workerpool0", "workerpool1", "workerpool2")
    }
    assert images == {"workerpool0": "master", "workerpool1": "master", "workerpool2": "ps"}
    number = project_number(project)  # a Vertex job's containers are named by its project's number
    assert [n for n in containers_of(container_engine, local_service.data_dir) if f"-{number}-" in n] == []

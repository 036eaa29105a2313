"""``trainingPipelines.create`` refuses, at once, what the local service cannot run.

The SDK's happy path is tested in tests/integration/test_local_training_pipeline_sdk.py; these
are the 400s a user meets before anything runs, each naming its field.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.fixtures.pipelines import PIPELINES, pipeline_body


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (
            pipeline_body(
                trainingTaskDefinition="gs://google-cloud-aiplatform/schema/trainingjob/definition/automl_tables_1.0.0.yaml"
            ),
            "only custom training",
        ),
        (pipeline_body(inputDataConfig={"datasetId": "1"}), "managed datasets"),
        (pipeline_body(modelToUpload={"displayName": "m"}), "model.container_spec.image_uri"),
        (pipeline_body(trainingTaskInputs={"worker_pool_specs": []}), "job_spec.worker_pool_specs"),
    ],
)
def test_what_cannot_run_is_a_400_before_any_job(client: TestClient, body: dict[str, Any], says: str) -> None:
    response = client.post(PIPELINES, json=body)
    assert response.status_code == 400
    assert says in response.json()["error"]["message"]
    assert client.get("/v1/projects/proj/locations/us-central1/customJobs").json().get("customJobs", []) == []


def test_a_created_pipeline_names_its_backing_custom_job(client: TestClient) -> None:
    created = client.post(PIPELINES, json=pipeline_body()).json()
    assert created["state"] == "PIPELINE_STATE_QUEUED"
    backing = created["trainingTaskMetadata"]["backingCustomJob"]
    assert client.get(f"/v1/{backing}").json()["jobSpec"]["workerPoolSpecs"][0]["replicaCount"] in ("1", 1)
    assert client.get(f"/v1/{created['name']}").json()["name"] == created["name"]

"""The Model Registry's and training's hooks are one regional Vertex AI hook: host, parent, region, build."""

from __future__ import annotations

import pytest

from airflow_aip.exceptions import ValidationError
from airflow_aip.hooks.aiplatform import RegionalAiplatformHook
from airflow_aip.hooks.job_reference import JobApi
from airflow_aip.hooks.registry import ModelRegistryHook, operation_view
from airflow_aip.hooks.vertex import VertexJobHook

API = JobApi(
    "vertex", "aip_conn", "http://127.0.0.1:1/", ["a@p.iam.gserviceaccount.com"], "proj", "europe-west4"
)


@pytest.mark.parametrize("hook_class", [ModelRegistryHook, VertexJobHook])
def test_each_vertex_ai_hook_is_regional_and_built_from_the_task_job_api(
    hook_class: type[RegionalAiplatformHook],
) -> None:
    hook = hook_class.for_api(API, retry_attempts=1)
    assert isinstance(hook, hook_class)
    assert (hook.gcp_conn_id, hook.project_id, hook.region) == ("aip_conn", "proj", "europe-west4")
    assert hook.impersonation_chain == ["a@p.iam.gserviceaccount.com"]
    assert hook.retry_attempts == 1
    assert hook.endpoint == "http://127.0.0.1:1/"
    assert hook.google_host() == "europe-west4-aiplatform"
    assert hook.parent() == "projects/proj/locations/europe-west4"
    assert hook.parent("other") == "projects/other/locations/europe-west4"
    with pytest.raises(ValidationError, match="global endpoint"):
        hook_class("aip_conn", region="global")


def test_a_hook_needs_the_region_its_endpoint_is_in() -> None:
    with pytest.raises(ValidationError, match="region"):
        ModelRegistryHook.for_api(JobApi("vertex", "aip_conn", None, None, "proj", None))


def test_an_operation_reads_as_a_job_running_until_done() -> None:
    name = "projects/p/locations/us-central1/models/m/operations/1"
    assert operation_view(name, {"name": name})["state"] == "RUNNING"
    done = {"name": name, "done": True, "response": {"modelVersionId": "2"}}
    assert operation_view(name, done) == {"name": name, "state": "SUCCEEDED", "operation": done}
    assert operation_view(name, {**done, "error": {"code": 3}})["state"] == "FAILED"

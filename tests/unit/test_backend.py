"""The backend as a type: each wire format's answers (which code may import a wire folder is
`.importlinter`'s contract, checked by `make lint`)."""

from __future__ import annotations

import pytest

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.backend import Backend
from airflow_aip.jobs.backends import backend_named, backend_of, build_request
from airflow_aip.jobs.labels import JOB_ID_LABEL
from airflow_aip.jobs.mlv1.backend import MLV1
from airflow_aip.jobs.vertex.backend import VERTEX_AI


def test_names_pick_their_backend_and_anything_else_is_refused_naming_the_field() -> None:
    assert backend_named("vertex") is VERTEX_AI
    assert backend_named("ai_platform") is MLV1
    assert backend_of({"backend": "vertex"}) is VERTEX_AI
    assert backend_of({}) is MLV1  # summaries written before the backend was recorded
    with pytest.raises(ValidationError, match="backend"):
        backend_named("sagemaker")


@pytest.mark.parametrize(
    ("backend", "output_dir_field", "model_subdir", "server_assigns_ids"),
    [
        (VERTEX_AI, "jobSpec.baseOutputDirectory", "model", True),
        (MLV1, "trainingInput.jobDir", "", False),
    ],
)
def test_each_backend_says_where_its_output_lies_and_who_assigns_ids(
    backend: Backend, output_dir_field: str, model_subdir: str, server_assigns_ids: bool
) -> None:
    assert backend.output_dir_field == output_dir_field
    assert backend.model_subdir == model_subdir
    assert backend.server_assigns_ids is server_assigns_ids


def _request(backend: str) -> Backend:
    request = build_request(
        backend,
        layered_input={},
        named={
            "scaleTier": "BASIC",
            "packageUris": ["gs://aip-bucket/trainer-0.1.tar.gz"],
            "pythonModule": "trainer.task",
            "region": "us-central1",
            "runtimeVersion": "2.11",
            "pythonVersion": "3.7",
        },
        labels={"team": "ml"},
        first_id="census_20240101_000000",
    )
    return request.backend


def test_an_attempt_id_goes_where_each_api_takes_it() -> None:
    body = {"trainingInput": {"region": "us-central1"}, "labels": {"team": "ml"}}
    assert MLV1.for_attempt(body, "j_r2")["jobId"] == "j_r2"
    assert MLV1.labels_for({"team": "ml"}, "j_r2") == {"team": "ml"}
    vertex = VERTEX_AI.for_attempt({"jobSpec": {}, "labels": {"team": "ml"}}, "j_r2")
    assert vertex["displayName"] == "j_r2"
    assert vertex["labels"] == {"team": "ml", JOB_ID_LABEL: "j_r2"}
    assert "displayName" not in VERTEX_AI.compared_spec(vertex)


def test_package_uris_are_read_from_each_wire_format_once_each() -> None:
    ml_spec = {"trainingInput": {"packageUris": ["gs://b/a.tar.gz", "gs://b/b.tar.gz"]}}
    assert MLV1.package_uris(ml_spec) == ["gs://b/a.tar.gz", "gs://b/b.tar.gz"]
    pool = {"pythonPackageSpec": {"packageUris": ["gs://b/a.tar.gz"]}}
    vertex_spec = {"trialJobSpec": {"workerPoolSpecs": [pool, pool]}}
    assert VERTEX_AI.package_uris(vertex_spec) == ["gs://b/a.tar.gz"]


def test_console_urls_name_each_api_s_page() -> None:
    vertex = VERTEX_AI.console_url(
        "p", "projects/1/locations/europe-west4/customJobs/42", {"region": "europe-west4"}
    )
    assert vertex.startswith("https://console.cloud.google.com/vertex-ai/locations/europe-west4/training/42")
    assert MLV1.console_url("p", "projects/p/jobs/j1", {"job_id": "j1"}).endswith(
        "/ai-platform/jobs/j1?project=p"
    )


def test_a_request_is_built_by_the_backend_it_names() -> None:
    assert _request("vertex") is VERTEX_AI
    assert _request("ai_platform") is MLV1

"""The Model Registry face's own rules, below the HTTP tests: enum numbers, fault routing, the store
on disk, request parsing, list paging, and uploads still importing (the ASGI app in process, no
runner threads, custom containers so that no Cloud Storage is needed)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from airflow_aip.exceptions import ValidationError
from airflow_aip.local.api import create_app
from airflow_aip.local.cli import _refused_arguments, build_parser
from airflow_aip.local.faults.routes import METHODS, api_method
from airflow_aip.local.service import ServiceConfig, TrainingService
from airflow_aip.local.store import project_number
from airflow_aip.local.vertex.models import ModelRegistry
from airflow_aip.local.vertex.models_import import ArtifactsUnreadable, import_error
from airflow_aip.local.vertex.models_query import (
    MODEL_FILTER_FIELDS,
    MODEL_ORDER_FIELDS,
    ListQuery,
    check_upload,
    ordered,
    page,
)
from airflow_aip.local.vertex.models_store import MODEL_ENUM_NUMBERS, ModelStore
from tests.fixtures.tools import need_module

PARENT = "/v1/projects/proj/locations/us-central1"
NUMBER = project_number("proj")
CUSTOM_IMAGE = "us-central1-docker.pkg.dev/proj/serving/server:1"
SKLEARN = "us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-6:latest"
MODEL = {"displayName": "m", "containerSpec": {"imageUri": CUSTOM_IMAGE}, "artifactUri": "gs://bkt/m/"}


def test_model_enum_numbers_are_the_sdks() -> None:
    types = need_module("google.cloud.aiplatform_v1.types.model")
    sdk = {
        "supportedDeploymentResourcesTypes": types.Model.DeploymentResourcesType,
        "modelSourceInfo.sourceType": types.ModelSourceInfo.ModelSourceType,
    }
    for field, enum in sdk.items():
        assert MODEL_ENUM_NUMBERS[field] == {member.name: member.value for member in enum}


@pytest.mark.parametrize(
    ("verb", "path", "method"),
    [
        ("POST", "/v1/projects/p/locations/l/models:upload", "models.upload"),
        ("GET", "/v1/projects/p/locations/l/models", "models.list"),
        ("GET", "/v1/projects/p/locations/l/models/m", "models.get"),
        ("GET", "/v1/projects/p/locations/l/models/m@champion", "models.get"),
        ("GET", "/v1/projects/p/locations/l/models/m:listVersions", "models.listVersions"),
        ("POST", "/v1/projects/p/locations/l/models/m@2:mergeVersionAliases", "models.mergeVersionAliases"),
        ("DELETE", "/v1/projects/p/locations/l/models/m@2:deleteVersion", "models.deleteVersion"),
        ("GET", "/v1/projects/p/locations/l/models/m/operations/123", "models.operations.get"),
        ("GET", "/ui/projects/p/locations/l/models/m/operations/123", "models.operations.get"),
        ("GET", "/v1/projects/p/locations/l/operations/123", "models.operations.get"),
        ("GET", "/v1/projects/p/locations/l/customJobs/1", "customJobs.get"),
    ],
)
def test_fault_routes_name_each_model_method(verb: str, path: str, method: str) -> None:
    assert api_method(verb, path) == method
    assert method in METHODS  # a rule may name it


def _service(tmp_path: Path, seconds: float) -> TrainingService:
    return TrainingService(ServiceConfig(tmp_path / "data", storage_url=None, model_upload_seconds=seconds))


@pytest.fixture
def slow(tmp_path: Path) -> Iterator[TestClient]:
    """An app whose uploads import for an hour: their operations stay pending."""
    service = _service(tmp_path, 3600)
    yield TestClient(create_app(service))
    service.stop()


def test_an_importing_upload_shows_nothing_yet(slow: TestClient) -> None:
    answer = slow.post(f"{PARENT}/models:upload", json={"model": MODEL, "modelId": "pending"})
    assert answer.status_code == 200
    operation = answer.json()
    assert "done" not in operation
    assert "response" not in operation
    assert slow.get(operation["name"].replace("projects/", "/v1/projects/", 1)).json() == operation
    assert slow.get(f"{PARENT}/models/pending").status_code == 404
    assert slow.get(f"{PARENT}/models/pending:listVersions").status_code == 404
    assert slow.get(f"{PARENT}/models").json() == {}
    parent = {"model": MODEL, "parentModel": "projects/proj/locations/us-central1/models/pending"}
    assert slow.post(f"{PARENT}/models:upload", json=parent).status_code == 404
    assert (
        slow.post(f"{PARENT}/models:upload", json={"model": MODEL, "modelId": "pending"}).status_code == 409
    )


def test_a_restarted_service_completes_what_was_importing(tmp_path: Path) -> None:
    service = _service(tmp_path, 3600)
    client = TestClient(create_app(service))
    operation = client.post(f"{PARENT}/models:upload", json={"model": MODEL, "modelId": "later"}).json()
    service.stop()

    again = _service(tmp_path, 0)
    try:
        client = TestClient(create_app(again))
        model = client.get(f"{PARENT}/models/later").json()
        assert (model["versionId"], model["versionAliases"]) == ("1", ["default"])
        done = client.get(f"/ui/{operation['name']}").json()
        assert done["done"] is True
        assert done["response"]["modelVersionId"] == "1"
    finally:
        again.stop()


def test_an_unreadable_artifact_directory_fails_the_import_as_internal(tmp_path: Path) -> None:
    """No Cloud Storage to list (storage_url None): code 13, not the user's INVALID_ARGUMENT."""
    service = _service(tmp_path, 0)
    try:
        prebuilt = {**MODEL, "containerSpec": {"imageUri": SKLEARN}}
        operation = (
            TestClient(create_app(service)).post(f"{PARENT}/models:upload", json={"model": prebuilt}).json()
        )
        assert operation["done"] is True
        assert operation["error"]["code"] == 13
        assert "gs://bkt/m/" in operation["error"]["message"]
    finally:
        service.stop()


def test_import_error_reads_the_listing() -> None:
    prebuilt = {**MODEL, "containerSpec": {"imageUri": SKLEARN}}
    assert import_error(prebuilt, lambda uri: ["model.joblib", "README.md"]) is None
    missing = import_error(prebuilt, lambda uri: ["README.md"])
    assert missing is not None
    assert missing["code"] == 9  # FAILED_PRECONDITION, as Vertex answers

    def unreadable(uri: str) -> list[str]:
        raise ArtifactsUnreadable("down")

    failed = import_error(prebuilt, unreadable)
    assert failed is not None
    assert failed["code"] == 13
    assert import_error(MODEL, unreadable) is None  # a custom container is never looked into


def test_store_records_survive_a_reopen_and_bad_files_are_skipped(tmp_path: Path) -> None:
    store = ModelStore(tmp_path / "models")
    record: dict[str, Any] = {
        "projectNumber": NUMBER,
        "location": "us-central1",
        "modelId": "kept",
        "versions": [{"versionId": "1"}],
        "createTime": "t",
        "updateTime": "t",
        "nextVersion": 2,
    }
    with store.lock:
        store.add_model(record)
    (tmp_path / "models" / NUMBER / "us-central1" / "models" / "torn.json").write_text("{not json")

    reopened = ModelStore(tmp_path / "models")

    with reopened.lock:
        assert [m["modelId"] for m in reopened.models()] == ["kept"]
        assert reopened.model((NUMBER, "us-central1", "kept")) == record
        with pytest.raises(ValidationError):
            reopened.add_model({**record, "modelId": "../escape"})


def test_a_reservation_without_its_operation_is_released(tmp_path: Path) -> None:
    """A crash between reserving a first upload's model ID and storing its operation frees the ID."""
    store = ModelStore(tmp_path / "models")
    orphan = {"projectNumber": NUMBER, "location": "us-central1", "modelId": "orphan", "versions": []}
    with store.lock:
        store.add_model({**orphan, "createTime": "t", "updateTime": "t", "nextVersion": 1})

    ModelRegistry(ModelStore(tmp_path / "models"), 0, lambda uri: [])

    assert ModelStore(tmp_path / "models").models() == []


def test_check_upload_drops_what_the_server_sets() -> None:
    read_back = {
        **MODEL,
        "name": "projects/1/locations/us-central1/models/other",
        "version_id": "7",  # a proto name, as proto3 JSON parsers take it
        "createTime": "2024-01-01T00:00:00Z",
        "supportedDeploymentResourcesTypes": [1, 3],
        "modelSourceInfo": {"sourceType": 2},
        "etag": "abc",
        "versionAliases": ["champion", "champion", "default"],
    }
    upload = check_upload(
        {
            "model": read_back,
            "modelId": "ignored",
            "parentModel": "projects/proj/locations/us-central1/models/m",
        },
        NUMBER,
        "us-central1",
    )
    assert upload.model == MODEL
    assert upload.aliases == ("champion", "default")
    assert (upload.model_id, upload.parent and upload.parent.model_id) == (None, "m")


def test_pages_continue_after_the_last_item_given() -> None:
    items = [(str(i), {"displayName": name}) for i, name in enumerate(["b", "a", "c", "a"])]
    query = ListQuery.parse(
        {"pageSize": "2", "orderBy": "display_name desc"}, MODEL_FILTER_FIELDS, MODEL_ORDER_FIELDS
    )
    chosen = ordered(items, query.order)
    assert [i for i, _ in chosen] == ["2", "0", "1", "3"]  # stable: the two "a" keep their order

    first = page(chosen, query, "models", lambda m: m)
    assert [m["displayName"] for m in first["models"]] == ["c", "b"]
    later = ListQuery.parse(
        {**{"pageSize": "2", "orderBy": "display_name desc"}, "pageToken": first["nextPageToken"]},
        MODEL_FILTER_FIELDS,
        MODEL_ORDER_FIELDS,
    )
    # The last item given ("0") went away: the next page starts where it stood.
    second = page([c for c in chosen if c[0] != "0"], later, "models", lambda m: m)
    assert [m["displayName"] for m in second["models"]] == ["a", "a"]
    assert "nextPageToken" not in second
    with pytest.raises(ValidationError, match="pageToken"):
        page(
            chosen,
            ListQuery.parse({"pageToken": "garbage"}, MODEL_FILTER_FIELDS, MODEL_ORDER_FIELDS),
            "m",
            dict,
        )
    with pytest.raises(ValidationError, match="orderBy"):
        ListQuery.parse({"orderBy": "name"}, MODEL_FILTER_FIELDS, MODEL_ORDER_FIELDS)
    with pytest.raises(ValidationError, match="pageSize"):
        ListQuery.parse({"pageSize": "-1"}, MODEL_FILTER_FIELDS, MODEL_ORDER_FIELDS)


def test_serve_takes_the_upload_time_flag() -> None:
    parser = build_parser()
    assert parser.parse_args(["serve"]).model_upload_seconds == 1.0
    args = parser.parse_args(["serve", "--model-upload-seconds", "0"])
    assert args.model_upload_seconds == 0.0
    assert _refused_arguments(args, loopback=True) is None
    negative = parser.parse_args(["serve", "--model-upload-seconds", "-1"])
    assert "--model-upload-seconds" in str(_refused_arguments(negative, loopback=True))


def test_records_on_disk_are_json_under_the_project_number(tmp_path: Path) -> None:
    service = _service(tmp_path, 0)
    try:
        client = TestClient(create_app(service))
        client.post(f"{PARENT}/models:upload", json={"model": MODEL, "modelId": "ondisk"})
    finally:
        service.stop()
    stored: dict[str, Any] = json.loads(
        (tmp_path / "data" / "models" / NUMBER / "us-central1" / "models" / "ondisk.json").read_text()
    )
    assert [v["versionId"] for v in stored["versions"]] == ["1"]
    assert stored["nextVersion"] == 2
    operations = list((tmp_path / "data" / "models" / NUMBER / "us-central1" / "operations").glob("*.json"))
    assert len(operations) == 1

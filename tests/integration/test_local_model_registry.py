"""The local service's Model Registry through googleapiclient's static ``aiplatform`` v1 client.

The service is a real ``aip-local serve`` (``--model-upload-seconds 0``: an upload's operation is
done in its own answer; ``--fault-admin`` for the lost-answer case); artifacts are real objects
in fake-gcs-server. What is checked is what the discovery document and Google's rules promise: the
operation and Model shapes, the request refusals naming their field, aliases on exactly one
version, the version rules of deleteVersion, lists that filter, order and page, the answer lost
after an upload was applied, and models (and an upload still importing) outliving a restart.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from googleapiclient.errors import HttpError

from airflow_aip.local.storage.gcs import FakeGcsServer
from airflow_aip.local.store import project_number
from tests.fixtures.local_service import LocalService, Restarts, own_service, storage_client
from tests.fixtures.vertex import LOCATION, aiplatform

pytestmark = pytest.mark.integration
SKLEARN = "us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-6:latest"
CUSTOM_IMAGE = "us-central1-docker.pkg.dev/my-project/serving/server:1"
ENUMS_AS_NUMBERS = {"$alt": "json;enum-encoding=int"}


registry = own_service("registry", ["--model-upload-seconds", "0", "--fault-admin"])


@pytest.fixture(scope="module")
def artifacts(fake_gcs: FakeGcsServer) -> str:
    """A bucket of model directories: one good, one empty, one ambiguous, one with the file too deep."""
    bucket = storage_client(fake_gcs.url).create_bucket(f"aip-models-{uuid.uuid4().hex[:8]}")
    for name in (
        "good/model.joblib",
        "none/README.md",
        "two/model.joblib",
        "two/model.pkl",
        "deep/sub/model.joblib",
    ):
        bucket.blob(name).upload_from_string(b"model bytes")
    return str(bucket.name)


@pytest.fixture
def project() -> str:
    return f"models-{uuid.uuid4().hex[:8]}"


def _models(service: LocalService) -> Any:
    return aiplatform(service.url).projects().locations().models()


def _parent(project: str, location: str = LOCATION) -> str:
    return f"projects/{project}/locations/{location}"


def _model(artifacts: str, folder: str = "good", **extra: Any) -> dict[str, Any]:
    body = {
        "displayName": "iris",
        "artifactUri": f"gs://{artifacts}/{folder}/",
        "containerSpec": {"imageUri": SKLEARN},
    }
    return {**body, **extra}


def _upload(service: LocalService, project: str, model: dict[str, Any], **request: Any) -> dict[str, Any]:
    body = {"model": model, **request}
    operation: dict[str, Any] = _models(service).upload(parent=_parent(project), body=body).execute()
    return operation


def _name(project: str, model_id: str) -> str:
    return f"{_parent(project)}/models/{model_id}"


def _versions(service: LocalService, name: str, **params: Any) -> list[tuple[str, list[str]]]:
    listed = _models(service).listVersions(name=name, **params).execute()
    return [(v["versionId"], v.get("versionAliases", [])) for v in listed.get("models", [])]


def _error(call: Callable[[], Any]) -> tuple[int, str, str, str]:
    """(HTTP status, Google status, the field violated or "", the message) of a refused call."""
    with pytest.raises(HttpError) as refused:
        call()
    error = json.loads(refused.value.content)["error"]
    fields = [v["field"] for d in error.get("details", []) for v in d.get("fieldViolations", [])]
    return refused.value.resp.status, error["status"], fields[0] if fields else "", error["message"]


def test_upload_makes_version_one_with_the_default_alias(
    registry: LocalService, artifacts: str, project: str
) -> None:
    model_id = f"iris-{uuid.uuid4().hex[:6]}"
    labels = {"team": "fraud"}
    operation = _upload(registry, project, _model(artifacts, labels=labels), modelId=model_id)

    number = project_number(project)
    name = f"projects/{number}/locations/{LOCATION}/models/{model_id}"
    assert re.fullmatch(rf"{name}/operations/[0-9]{{19}}", operation["name"])
    assert operation["done"] is True
    assert operation["metadata"]["@type"] == (
        "type.googleapis.com/google.cloud.aiplatform.v1.UploadModelOperationMetadata"
    )
    assert set(operation["metadata"]["genericMetadata"]) == {"createTime", "updateTime"}
    assert operation["response"] == {
        "@type": "type.googleapis.com/google.cloud.aiplatform.v1.UploadModelResponse",
        "model": name,
        "modelVersionId": "1",
    }
    models = _models(registry)
    assert models.operations().get(name=operation["name"]).execute() == operation
    location_op = f"{_parent(project)}/operations/{operation['name'].rsplit('/', 1)[1]}"
    read = aiplatform(registry.url).projects().locations().operations().get(name=location_op).execute()
    assert read == operation

    model = models.get(name=_name(project, model_id)).execute()
    assert model["name"] == name  # the project number, and no "@"
    assert (model["versionId"], model["versionAliases"]) == ("1", ["default"])
    assert model["displayName"] == "iris"
    assert model["labels"] == labels
    assert model["artifactUri"] == f"gs://{artifacts}/good/"
    assert model["containerSpec"] == {"imageUri": SKLEARN}
    assert model["modelSourceInfo"] == {"sourceType": "CUSTOM"}
    assert model["supportedDeploymentResourcesTypes"] == ["DEDICATED_RESOURCES", "SHARED_RESOURCES"]
    assert "jsonl" in model["supportedInputStorageFormats"]
    assert "jsonl" in model["supportedOutputStorageFormats"]
    assert model["createTime"] == model["versionCreateTime"] <= model["versionUpdateTime"]
    assert model["etag"]
    assert models.get(name=_name(project, model_id) + "@1").execute() == model
    assert models.get(name=_name(project, model_id) + "@default").execute() == model


def test_enums_go_out_as_numbers_when_asked(registry: LocalService, artifacts: str, project: str) -> None:
    """``$alt=json;enum-encoding=int`` (the SDK's REST transport sends it): the Model's enums by number."""
    operation = _upload(registry, project, _model(artifacts))
    url = f"{registry.url}v1/{operation['response']['model']}"
    model = httpx.get(url, params=ENUMS_AS_NUMBERS, timeout=30).raise_for_status().json()
    assert model["supportedDeploymentResourcesTypes"] == [1, 3]
    assert model["modelSourceInfo"] == {"sourceType": 2}
    named = httpx.get(url, timeout=30).raise_for_status().json()
    assert named["modelSourceInfo"] == {"sourceType": "CUSTOM"}


def test_a_model_read_back_uploads_again_without_its_output_only_fields(
    registry: LocalService, artifacts: str, project: str
) -> None:
    first = _upload(registry, project, _model(artifacts), modelId="roundtrip")
    url = f"{registry.url}v1/{first['response']['model']}"
    read = httpx.get(url, params=ENUMS_AS_NUMBERS, timeout=30).raise_for_status().json()
    read["versionDescription"] = "again"

    second = _upload(registry, project, read, parentModel=_name(project, "roundtrip"))

    assert second["response"]["modelVersionId"] == "2"
    again = _models(registry).get(name=_name(project, "roundtrip") + "@2").execute()
    assert again["versionDescription"] == "again"
    assert again["versionAliases"] == ["default"]  # it was in what was read back: the default moved
    assert again["versionCreateTime"] > read["versionCreateTime"]


def test_without_model_id_the_server_assigns_nineteen_digits(
    registry: LocalService, artifacts: str, project: str
) -> None:
    operation = _upload(registry, project, _model(artifacts))
    model_id = operation["response"]["model"].rsplit("/", 1)[1]
    assert re.fullmatch(r"[1-9][0-9]{18}", model_id)
    assert _versions(registry, _name(project, model_id)) == [("1", ["default"])]


def _long_name(model: dict[str, Any]) -> None:
    model["displayName"] = "x" * 129


REFUSED: list[tuple[str, Callable[[dict[str, Any]], Any], dict[str, Any], str]] = [
    ("no display name", lambda m: m.pop("displayName"), {}, "model.displayName"),
    ("display name too long", _long_name, {}, "model.displayName"),
    ("no container", lambda m: m.pop("containerSpec"), {}, "model.containerSpec.imageUri"),
    ("local artifact path", lambda m: m.update(artifactUri="/tmp/model"), {}, "model.artifactUri"),
    ("pre-built without artifacts", lambda m: m.pop("artifactUri"), {}, "model.artifactUri"),
    ("label key", lambda m: m.update(labels={"Team": "x"}), {}, "model.labels.Team"),
    ("alias like a version", lambda m: m.update(versionAliases=["2nd"]), {}, "model.versionAliases[0]"),
    ("unknown field", lambda m: m.update(colour="red"), {}, "model.colour"),
    ("model id", lambda m: None, {"modelId": "9lives"}, "modelId"),
    (
        "parent elsewhere",
        lambda m: None,
        {"parentModel": "projects/p/locations/europe-west4/models/m"},
        "parentModel",
    ),
    ("parent version", lambda m: None, {"parentModel": "{parent}/models/m@1"}, "parentModel"),
]


@pytest.mark.parametrize(
    ("change", "request_fields", "field"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED]
)
def test_bad_uploads_are_refused_naming_the_field(
    registry: LocalService,
    artifacts: str,
    project: str,
    change: Callable[[dict[str, Any]], Any],
    request_fields: dict[str, Any],
    field: str,
) -> None:
    model = _model(artifacts)
    change(model)
    fields = {k: v.replace("{parent}", _parent(project)) for k, v in request_fields.items()}
    status, code, violated, _ = _error(lambda: _upload(registry, project, model, **fields))
    assert (status, code, violated) == (400, "INVALID_ARGUMENT", field)
    assert _models(registry).list(parent=_parent(project)).execute() == {}  # nothing was made


def test_parent_of_another_project_is_refused(registry: LocalService, artifacts: str, project: str) -> None:
    other = f"projects/another-{project}/locations/{LOCATION}/models/m"
    status, code, field, _ = _error(lambda: _upload(registry, project, _model(artifacts), parentModel=other))
    assert (status, code, field) == (400, "INVALID_ARGUMENT", "parentModel")


def test_missing_parent_is_404_and_a_taken_model_id_409(
    registry: LocalService, artifacts: str, project: str
) -> None:
    missing = _error(
        lambda: _upload(registry, project, _model(artifacts), parentModel=_name(project, "nope"))
    )
    assert missing[:2] == (404, "NOT_FOUND")
    _upload(registry, project, _model(artifacts), modelId="taken")
    taken = _error(lambda: _upload(registry, project, _model(artifacts), modelId="taken"))
    assert taken[:2] == (409, "ALREADY_EXISTS")
    assert _versions(registry, _name(project, "taken")) == [("1", ["default"])]


@pytest.mark.parametrize(
    ("folder", "says"),
    [
        ("none", "is expected to contain exactly one of: [model.joblib, model.pkl]"),
        ("two", "contains more than one of"),
        ("deep", "is expected to contain exactly one of"),  # only directly below artifactUri counts
    ],
)
def test_import_fails_without_exactly_one_model_file(
    registry: LocalService, artifacts: str, project: str, folder: str, says: str
) -> None:
    operation = _upload(registry, project, _model(artifacts, folder), modelId="broken")

    assert operation["done"] is True
    assert operation["error"]["code"] == 9  # FAILED_PRECONDITION, as Vertex answers
    assert says in operation["error"]["message"]
    assert "response" not in operation
    assert _error(lambda: _models(registry).get(name=_name(project, "broken")).execute())[:2] == (
        404,
        "NOT_FOUND",
    )
    # The failed import made nothing: its model ID is free for the corrected upload.
    fixed = _upload(registry, project, _model(artifacts), modelId="broken")
    assert fixed["response"]["modelVersionId"] == "1"


def test_custom_containers_are_not_looked_into(registry: LocalService, artifacts: str, project: str) -> None:
    model = _model(
        artifacts, "none", containerSpec={"imageUri": CUSTOM_IMAGE, "ports": [{"containerPort": 8080}]}
    )
    operation = _upload(registry, project, model)
    assert operation["response"]["modelVersionId"] == "1"
    shown = _models(registry).get(name=operation["response"]["model"]).execute()
    assert shown["containerSpec"]["ports"] == [{"containerPort": 8080}]


def test_aliases_given_at_upload_move_to_the_new_version(
    registry: LocalService, artifacts: str, project: str
) -> None:
    name = _name(project, "moving")
    _upload(registry, project, _model(artifacts), modelId="moving")
    _upload(registry, project, _model(artifacts, versionAliases=["champion"]), parentModel=name)
    assert _versions(registry, name) == [("1", ["default"]), ("2", ["champion"])]

    _upload(registry, project, _model(artifacts, versionAliases=["champion", "default"]), parentModel=name)

    assert _versions(registry, name) == [("1", []), ("2", []), ("3", ["champion", "default"])]
    assert _models(registry).get(name=name).execute()["versionId"] == "3"


def test_list_models_filters_orders_and_pages(registry: LocalService, artifacts: str, project: str) -> None:
    made = {}
    for display, team in (("b-model", "x"), ("a-model", "y"), ("c-model", "x")):
        operation = _upload(registry, project, _model(artifacts, displayName=display, labels={"team": team}))
        made[display] = operation["response"]["model"].rsplit("/", 1)[1]
    # A second version of a-model: lists show each model's default version once.
    _upload(
        registry,
        project,
        _model(artifacts, displayName="a-model"),
        parentModel=_name(project, made["a-model"]),
    )
    models = _models(registry)

    def names(**params: Any) -> list[str]:
        listed = models.list(parent=_parent(project), **params).execute()
        return [m["displayName"] for m in listed.get("models", [])]

    assert names() == ["b-model", "a-model", "c-model"]  # oldest first
    assert names(orderBy="display_name") == ["a-model", "b-model", "c-model"]
    assert names(orderBy="displayName desc") == ["c-model", "b-model", "a-model"]
    assert names(filter='labels.team="x"', orderBy="display_name") == ["b-model", "c-model"]
    assert names(filter="labels.team:*", orderBy="display_name") == ["a-model", "b-model", "c-model"]
    assert names(filter='display_name="a-model"') == ["a-model"]
    assert names(filter=f"model={made['c-model']}") == ["c-model"]
    assert names(filter=f'model!="{made["c-model"]}"') == ["b-model", "a-model"]
    only = models.list(parent=_parent(project), filter=f"model={made['a-model']}").execute()["models"]
    assert [m["versionId"] for m in only] == ["1"]  # still the default: version 2 took no alias

    pages, request = [], models.list(parent=_parent(project), pageSize=2, orderBy="display_name desc")
    while request is not None:
        page = request.execute()
        pages.append([m["displayName"] for m in page["models"]])
        request = models.list_next(request, page)
    assert pages == [["c-model", "b-model"], ["a-model"]]

    masked = models.list(parent=_parent(project), readMask="name,display_name", pageSize=1).execute()
    assert set(masked["models"][0]) == {"name", "displayName"}
    assert _error(lambda: models.list(parent=_parent(project), filter='state="x"').execute())[2] == "filter"
    stale = masked["nextPageToken"]
    other = models.list(parent=_parent(project), orderBy="create_time", pageToken=stale)
    assert _error(other.execute)[2] == "pageToken"


def test_list_versions_filters_orders_and_pages(registry: LocalService, artifacts: str, project: str) -> None:
    name = _name(project, "versions")
    _upload(registry, project, _model(artifacts, labels={"stage": "a"}), modelId="versions")
    for stage in ("b", "b"):
        _upload(registry, project, _model(artifacts, labels={"stage": stage}), parentModel=name)
    _upload(registry, project, _model(artifacts), parentModel=name)

    def ids(**params: Any) -> list[str]:
        return [version for version, _ in _versions(registry, name, **params)]

    assert ids() == ["1", "2", "3", "4"]
    assert ids(filter='labels.stage="b"') == ["2", "3"]
    assert ids(filter="labels.stage:*") == ["1", "2", "3"]
    assert ids(orderBy="create_time desc") == ["4", "3", "2", "1"]
    models, pages = _models(registry), []
    request = models.listVersions(name=name, pageSize=3)
    while request is not None:
        page = request.execute()
        pages.append([m["versionId"] for m in page["models"]])
        request = models.listVersions_next(request, page)
    assert pages == [["1", "2", "3"], ["4"]]
    assert _error(lambda: _versions(registry, _name(project, "nope")))[:2] == (404, "NOT_FOUND")
    assert _error(lambda: _versions(registry, name, orderBy="display_name"))[2] == "orderBy"


def test_merge_version_aliases_moves_each_alias(registry: LocalService, artifacts: str, project: str) -> None:
    name = _name(project, "merged")
    _upload(registry, project, _model(artifacts), modelId="merged")
    _upload(registry, project, _model(artifacts, versionAliases=["champion"]), parentModel=name)
    models = _models(registry)

    def merge(version: str, aliases: list[str]) -> dict[str, Any]:
        body = {"versionAliases": aliases}
        answer: dict[str, Any] = models.mergeVersionAliases(name=f"{name}@{version}", body=body).execute()
        return answer

    moved = merge("1", ["champion", "golden"])
    assert (moved["versionId"], moved["versionAliases"]) == ("1", ["default", "champion", "golden"])
    assert _versions(registry, name) == [("1", ["default", "champion", "golden"]), ("2", [])]
    assert merge("champion", ["-golden"])["versionAliases"] == ["default", "champion"]  # by alias too
    assert merge("2", ["default"])["versionAliases"] == ["default"]
    assert _versions(registry, name) == [("1", ["champion"]), ("2", ["default"])]
    assert merge("2", ["staging", "-staging"])["versionAliases"] == ["default"]  # they cancel out

    status, _, field, message = _error(lambda: merge("2", ["-default"]))
    assert (status, field) == (400, "versionAliases")
    assert "default" in message
    assert (
        _error(lambda: models.mergeVersionAliases(name=name, body={"versionAliases": ["x1"]}).execute())[2]
        == "name"
    )
    assert _error(lambda: merge("1", []))[2] == "versionAliases"
    assert _error(lambda: merge("1", ["Bad"]))[2] == "versionAliases[0]"
    assert _error(lambda: merge("7", ["x1"]))[:2] == (404, "NOT_FOUND")
    assert _versions(registry, name) == [("1", ["champion"]), ("2", ["default"])]


def test_delete_version_keeps_the_default_and_the_last_version(
    registry: LocalService, artifacts: str, project: str
) -> None:
    name = _name(project, "deleting")
    _upload(registry, project, _model(artifacts), modelId="deleting")
    models = _models(registry)
    only = _error(lambda: models.deleteVersion(name=f"{name}@1").execute())
    assert only[:2] == (400, "FAILED_PRECONDITION")
    assert "DeleteModel" in only[3]
    _upload(registry, project, _model(artifacts, versionAliases=["champion"]), parentModel=name)
    default = _error(lambda: models.deleteVersion(name=f"{name}@default").execute())
    assert default[:2] == (400, "FAILED_PRECONDITION")
    assert "default" in default[3]

    operation = models.deleteVersion(name=f"{name}@champion").execute()

    assert operation["done"] is True
    assert operation["response"] == {"@type": "type.googleapis.com/google.protobuf.Empty"}
    assert models.operations().get(name=operation["name"]).execute() == operation
    assert _versions(registry, name) == [("1", ["default"])]
    assert _error(lambda: models.get(name=f"{name}@2").execute())[:2] == (404, "NOT_FOUND")
    again = _upload(registry, project, _model(artifacts), parentModel=name)
    assert again["response"]["modelVersionId"] == "3"  # a version ID is never given twice


def test_an_upload_whose_answer_is_lost_made_one_version(
    registry: LocalService, artifacts: str, project: str
) -> None:
    rule = {"method": "models.upload", "when": "after", "kind": 500}
    registry.admin("_faults", rule, "POST")

    with pytest.raises(HttpError) as lost:
        _upload(registry, project, _model(artifacts), modelId="lost")

    assert lost.value.resp.status == 500
    assert registry.admin("_stats")["rules"] == []  # the fault was injected
    assert _versions(registry, _name(project, "lost")) == [("1", ["default"])]
    # Sending it again cannot make a second model: its ID is taken.
    assert _error(lambda: _upload(registry, project, _model(artifacts), modelId="lost"))[0] == 409
    assert _versions(registry, _name(project, "lost")) == [("1", ["default"])]


def test_the_console_lists_models_and_their_versions(
    registry: LocalService, artifacts: str, project: str
) -> None:
    name = _name(project, "shown")
    _upload(
        registry, project, _model(artifacts, displayName="shown-iris", labels={"team": "t1"}), modelId="shown"
    )
    _upload(registry, project, _model(artifacts, versionAliases=["champion"]), parentModel=name)

    # the console lets names wrap at "-" and "_" (<wbr>): the text is read without them
    index = httpx.get(registry.url + "console/", timeout=30).raise_for_status().text.replace("<wbr>", "")
    number_name = f"projects/{project_number(project)}/locations/{LOCATION}/models/shown"
    assert f'href="/console/{number_name}">shown-iris</a>' in index
    assert "<td>champion</td>" in index
    assert "team=t1" in index
    page = httpx.get(registry.url + "console/" + number_name, timeout=30)
    assert page.status_code == 200
    assert "Versions (2)" in page.text
    assert f"gs://{artifacts}/good/" in page.text
    missing = httpx.get(registry.url + f"console/{_parent(project)}/models/nothing", timeout=30)
    assert missing.status_code == 404


def _start(restarts: Restarts, data_dir: Path, fake_gcs: FakeGcsServer, seconds: str) -> LocalService:
    """A service on ``data_dir`` whose model imports take ``seconds``."""
    return restarts.start(data_dir, fake_gcs.url, extra_args=["--model-upload-seconds", seconds])


def test_models_and_an_importing_upload_outlive_a_restart(
    restarts: Restarts, fake_gcs: FakeGcsServer, artifacts: str, project: str, tmp_path: Path
) -> None:
    name = _name(project, "kept")
    first = _start(restarts, tmp_path / "data", fake_gcs, "0")
    _upload(first, project, _model(artifacts), modelId="kept")
    _upload(first, project, _model(artifacts, versionAliases=["champion"]), parentModel=name)
    first.stop()

    # An import that takes an hour: its version and its new model stay invisible until it is done.
    slow = _start(restarts, tmp_path / "data", fake_gcs, "3600")
    assert _versions(slow, name) == [("1", ["default"]), ("2", ["champion"])]
    third = _upload(slow, project, _model(artifacts, versionAliases=["champion"]), parentModel=name)
    fresh = _upload(slow, project, _model(artifacts), modelId="fresh")
    assert "done" not in third
    assert "done" not in _models(slow).operations().get(name=fresh["name"]).execute()
    assert _versions(slow, name) == [("1", ["default"]), ("2", ["champion"])]
    assert _error(lambda: _models(slow).get(name=_name(project, "fresh")).execute())[:2] == (404, "NOT_FOUND")
    assert _error(lambda: _upload(slow, project, _model(artifacts), modelId="fresh"))[0] == 409
    slow.stop()

    # Restarted with no import time: the first read completes both.
    quick = _start(restarts, tmp_path / "data", fake_gcs, "0")
    done = _models(quick).operations().get(name=third["name"]).execute()
    assert done["done"] is True
    assert done["response"]["modelVersionId"] == "3"
    assert _versions(quick, name) == [("1", ["default"]), ("2", []), ("3", ["champion"])]
    assert _models(quick).get(name=_name(project, "fresh")).execute()["versionAliases"] == ["default"]

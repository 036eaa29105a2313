"""``trainingPipelines.list`` and ``.delete`` through the real ASGI app (no runner threads, so a
pipeline stays QUEUED until a test cancels it).

The filter fields and operators are aiplatform.v1.json's for this method; pages run newest first;
deleting an unfinished pipeline is a FAILED_PRECONDITION, and the delete answers an operation.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.fixtures.pipelines import PIPELINES, pipeline_body


def _create(client: TestClient, name: str, **labels: str) -> dict[str, Any]:
    response = client.post(PIPELINES, json=pipeline_body(displayName=name, labels=labels))
    assert response.status_code == 200, response.text
    created: dict[str, Any] = response.json()
    return created


def _names(page: dict[str, Any]) -> list[str]:
    return [p["displayName"] for p in page.get("trainingPipelines", [])]


def test_the_list_is_newest_first_in_pages(client: TestClient) -> None:
    for name in ("first", "second", "third"):
        _create(client, name)

    page = client.get(PIPELINES, params={"pageSize": 2}).json()
    assert _names(page) == ["third", "second"]
    rest = client.get(PIPELINES, params={"pageSize": 2, "pageToken": page["nextPageToken"]}).json()
    assert _names(rest) == ["first"]
    assert "nextPageToken" not in rest
    assert client.get(PIPELINES, params={"pageToken": "nonsense"}).status_code == 400


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('display_name="b?c"', []),  # "?" is no wildcard
        ('display_name:"a*"', ["abc"]),
        ("labels.team=fraud", ["abc"]),
        ("labels.team:*", ["abc"]),
        ('state="PIPELINE_STATE_QUEUED" AND NOT display_name="abc"', ["xyz"]),
        ('training_task_definition:"*custom_task*"', ["xyz", "abc"]),
        ('create_time>"2000-01-01T00:00:00Z"', ["xyz", "abc"]),
    ],
)
def test_the_filter_takes_the_documented_fields(client: TestClient, text: str, expected: list[str]) -> None:
    _create(client, "abc", team="fraud")
    _create(client, "xyz")
    response = client.get(PIPELINES, params={"filter": text})
    assert response.status_code == 200, response.text
    assert _names(response.json()) == expected


@pytest.mark.parametrize("text", ['state="JOB_STATE_QUEUED"', 'model_to_upload="m"', 'labels.team:"fraud"'])
def test_a_filter_google_refuses_is_a_400(client: TestClient, text: str) -> None:
    response = client.get(PIPELINES, params={"filter": text})
    assert response.status_code == 400
    assert response.json()["error"]["status"] == "INVALID_ARGUMENT"


def test_the_read_mask_keeps_only_the_named_fields(client: TestClient) -> None:
    _create(client, "abc")
    listed = client.get(PIPELINES, params={"readMask": "name,display_name"}).json()["trainingPipelines"]
    assert set(listed[0]) == {"name", "displayName"}


def test_a_running_pipeline_cannot_be_deleted(client: TestClient) -> None:
    created = _create(client, "busy")
    response = client.delete(f"/v1/{created['name']}")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["status"] == "FAILED_PRECONDITION"
    assert f'The TrainingPipeline "{created["name"]}" is in state PIPELINE_STATE_QUEUED' in error["message"]
    assert client.get(f"/v1/{created['name']}").status_code == 200


def test_a_finished_pipeline_is_deleted_by_a_done_operation(client: TestClient) -> None:
    created = _create(client, "done")
    keep = _create(client, "kept")
    assert client.post(f"/v1/{created['name']}:cancel", json={}).status_code == 200
    assert client.get(f"/v1/{created['name']}").json()["state"] == "PIPELINE_STATE_CANCELLED"

    operation = client.delete(f"/v1/{created['name']}").json()

    assert operation["done"] is True
    assert operation["name"].startswith(f"{created['name']}/operations/")
    assert operation["metadata"]["@type"].endswith("DeleteOperationMetadata")
    assert client.get(f"/v1/{created['name']}").status_code == 404
    assert _names(client.get(PIPELINES).json()) == ["kept"]
    backing = created["trainingTaskMetadata"]["backingCustomJob"]
    assert client.get(f"/v1/{backing}").status_code == 200  # the backing CustomJob stays
    assert client.delete(f"/v1/{created['name']}").status_code == 404
    assert client.get(f"/v1/{keep['name']}").status_code == 200


def test_cancelling_a_finished_pipeline_uses_google_s_words(client: TestClient) -> None:
    created = _create(client, "twice")
    client.post(f"/v1/{created['name']}:cancel", json={})
    client.get(f"/v1/{created['name']}")
    error = client.post(f"/v1/{created['name']}:cancel", json={}).json()["error"]
    assert error["status"] == "FAILED_PRECONDITION"
    state = "PIPELINE_STATE_CANCELLED"
    assert (
        error["message"]
        == f'The TrainingPipeline "{created["name"]}" is in state {state} and cannot be canceled.'
    )

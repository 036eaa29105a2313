"""Google's Vertex AI SDK deleting and updating models of the local Model Registry.

``Model.delete()`` (a long-running operation the SDK waits for), ``Model.update(...)`` (a
``models.patch`` with an ``updateMask``), a TensorFlow model saved as ``saved_model.pbtxt``,
and ``listVersions`` names carrying ``@versionId``: what test teardown code and migration code
call first, through a client nobody here wrote.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tests.fixtures.tools import need_module

pytestmark = pytest.mark.integration
aiplatform = need_module("google.cloud.aiplatform")
SKLEARN = "us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-6:latest"
TF = "us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15:latest"


def _upload(world: SimpleNamespace, parent: str | None = None) -> Any:
    return world.sdk.Model.upload(
        display_name="iris",
        artifact_uri=world.model_dir,
        serving_container_image_uri=SKLEARN,
        model_id=None if parent else world.model_id,
        parent_model=parent,
        is_default_version=parent is None,
        labels={"team": "fraud"},
    )


def test_sdk_deletes_a_model_with_every_version(world: SimpleNamespace) -> None:
    from google.api_core.exceptions import NotFound

    first = _upload(world)
    _upload(world, first.resource_name)

    world.sdk.Model(first.resource_name).delete()

    with pytest.raises(NotFound):
        world.sdk.Model(first.resource_name)
    with pytest.raises(NotFound):
        world.sdk.Model(first.resource_name, version="2")
    assert list(world.sdk.Model.list(filter=f'model="{world.model_id}"')) == []
    again = _upload(world)  # the ID is free again, and the new model starts at version 1
    assert (again.resource_name, again.version_id) == (first.resource_name, "1")


def test_sdk_updates_the_model_on_every_version(world: SimpleNamespace) -> None:
    first = _upload(world)
    _upload(world, first.resource_name)

    updated = first.update(
        display_name="iris-v2", description="the iris classifier", labels={"stage": "prod"}
    )

    assert (updated.display_name, updated.description) == ("iris-v2", "the iris classifier")
    second = world.sdk.Model(first.resource_name, version="2")
    assert (second.display_name, second.description) == ("iris-v2", "the iris classifier")
    assert second.labels == {"team": "fraud", "stage": "prod"}  # the model's labels over the version's


def test_sdk_patch_of_a_version_field_on_the_model_is_a_failed_precondition(world: SimpleNamespace) -> None:
    from google.api_core.exceptions import BadRequest
    from google.cloud.aiplatform_v1.types import Model

    first = _upload(world)
    client = first.api_client
    # The REST transport raises by HTTP status (400: BadRequest); the body names Google's status.
    with pytest.raises(BadRequest, match="versionDescription is a field of a version") as refused:
        client.update_model(
            model=Model(name=first.resource_name, version_description="nope"),
            update_mask={"paths": ["version_description"]},
        )
    assert refused.value.response.json()["error"]["status"] == "FAILED_PRECONDITION"

    client.update_model(
        model=Model(name=f"{first.resource_name}@1", version_description="the first"),
        update_mask={"paths": ["version_description"]},
    )
    assert world.sdk.Model(first.resource_name, version="1").version_description == "the first"


def test_sdk_lists_versions_by_their_versioned_names(world: SimpleNamespace) -> None:
    first = _upload(world)
    _upload(world, first.resource_name)
    client = first.api_client

    names = [m.name for m in client.list_model_versions(name=first.resource_name)]

    assert names == [f"{first.resource_name}@1", f"{first.resource_name}@2"]
    versions = world.sdk.models.ModelRegistry(first.resource_name).list_versions()
    assert [(v.version_id, v.model_resource_name) for v in versions] == [
        ("1", first.resource_name),
        ("2", first.resource_name),
    ]


def test_sdk_imports_a_tensorflow_model_saved_as_text(world: SimpleNamespace) -> None:
    model = world.sdk.Model.upload(
        display_name="tf-text", artifact_uri=world.tf_dir, serving_container_image_uri=TF
    )
    assert (model.version_id, model.uri) == ("1", world.tf_dir)


def test_sdk_update_version_changes_that_versions_description_and_labels(world: SimpleNamespace) -> None:
    first = _upload(world)
    _upload(world, first.resource_name)
    registry = world.sdk.models.ModelRegistry(first.resource_name)

    registry.update_version("2", version_description="the challenger", labels={"stage": "canary"})

    second = world.sdk.Model(first.resource_name, version="2")
    assert (second.version_description, second.labels) == ("the challenger", {"stage": "canary"})
    assert world.sdk.Model(first.resource_name, version="1").labels == {"team": "fraud"}

"""Google's own Vertex AI SDK (google-cloud-aiplatform, REST transport) on the local Model Registry.

Nobody here wrote that client: if ``Model.upload`` (which polls the upload's operation until the
import is done: the session's service imports for its default second), ``Model``,
``ModelRegistry`` and its alias and version calls work, Google's other clients will too. The
service is the session's ``aip-local serve``; artifacts are objects in fake-gcs-server.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from tests.fixtures.tools import need_module

pytestmark = pytest.mark.integration
aiplatform = need_module("google.cloud.aiplatform")
SKLEARN = "us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-6:latest"


def _first(world: SimpleNamespace) -> Any:
    return world.sdk.Model.upload(
        display_name="iris",
        artifact_uri=world.model_dir,
        serving_container_image_uri=SKLEARN,
        model_id=world.model_id,
        labels={"team": "fraud"},
    )


def _second(world: SimpleNamespace, parent: str) -> Any:
    return world.sdk.Model.upload(
        display_name="iris",
        artifact_uri=world.model_dir,
        serving_container_image_uri=SKLEARN,
        parent_model=parent,
        version_aliases=["champion"],
        is_default_version=False,
        version_description="the challenger",
    )


def _aliases(registry: Any) -> dict[str, list[str]]:
    return {v.version_id: list(v.version_aliases) for v in registry.list_versions()}


def test_sdk_uploads_versions_and_reads_them_by_alias(world: SimpleNamespace) -> None:
    first = _first(world)
    assert first.resource_name.endswith(f"/models/{world.model_id}")
    assert (first.version_id, list(first.version_aliases)) == ("1", ["default"])
    assert first.display_name == "iris"
    assert first.labels == {"team": "fraud"}
    assert first.uri == world.model_dir

    second = _second(world, first.resource_name)

    assert second.resource_name == first.resource_name
    assert (second.version_id, list(second.version_aliases)) == ("2", ["champion"])
    champion = world.sdk.Model(f"{first.resource_name}@champion")
    assert (champion.version_id, champion.version_description) == ("2", "the challenger")
    assert world.sdk.Model(first.resource_name).version_id == "1"  # still the default
    assert world.sdk.Model(first.resource_name, version="2").version_id == "2"
    listed = world.sdk.Model.list(filter=f'display_name="iris" AND model="{world.model_id}"')
    assert [(m.resource_name, m.version_id) for m in listed] == [(first.resource_name, "1")]


def test_sdk_model_registry_moves_removes_and_deletes(world: SimpleNamespace) -> None:
    first = _first(world)
    _second(world, first.resource_name)
    registry = world.sdk.models.ModelRegistry(first.resource_name)
    assert _aliases(registry) == {"1": ["default"], "2": ["champion"]}
    info = registry.get_version_info("2")
    assert (info.version_id, list(info.version_aliases)) == ("2", ["champion"])
    assert info.model_resource_name == first.resource_name
    assert info.version_create_time > registry.get_version_info("1").version_create_time

    registry.add_version_aliases(["champion"], version="1")
    assert _aliases(registry) == {"1": ["default", "champion"], "2": []}
    registry.remove_version_aliases(["champion"], version="1")
    assert _aliases(registry) == {"1": ["default"], "2": []}
    registry.delete_version("2")
    assert _aliases(registry) == {"1": ["default"]}
    assert registry.get_model().version_id == "1"


def test_sdk_upload_without_the_model_file_fails_with_the_reason(world: SimpleNamespace) -> None:
    from google.api_core.exceptions import FailedPrecondition

    with pytest.raises(FailedPrecondition, match=r"exactly one of: \[model.joblib, model.pkl\]"):
        world.sdk.Model.upload(
            display_name="no-file",
            artifact_uri=world.empty_dir,
            serving_container_image_uri=SKLEARN,
            model_id=world.model_id,
        )
    assert list(world.sdk.Model.list(filter=f'model="{world.model_id}"')) == []


def test_sdk_racing_merges_leave_an_alias_on_one_version(world: SimpleNamespace) -> None:
    first = _first(world)
    _second(world, first.resource_name)
    registry = world.sdk.models.ModelRegistry(first.resource_name)
    errors: list[BaseException] = []

    for round_number in range(5):
        alias = f"race{round_number}"
        barrier = threading.Barrier(2)

        def merge(version: str, alias: str = alias, barrier: threading.Barrier = barrier) -> None:
            try:
                barrier.wait()
                registry.add_version_aliases([alias], version=version)
            except BaseException as exc:  # reported below, not lost in the thread
                errors.append(exc)

        threads = [threading.Thread(target=merge, args=(version,)) for version in ("1", "2")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        holders = [version for version, aliases in _aliases(registry).items() if alias in aliases]
        assert len(holders) == 1, holders
    assert errors == []

"""The ``models.patch`` rule: the name's scope decides which ``updateMask`` fields may change."""

from __future__ import annotations

import pytest

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.vertex.models_update import UpdateScopeError, model_update


@pytest.mark.parametrize("version", [None, "-"])
def test_a_name_without_a_version_updates_the_model(version: str | None) -> None:
    update = model_update("display_name,description,labels", version)
    assert (update.fields, update.of_version) == (("displayName", "description", "labels"), False)


def test_a_versioned_name_updates_that_version() -> None:
    update = model_update(["versionDescription", "labels"], "2")
    assert (update.fields, update.of_version) == (("versionDescription", "labels"), True)


@pytest.mark.parametrize(
    ("mask", "version", "says"),
    [
        ("version_description", None, "versionDescription is a field of a version"),
        ("displayName", "champion", "displayName is a field of the model"),
        ("displayName,versionDescription", "1", "displayName is a field of the model"),
    ],
)
def test_a_field_of_the_other_scope_is_a_precondition_error(
    mask: str, version: str | None, says: str
) -> None:
    with pytest.raises(UpdateScopeError, match=says):
        model_update(mask, version)


@pytest.mark.parametrize(
    ("mask", "says"), [(None, "is required"), ("", "is required"), ("artifactUri", "cannot")]
)
def test_a_missing_mask_or_an_unupdatable_field_is_invalid(mask: str | None, says: str) -> None:
    with pytest.raises(ValidationError, match=says) as refused:
        model_update(mask, None)
    assert refused.value.field == "updateMask"


def test_a_bare_name_with_the_bodys_version_id_updates_that_version() -> None:
    """What the SDK's ModelRegistry.update_version sends; a labels-only mask stays the model's."""
    update = model_update("version_description,labels", None, body_version="2")
    assert (update.of_version, update.version) == (True, "2")
    assert model_update("labels", None, body_version="2").of_version is False

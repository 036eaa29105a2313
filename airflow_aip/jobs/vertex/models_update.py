"""What a ``models.patch`` may change, as ``UpdateModelRequest`` (model_service.proto) states it.

The name decides the scope: ``models/123@1`` updates that version, ``models/123`` or
``models/123@-`` the model. "Supported model fields: display_name, description; supported
version-specific fields: version_description. Labels are supported in both scenarios. Both the
model labels and the version labels are merged when a model is returned." "A model name or model
version name fields update mismatch will cause a precondition error", and "one request cannot
update both the model and the version fields". ``updateMask`` is required.

One reading beyond the proto: the SDK's ``ModelRegistry.update_version`` sends the bare name with
the version's own ``versionId`` and a ``version_description`` mask. A bare name whose body names
a ``versionId``, with a mask of version fields only (``versionDescription`` among them), updates
that version here. [U] unverified: whether Vertex reads the body's ``versionId`` so, or answers
the precondition error.

Pure: the local service applies the result, and a test or a hook can ask the same question.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from airflow_aip.exceptions import ValidationError

MODEL_FIELDS = ("displayName", "description", "labels")
VERSION_FIELDS = ("versionDescription", "labels")
MODEL_SCOPE_VERSIONS = (None, "-")  # the version part of a name that updates the model itself


class UpdateScopeError(ValueError):
    """A field of the other scope in the mask: Google's precondition error (rule 5 of the proto)."""


@dataclass(frozen=True)
class ModelUpdate:
    """The checked fields of one patch, camelCase, and whether it updates a version or the model."""

    fields: tuple[str, ...]
    of_version: bool
    version: str | None = None  # the version a bare name's body named (the SDK's update_version)


def _camel(path: str) -> str:
    return re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), path.strip())


def model_update(
    update_mask: str | Sequence[str] | None, version: str | None, body_version: str | None = None
) -> ModelUpdate:
    """The fields ``update_mask`` names (snake_case or camelCase), checked against the name's scope.

    Raises ValidationError for a missing mask or a field no update changes, UpdateScopeError for a
    field of the other scope.
    """
    paths = update_mask.split(",") if isinstance(update_mask, str) else list(update_mask or [])
    fields = tuple(dict.fromkeys(_camel(p) for p in paths if p.strip()))
    if not fields:
        raise ValidationError("updateMask", "is required: name the fields to update")
    of_version = version not in MODEL_SCOPE_VERSIONS
    if (
        not of_version
        and body_version
        and "versionDescription" in fields
        and set(fields) <= set(VERSION_FIELDS)
    ):
        return ModelUpdate(fields, True, body_version)
    allowed, other = (VERSION_FIELDS, MODEL_FIELDS) if of_version else (MODEL_FIELDS, VERSION_FIELDS)
    for field in fields:
        if field in allowed:
            continue
        if field in other:
            scope = "a model version (name@version)" if of_version else "the model (a name without @version)"
            wanted = "the model" if of_version else "a version"
            # [U] unverified: Google's wording; the proto says only "a precondition error".
            raise UpdateScopeError(
                f"Field {field} is a field of {wanted}, but the request updates {scope}: "
                "update the model and its versions separately"
            )
        raise ValidationError(
            "updateMask", f"{field} cannot be updated; updatable: {', '.join(dict.fromkeys(allowed))}"
        )
    return ModelUpdate(fields, of_version)

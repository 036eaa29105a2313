"""``models.delete`` and ``models.patch`` of the local Model Registry.

Delete: "When you delete the model, all associated model versions and evaluations are deleted"
(Vertex AI docs, "Delete a model from Vertex AI Model Registry"); the only refusal Google documents
is a model deployed to an endpoint, and the local service has no endpoints. It answers a
long-running operation (``DeleteOperationMetadata``, an ``Empty`` response), done at once as the
``deleteVersion`` one is. The model's ID is free again afterwards. [U] unverified: whether
Vertex lets a deleted model's ID be reused at once.

Patch: the name and ``updateMask`` decide what changes (:mod:`airflow_aip.jobs.vertex.models_update`).
A model update's fields are kept on the model record (``modelFields``) and shown on every version;
a version update's on that version. Labels are merged when shown, the model's over the version's.
[U] unverified: which of the two wins on a key both hold, and whether an upload's labels are the
model's or the version's (here the version's).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.labels import VERTEX_LABELS, validate_labels
from airflow_aip.jobs.vertex.models_update import UpdateScopeError, model_update
from airflow_aip.local.clock import rfc3339
from airflow_aip.local.service import FailedPreconditionError
from airflow_aip.local.vertex.models_import import new_operation
from airflow_aip.local.vertex.models_query import MAX_DISPLAY_NAME
from airflow_aip.local.vertex.models_store import EMPTY_RESPONSE, render_operation, render_version

if TYPE_CHECKING:
    from airflow_aip.local.vertex.models import ModelRegistry


def delete_model(registry: ModelRegistry, project: str, location: str, model: str) -> dict[str, Any]:
    """Delete a model and every version of it; answer the (done) operation."""
    key, ref = registry._ref(project, location, model)
    if ref.version is not None:
        raise ValidationError("name", f"must name a model, not one of its versions; got {model!r}")
    registry.settle(*key[:2])
    with registry.store.lock:
        registry._model(key)  # 404 if none
        operation = new_operation("delete", key, done=True, response={"@type": EMPTY_RESPONSE})
        registry.store.save_operation(operation)
        registry.store.drop_model(key)
        return render_operation(operation)


def patch_model(
    registry: ModelRegistry, project: str, location: str, model: str, body: Any, update_mask: str | None
) -> dict[str, Any]:
    """Apply ``updateMask``'s fields of ``body`` (a Model) to the model or to one version."""
    key, ref = registry._ref(project, location, model)
    try:
        body_version = body.get("versionId") if isinstance(body, dict) else None
        update = model_update(update_mask, ref.version, str(body_version) if body_version else None)
    except UpdateScopeError as exc:
        raise FailedPreconditionError(str(exc)) from exc
    values = _checked_values(body, update.fields)
    registry.settle(*key[:2])
    with registry.store.lock:
        record = copy.deepcopy(registry._model(key))  # stored only once on disk
        stamp = rfc3339()
        if update.of_version:
            target = registry._version(record, update.version or ref.version)
            target["model"].update(values)
            for field in update.fields:
                if field not in values:
                    target["model"].pop(field, None)
            target["versionUpdateTime"] = stamp
        else:
            target = registry._version(record, None)
            fields = record.setdefault("modelFields", {})
            fields.update(values)
            for field in update.fields:
                if field not in values:
                    fields.pop(field, None)
        record["updateTime"] = stamp
        registry.store.save_model(record)
        return render_version(record, target)


def _checked_values(body: Any, fields: tuple[str, ...]) -> dict[str, Any]:
    """The masked fields of ``body``; one the body leaves out is cleared, as a field mask means."""
    if not isinstance(body, dict):
        raise ValidationError("body", "must be a JSON object (a Model)")
    values = {field: body[field] for field in fields if field in body}
    if "displayName" in fields:
        name = values.get("displayName")
        if not isinstance(name, str) or not name:
            raise ValidationError("model.displayName", "is required")
        if len(name) > MAX_DISPLAY_NAME:
            raise ValidationError(
                "model.displayName", f"at most {MAX_DISPLAY_NAME} characters, got {len(name)}"
            )
    for field in ("description", "versionDescription"):
        if field in values and not isinstance(values[field], str):
            raise ValidationError(f"model.{field}", "must be a string")
    if "labels" in values:
        values["labels"] = validate_labels(values["labels"], "model.labels", rule=VERTEX_LABELS)
    return values

"""Vertex AI TensorBoard, only as far as ``aiplatform.init(experiment=...)`` and ``start_run`` reach it.

Without ``experiment_tensorboard=False``, Google's SDK backs every experiment with the region's
default TensorBoard: it lists tensorboards (``filter="is_default=true"``), creates one when there
is none (an operation, answered here already done), and on ``start_run`` gets or creates a
TensorBoard experiment named as the experiment and a TensorBoard run named as the run; reading
an experiment back lists the run's time series (``google.cloud.aiplatform.metadata.metadata``,
``experiment_run_resource``). Those calls are served, so a trainer's ``init(experiment=...)``
runs as on Vertex AI. Time series data is not: creating a time series, writing or reading
points (``log_time_series_metrics``, the uploader, autologging's curves) answers 501, so a run's
time series list is truthfully empty. Records live beside the metadata store's
(:class:`~.metadata_records.MetadataRecords`).

Rules: a TensorBoard experiment's or run's ID matches ``[a-z0-9][a-z0-9-]{0,127}``
[P ``tensorboard_service`` messages: "1-128 characters, valid characters are /[a-z][0-9]-/"];
one tensorboard per location is the default (a new default takes the flag from the old [U]); a
list's ``filter`` is ``is_default=true|false`` or ``display_name="..."`` here (400 otherwise).
"""

from __future__ import annotations

import copy
import re
import uuid
from collections.abc import Mapping
from typing import Any

from airflow_aip.exceptions import JobAlreadyExistsError, JobNotFoundError, ValidationError
from airflow_aip.local.clock import rfc3339
from airflow_aip.local.vertex.metadata import (
    MetadataService,
    check_resource_id,
    etag_of,
    location_name,
    page_bounds,
    page_of,
)

CREATE_METADATA = "type.googleapis.com/google.cloud.aiplatform.v1.CreateTensorboardOperationMetadata"
TENSORBOARD = "type.googleapis.com/google.cloud.aiplatform.v1.Tensorboard"
_FILTER = re.compile(r'\s*(?P<field>is_default|display_name)\s*=\s*(?P<value>true|false|"[^"]*")\s*')
_NAME = re.compile(r"projects/([^/]+)/locations/([^/]+)/(tensorboards/.+)")
_WRITABLE = ("displayName", "description", "labels")


def _full_name(name: str, shape: str, field: str) -> str:
    """``name`` with its project as a number; ``shape`` is what follows the location."""
    found = _NAME.fullmatch(name or "")
    pattern = shape.replace("{id}", "[^/]+")
    if found is None or not re.fullmatch(pattern, found[3]):
        raise ValidationError(
            field, f"must be projects/{{project}}/locations/{{location}}/{shape}; got {name!r}"
        )
    return f"{location_name(found[1], found[2])}/{found[3]}"


class Tensorboards:
    """Tensorboards, their experiments and runs, in a metadata service's records."""

    def __init__(self, metadata: MetadataService) -> None:
        self.metadata = metadata
        self.records = metadata.records

    def create(self, project: str, location: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """``tensorboards.create``: the tensorboard, in an operation already done."""
        if not isinstance(body, Mapping) or not str(body.get("displayName") or "").strip():
            raise ValidationError("tensorboard.displayName", "is required")
        parent = location_name(project, location)
        now = rfc3339()
        with self.records.lock:
            name = f"{parent}/tensorboards/{uuid.uuid4().int % 10**19}"
            resource = {key: copy.deepcopy(body[key]) for key in _WRITABLE if key in body}
            resource.update(name=name, createTime=now, updateTime=now, runCount=0)
            if body.get("isDefault"):
                for other in self.records.children(parent, "tensorboards"):
                    if other["resource"].get("isDefault"):
                        other["resource"] = {**other["resource"], "isDefault": False}
                        self.records.save(other)
                resource["isDefault"] = True
            resource["etag"] = etag_of(resource)
            self.records.add(resource)
        metadata = {"@type": CREATE_METADATA, "genericMetadata": {"createTime": now, "updateTime": now}}
        operation = f"{name}/operations/{uuid.uuid4().int % 10**19}"
        return {
            "name": operation,
            "metadata": metadata,
            "done": True,
            "response": {"@type": TENSORBOARD, **resource},
        }

    def get(self, name: str) -> dict[str, Any]:
        return self.metadata.resource(_full_name(name, "tensorboards/{id}", "name"), "Tensorboard")

    def list(self, project: str, location: str, query: Mapping[str, Any]) -> dict[str, Any]:
        """``tensorboards.list``, filtered by ``is_default`` or ``display_name`` only."""
        wanted: tuple[str, Any] | None = None
        if text := str(query.get("filter") or "").strip():
            found = _FILTER.fullmatch(text)
            if found is None:
                rule = 'the local service filters tensorboards by is_default=true|false or display_name="..."'
                raise ValidationError("filter", f"{rule}; got {text!r}")
            value = found["value"]
            key = "isDefault" if found["field"] == "is_default" else "displayName"
            wanted = (key, value == "true" if key == "isDefault" else value.strip('"'))
        size, after = page_bounds(query.get("pageSize"), query.get("pageToken"))
        with self.records.lock:
            found_records = self.records.children(location_name(project, location), "tensorboards")
            if wanted is not None:
                key, value = wanted
                default = False if key == "isDefault" else ""
                found_records = [r for r in found_records if r["resource"].get(key, default) == value]
            return page_of("tensorboards", found_records, size, after)

    def create_child(
        self, kind: str, parent: str, body: Mapping[str, Any], child_id: str, id_field: str
    ) -> dict[str, Any]:
        """A TensorBoard experiment (``kind`` ``experiments``) or run (``runs``) under ``parent``."""
        shapes = {"experiments": "tensorboards/{id}", "runs": "tensorboards/{id}/experiments/{id}"}
        parent_name = _full_name(parent, shapes[kind], "parent")
        check_resource_id(id_field, child_id or "")
        if not isinstance(body, Mapping):
            raise ValidationError("body", "must be a JSON object")
        with self.records.lock:
            singular = "Tensorboard" if kind == "experiments" else "TensorboardExperiment"
            self.metadata.resource(parent_name, singular)  # 404 when the parent is missing
            name = f"{parent_name}/{kind}/{child_id}"
            if self.records.get(name) is not None:
                raise JobAlreadyExistsError(409, f"{name} already exists")
            now = rfc3339()
            resource = {key: copy.deepcopy(body[key]) for key in _WRITABLE if key in body}
            if kind == "runs":
                resource.setdefault("displayName", child_id)
            elif "source" in body:
                resource["source"] = str(body["source"])
            resource.update(name=name, createTime=now, updateTime=now)
            resource["etag"] = etag_of(resource)
            return copy.deepcopy(self.records.add(resource)["resource"])

    def get_child(self, kind: str, name: str) -> dict[str, Any]:
        shapes = {
            "experiments": "tensorboards/{id}/experiments/{id}",
            "runs": "tensorboards/{id}/experiments/{id}/runs/{id}",
        }
        singular = "TensorboardExperiment" if kind == "experiments" else "TensorboardRun"
        return self.metadata.resource(_full_name(name, shapes[kind], "name"), singular)

    def list_time_series(self, run: str) -> dict[str, Any]:
        """A run's time series: none, as writing one is not served (see the module's docstring)."""
        name = _full_name(run, "tensorboards/{id}/experiments/{id}/runs/{id}", "parent")
        with self.records.lock:
            if self.records.get(name) is None:
                raise JobNotFoundError(404, f"TensorboardRun {name} is not found.")
        return {"tensorboardTimeSeries": []}

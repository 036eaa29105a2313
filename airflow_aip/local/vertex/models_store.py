"""Model Registry records of the local service, on disk, and how a stored version is answered.

Layout under the data dir (one file per model, one per operation, each rewritten atomically
with :func:`~airflow_aip.local.store.write_json_atomic`, so a crash leaves the old file or the
new one)::

    models/<project number>/<location>/models/<model id>.json        the model and its versions
    models/<project number>/<location>/operations/<operation id>.json its long-running operations

A model record holds its versions (each the Model as uploaded, its aliases and times) and the
next version ID to give (IDs are never reused, so ``@3`` never names two different uploads). A
record without versions is a model ID reserved by a first upload still importing: no read shows
it, a second upload with that ``modelId`` meets 409. Every read and write goes through one lock
(:attr:`ModelStore.lock`), held by the caller across a read-modify-persist, so a merge of aliases
is atomic against another.

A version is answered as Vertex answers a Model (:func:`render_version`): the model's ``name``
(no ``@``; ``listVersions`` adds ``@versionId``), the version's ``versionId``, ``versionAliases``
and times, the model's ``createTime``, output-only fields a custom-trained model has, and an
``etag`` of what it shows.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from airflow_aip.jobs.locations import AIPLATFORM_V1
from airflow_aip.jobs.vertex.enums import enums_as_numbers
from airflow_aip.jobs.vertex.serving import serving_of
from airflow_aip.local.store import safe_child, write_json_atomic

MODEL_SCHEMA = "GoogleCloudAiplatformV1Model"
ModelKey = tuple[str, str, str]  # (project number, location, model ID)
OperationKey = tuple[str, str, str]  # (project number, location, operation ID)
UPLOAD_METADATA = "type.googleapis.com/google.cloud.aiplatform.v1.UploadModelOperationMetadata"
DELETE_METADATA = "type.googleapis.com/google.cloud.aiplatform.v1.DeleteOperationMetadata"
UPLOAD_RESPONSE = "type.googleapis.com/google.cloud.aiplatform.v1.UploadModelResponse"
EMPTY_RESPONSE = "type.googleapis.com/google.protobuf.Empty"
# A custom-trained model can be deployed to dedicated or shared resources (never AUTOMATIC: that
# is AutoML's). [U] unverified: whether Google lists SHARED_RESOURCES for every custom model.
DEPLOYMENT_TYPES = ("DEDICATED_RESOURCES", "SHARED_RESOURCES")
# What a pre-built prediction container reads and writes in a batch prediction job.
# [U] unverified: the lists (and their order) Google gives; and that a custom container gets none.
INPUT_FORMATS = ("jsonl", "bigquery", "csv", "tf-record", "tf-record-gzip", "file-list")
OUTPUT_FORMATS = ("jsonl", "bigquery")
# Proto numbers of the Model's own enums (aiplatform_v1.types.model), which ENUM_NUMBERS (the jobs'
# table) does not hold; a unit test checks them against google-cloud-aiplatform.
MODEL_ENUM_NUMBERS: dict[str, dict[str, int]] = {
    "supportedDeploymentResourcesTypes": {
        "DEPLOYMENT_RESOURCES_TYPE_UNSPECIFIED": 0,
        "DEDICATED_RESOURCES": 1,
        "AUTOMATIC_RESOURCES": 2,
        "SHARED_RESOURCES": 3,
    },
    "modelSourceInfo.sourceType": {
        "MODEL_SOURCE_TYPE_UNSPECIFIED": 0,
        "AUTOML": 1,
        "CUSTOM": 2,
        "BQML": 3,
        "MODEL_GARDEN": 4,
        "GENIE": 5,
        "CUSTOM_TEXT_EMBEDDING": 6,
        "MARKETPLACE": 7,
    },
}


def _read(path: Path) -> dict[str, Any] | None:
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # left on disk for a human, as the job store does with a record it cannot read
    return loaded if isinstance(loaded, dict) else None


class ModelStore:
    """Models and their operations under ``root``, in memory and on disk."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.lock = threading.RLock()
        self._models: dict[ModelKey, dict[str, Any]] = {}
        self._operations: dict[OperationKey, dict[str, Any]] = {}
        self._seq = 0
        for path in sorted(self.root.glob("*/*/models/*.json")):
            if (record := _read(path)) is not None:
                self._models[model_key(record)] = record
                self._seq = max(self._seq, int(record.get("seq", 0)))
        for path in sorted(self.root.glob("*/*/operations/*.json")):
            if (operation := _read(path)) is not None:
                self._operations[operation_key(operation)] = operation

    def _path(self, number: str, location: str, kind: str, name: str) -> Path:
        """Where one record lives; every part comes from a request, so each must be one plain name."""
        directory = safe_child(safe_child(safe_child(self.root, number), location), kind)
        return safe_child(directory, f"{name}.json")

    # -- models (call with the lock held) ---------------------------------------------------------

    def model(self, key: ModelKey) -> dict[str, Any] | None:
        """The stored record (not a copy: change it under the lock, then :meth:`save_model`)."""
        return self._models.get(key)

    def models(self, number: str | None = None, location: str | None = None) -> list[dict[str, Any]]:
        """Stored records in creation order, of one project and location (all when not given)."""
        found = [
            record
            for (n, loc, _), record in self._models.items()
            if (number is None or n == number) and (location is None or loc == location)
        ]
        return sorted(found, key=lambda record: int(record["seq"]))

    def add_model(self, record: dict[str, Any]) -> dict[str, Any]:
        self._seq += 1
        record["seq"] = self._seq
        self.save_model(record)
        return record

    def save_model(self, record: dict[str, Any]) -> None:
        key = model_key(record)
        write_json_atomic(self._path(*key[:2], "models", key[2]), record)
        self._models[key] = record

    def drop_model(self, key: ModelKey) -> None:
        self._models.pop(key, None)
        self._path(*key[:2], "models", key[2]).unlink(missing_ok=True)

    # -- operations (call with the lock held) -----------------------------------------------------

    def operation(self, key: OperationKey) -> dict[str, Any] | None:
        return self._operations.get(key)

    def operations(self) -> Iterator[dict[str, Any]]:
        return iter(list(self._operations.values()))

    def save_operation(self, operation: dict[str, Any]) -> None:
        key = operation_key(operation)
        write_json_atomic(self._path(*key[:2], "operations", key[2]), operation)
        self._operations[key] = operation


def model_key(record: Mapping[str, Any]) -> ModelKey:
    return str(record["projectNumber"]), str(record["location"]), str(record["modelId"])


def operation_key(operation: Mapping[str, Any]) -> OperationKey:
    return str(operation["projectNumber"]), str(operation["location"]), str(operation["operationId"])


def model_name(key: ModelKey) -> str:
    return f"projects/{key[0]}/locations/{key[1]}/models/{key[2]}"


def _etag(shown: Mapping[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(shown, sort_keys=True).encode()).digest()
    return base64.b64encode(digest[:12]).decode()


def render_version(
    record: Mapping[str, Any], version: Mapping[str, Any], *, versioned: bool = False
) -> dict[str, Any]:
    """One stored version as ``models.get`` answers it (a new dict, free to change).

    ``versioned``: the name with ``@versionId``, as ``listVersions`` answers ("In the returned Model
    name field, version ID instead of regvision [sic] tag will be included", ListModelVersionsResponse).
    A ``models.patch`` of the model (``modelFields``) shows on every version, its labels merged
    over the version's.
    """
    name = model_name(model_key(record))
    shown: dict[str, Any] = {"name": name, **copy.deepcopy(dict(version["model"]))}
    model_fields = copy.deepcopy(dict(record.get("modelFields") or {}))
    if "labels" in model_fields:
        model_fields["labels"] = {**shown.get("labels", {}), **model_fields["labels"]}
    shown.update(model_fields)
    if versioned:
        shown["name"] = f"{name}@{version['versionId']}"
    shown.update(
        versionId=version["versionId"],
        versionAliases=list(version["aliases"]),
        versionCreateTime=version["versionCreateTime"],
        versionUpdateTime=version["versionUpdateTime"],
        createTime=record["createTime"],
        # [U] unverified: whether Google's updateTime of a version is the version's or the model's.
        updateTime=version["versionUpdateTime"],
        modelSourceInfo={"sourceType": "CUSTOM"},
        supportedDeploymentResourcesTypes=list(DEPLOYMENT_TYPES),
    )
    if serving_of(str(shown.get("containerSpec", {}).get("imageUri", ""))) is not None:
        shown["supportedInputStorageFormats"] = list(INPUT_FORMATS)
        shown["supportedOutputStorageFormats"] = list(OUTPUT_FORMATS)
    shown["etag"] = _etag(shown)
    return shown


def model_enums_as_numbers(model: Mapping[str, Any]) -> dict[str, Any]:
    """A rendered Model with its enums as proto numbers (``$alt=json;enum-encoding=int``)."""
    out: dict[str, Any] = enums_as_numbers(model, MODEL_SCHEMA, AIPLATFORM_V1)
    numbers = MODEL_ENUM_NUMBERS["supportedDeploymentResourcesTypes"]
    if "supportedDeploymentResourcesTypes" in out:
        out["supportedDeploymentResourcesTypes"] = [
            numbers.get(name, name) for name in out["supportedDeploymentResourcesTypes"]
        ]
    source = out.get("modelSourceInfo")
    if isinstance(source, Mapping) and "sourceType" in source:
        kinds = MODEL_ENUM_NUMBERS["modelSourceInfo.sourceType"]
        out["modelSourceInfo"] = {
            **source,
            "sourceType": kinds.get(source["sourceType"], source["sourceType"]),
        }
    return out


def render_operation(operation: Mapping[str, Any]) -> dict[str, Any]:
    """A stored operation as ``operations.get`` answers it; ``done`` is left out until true (proto3)."""
    metadata = UPLOAD_METADATA if operation["kind"] == "upload" else DELETE_METADATA
    times = {"createTime": operation["createTime"], "updateTime": operation["updateTime"]}
    shown: dict[str, Any] = {
        "name": operation["name"],
        "metadata": {"@type": metadata, "genericMetadata": times},
    }
    if operation.get("done"):
        shown["done"] = True
        if operation.get("error"):
            shown["error"] = dict(operation["error"])
        else:
            shown["response"] = dict(operation.get("response") or {"@type": EMPTY_RESPONSE})
    return shown

"""Vertex AI Metadata (``metadataStores``), as much as Vertex AI Experiments needs: the handlers
both faces call.

Google's SDK keeps an experiment as a context (``system.Experiment``), each run as a child
context (``system.ExperimentRun``) whose ``metadata`` holds the run's ``_params`` and
``_metrics``, and a run's artifacts and executions in the same store
(``google.cloud.aiplatform.metadata``). Served: metadata stores (create, get, list), and
contexts, artifacts and executions (create, get, list with a filter (:mod:`.metadata_filter`),
patch); the links between them are :mod:`.metadata_links`'. Not served (501, as any method of
Google's this service lacks): delete, purge, metadata schemas, and a lineage query of artifacts.

Rules, from the request messages' documentation (``google.cloud.aiplatform_v1.types.metadata_service``):
an ID the caller gives (``contextId``...) matches ``[a-z0-9][a-z0-9-]{0,127}`` (the proto's
comment says 4 to 128 characters [U]: Google's SDK names experiments of fewer, and the
resource ID rule ``[a-z0-9][a-z0-9-]{0,127}`` is what the SDK's users quote); none given,
the service makes a UUID; a second create of a name is 409 ALREADY_EXISTS; a name the store
does not hold is 404. A patch without ``updateMask`` replaces the fields the body carries
[U: Google's exact rule]; the ``etag`` a client sends is not checked (green where Google may
answer ABORTED to a concurrent writer [U]). Enums come in as names or numbers (the SDK's REST
transport sends numbers) and are stored as names.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from airflow_aip.exceptions import JobAlreadyExistsError, JobNotFoundError, ValidationError
from airflow_aip.local.clock import rfc3339
from airflow_aip.local.pages import decode_token, encode_token
from airflow_aip.local.store import project_number, validate_project
from airflow_aip.local.vertex.metadata_filter import Node, parse_metadata_filter
from airflow_aip.local.vertex.metadata_records import MetadataRecords

RESOURCE_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,127}")
LOCATION = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
STORE_METADATA = "type.googleapis.com/google.cloud.aiplatform.v1.CreateMetadataStoreOperationMetadata"
STORE_RESPONSE = "type.googleapis.com/google.cloud.aiplatform.v1.MetadataStore"
MAX_PAGE_SIZE = 1000
DEFAULT_PAGE_SIZE = 100
# Each node kind: its singular (the message's name), the create request's ID field, the fields a
# patch may change, and its state enum's proto numbers (aiplatform_v1.types.artifact/execution).
ARTIFACT_STATES = {"STATE_UNSPECIFIED": 0, "PENDING": 1, "LIVE": 2}
EXECUTION_STATES = {
    "STATE_UNSPECIFIED": 0,
    "NEW": 1,
    "RUNNING": 2,
    "COMPLETE": 3,
    "FAILED": 4,
    "CACHED": 5,
    "CANCELLED": 6,
}
_COMMON = ("displayName", "labels", "schemaTitle", "schemaVersion", "metadata", "description")
KINDS: dict[str, dict[str, Any]] = {
    "contexts": {"singular": "Context", "id": "contextId", "mutable": _COMMON, "states": None},
    "artifacts": {
        "singular": "Artifact",
        "id": "artifactId",
        "mutable": (*_COMMON, "uri", "state"),
        "states": ARTIFACT_STATES,
    },
    "executions": {
        "singular": "Execution",
        "id": "executionId",
        "mutable": (*_COMMON, "state"),
        "states": EXECUTION_STATES,
    },
}
_SNAKE = re.compile(r"_([a-z])")


def etag_of(shown: Mapping[str, Any]) -> str:
    """An etag of what a resource shows (its etag aside)."""
    body = {key: value for key, value in shown.items() if key != "etag"}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).digest()
    return base64.b64encode(digest[:12]).decode()


def check_resource_id(field: str, value: str) -> str:
    if not RESOURCE_ID.fullmatch(value):
        raise ValidationError(field, f"must match [a-z0-9][a-z0-9-]{{0,127}}; got {value!r}")
    return value


def location_name(project: str, location: str) -> str:
    """``projects/<number>/locations/<location>``: the parent every name here starts with."""
    validate_project(project)
    if not LOCATION.fullmatch(location):
        raise ValidationError("parent", f"not a valid location: {location!r}")
    return f"projects/{project_number(project)}/locations/{location}"


def enum_name(field: str, value: Any, states: Mapping[str, int]) -> str:
    """A state sent as a name or a proto number, as its name; anything else a 400."""
    if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
        names = {number: name for name, number in states.items()}
        if int(value) in names:
            return names[int(value)]
    elif value in states:
        return str(value)
    raise ValidationError(field, f"must be one of {', '.join(states)}; got {value!r}")


def page_bounds(size: Any, token: str | None) -> tuple[int, int]:
    """``(how many, after which seq)`` of a metadata list's page (1-1000, default 100)."""
    asked = int(size) if size not in (None, "") else 0
    if asked < 0:
        raise ValidationError("pageSize", f"must not be negative, got {asked}")
    after = decode_token(token, lambda position: int(position["after"]))
    return min(asked or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE), after or 0


def page_of(key: str, records: list[dict[str, Any]], size: int, after: int) -> dict[str, Any]:
    """One page of ``records`` (in creation order) after seq ``after``, answered under ``key``."""
    rest = [record for record in records if int(record["seq"]) > after]
    page: dict[str, Any] = {key: [copy.deepcopy(record["resource"]) for record in rest[:size]]}
    if len(rest) > size:
        page["nextPageToken"] = encode_token({"after": int(rest[size - 1]["seq"])})
    return page


class MetadataService:
    """Metadata stores and their contexts, artifacts and executions, under ``root``."""

    def __init__(self, root: Path) -> None:
        self.records = MetadataRecords(root)

    # -- metadata stores ---------------------------------------------------------------------------

    def create_store(self, project: str, location: str, body: Mapping[str, Any], store_id: str | None) -> Any:
        """``metadataStores.create``: the store, in an operation already done."""
        parent = location_name(project, location)
        store_id = check_resource_id("metadataStoreId", store_id) if store_id else str(uuid.uuid4())
        name = f"{parent}/metadataStores/{store_id}"
        now = rfc3339()
        with self.records.lock:
            if self.records.get(name) is not None:
                raise JobAlreadyExistsError(409, f"MetadataStore with name {name} already exists")
            store = {"name": name, "createTime": now, "updateTime": now, "state": {}}
            store.update({key: body[key] for key in ("description", "encryptionSpec") if key in body})
            self.records.add(store)
        operation = f"{name}/operations/{uuid.uuid4().int % 10**19}"
        metadata = {"@type": STORE_METADATA, "genericMetadata": {"createTime": now, "updateTime": now}}
        return {
            "name": operation,
            "metadata": metadata,
            "done": True,
            "response": {"@type": STORE_RESPONSE, **store},
        }

    def get_store(self, project: str, location: str, store_id: str) -> dict[str, Any]:
        return self.resource(f"{location_name(project, location)}/metadataStores/{store_id}", "MetadataStore")

    def list_stores(self, project: str, location: str, size: Any = None, token: str | None = None) -> Any:
        with self.records.lock:
            stores = self.records.children(location_name(project, location), "metadataStores")
            return page_of("metadataStores", stores, *page_bounds(size, token))

    # -- contexts, artifacts, executions -----------------------------------------------------------

    def resource(self, name: str, singular: str) -> dict[str, Any]:
        """The resource ``name`` names, as answered; 404 when the store holds none."""
        with self.records.lock:
            record = self.records.get(name)
            if record is None:
                raise JobNotFoundError(404, f"{singular} {name} is not found.")
            return copy.deepcopy(record["resource"])

    def store_name(self, project: str, location: str, store: str) -> str:
        """The metadata store's full name; 404 unless it exists (the SDK creates ``default`` first)."""
        name = f"{location_name(project, location)}/metadataStores/{store}"
        if self.records.get(name) is None:
            raise JobNotFoundError(404, f"MetadataStore {name} is not found.")
        return name

    def create(
        self, kind: str, project: str, location: str, store: str, body: Mapping[str, Any], node_id: str | None
    ) -> dict[str, Any]:
        """Create a context, artifact or execution (``kind``) in ``store``."""
        spec = KINDS[kind]
        node_id = check_resource_id(spec["id"], node_id) if node_id else str(uuid.uuid4())
        if not isinstance(body, Mapping):
            raise ValidationError("body", f"must be a JSON object (a {spec['singular']})")
        with self.records.lock:
            name = f"{self.store_name(project, location, store)}/{kind}/{node_id}"
            if self.records.get(name) is not None:
                raise JobAlreadyExistsError(409, f"{spec['singular']} with name {name} already exists")
            resource = {"name": name, **self._fields(kind, body, spec["mutable"])}
            if spec["states"] is not None:
                resource.setdefault("state", "PENDING" if kind == "artifacts" else "NEW")
            resource["createTime"] = resource["updateTime"] = rfc3339()
            resource.setdefault("schemaVersion", "")
            resource.setdefault("metadata", {})
            if kind == "contexts":
                resource["parentContexts"] = []
            resource["etag"] = etag_of(resource)
            return copy.deepcopy(self.records.add(resource)["resource"])

    def _fields(self, kind: str, body: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
        """The writable fields ``names`` of ``body``, checked: a state's name, a metadata object."""
        fields = {name: copy.deepcopy(body[name]) for name in names if name in body}
        states = KINDS[kind]["states"]
        if "state" in fields and states is not None:
            fields["state"] = enum_name("state", fields["state"], states)
        if "metadata" in fields and not isinstance(fields["metadata"], Mapping):
            raise ValidationError("metadata", "must be a JSON object (a google.protobuf.Struct)")
        if "labels" in fields and not isinstance(fields["labels"], Mapping):
            raise ValidationError("labels", "must be a map of strings")
        return fields

    def patch(
        self, kind: str, name: str, body: Mapping[str, Any], mask: str | None, allow_missing: bool = False
    ) -> dict[str, Any]:
        """``patch`` (gRPC ``Update*``): the fields ``mask`` names, or every one the body carries."""
        spec = KINDS[kind]
        with self.records.lock:
            record = self.records.get(name)
            if record is None:
                if not allow_missing:
                    raise JobNotFoundError(404, f"{spec['singular']} {name} is not found.")
                project, location, store, node_id = _node_parts(name, kind)
                return self.create(kind, project, location, store, body, node_id)
            resource = copy.deepcopy(record["resource"])
            if mask:
                paths = [_SNAKE.sub(lambda m: m.group(1).upper(), path.strip()) for path in mask.split(",")]
                unknown = [path for path in paths if path not in spec["mutable"]]
                if unknown:
                    raise ValidationError("updateMask", f"cannot update {', '.join(unknown)}")
                for path in paths:
                    resource.pop(path, None)
                resource.update(self._fields(kind, body, tuple(paths)))
            else:
                resource.update(self._fields(kind, body, spec["mutable"]))
            resource["updateTime"] = rfc3339()
            resource["etag"] = etag_of(resource)
            record["resource"] = resource
            self.records.save(record)
            return copy.deepcopy(resource)

    def list(
        self, kind: str, project: str, location: str, store: str, query: Mapping[str, Any]
    ) -> dict[str, Any]:
        """A page of a store's ``kind``, filtered and in creation order (``orderBy`` is not read [U])."""
        predicate = parse_metadata_filter(query.get("filter"))
        size, after = page_bounds(query.get("pageSize"), query.get("pageToken"))
        with self.records.lock:
            records = self.records.children(self.store_name(project, location, store), kind)
            if predicate is not None:
                records = [record for record in records if predicate(self.node(record))]
            return page_of(kind, records, size, after)

    def node(self, record: Mapping[str, Any]) -> Node:
        """What a filter reads of one record (call with the lock held)."""
        links = record.get("links") or {}
        return Node(
            resource=record["resource"],
            in_contexts=frozenset(links.get("contexts", ())),
            parents=frozenset(record["resource"].get("parentContexts", ())),
            children=frozenset(links.get("children", ())),
        )


_NODE_NAME = re.compile(r"projects/([^/]+)/locations/([^/]+)/metadataStores/([^/]+)/([a-z]+)/([^/]+)")


def _node_parts(name: str, kind: str, field: str = "name") -> tuple[str, str, str, str]:
    """``(project, location, store, id)`` of a context's, artifact's or execution's name."""
    found = _NODE_NAME.fullmatch(name or "")
    if found is None or found[4] != kind:
        rule = f"must be projects/{{project}}/locations/{{location}}/metadataStores/{{store}}/{kind}/{{id}}"
        raise ValidationError(field, f"{rule}; got {name!r}")
    return found[1], found[2], found[3], found[5]


def node_name(name: str, kind: str, field: str = "name") -> str:
    """A node's name with its project as a number (what the store is keyed by)."""
    project, location, store, node_id = _node_parts(name, kind, field)
    return f"{location_name(project, location)}/metadataStores/{store}/{kind}/{node_id}"

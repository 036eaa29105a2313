"""The links between Vertex AI Metadata's nodes: a context's child contexts, the artifacts and
executions added to a context, an execution's events; and the lineage queries that read them.

Google's SDK makes an experiment run a child of its experiment (``addContextChildren``), adds a
run's executions and artifacts to it (``addContextArtifactsAndExecutions``), and reads them back
(``queryContextLineageSubgraph``, and the list filters ``parent_contexts:`` and ``in_context()``).
Each link is kept on both records (a child's ``parentContexts``, which Google answers as an
output field; the parent's ``links.children``), so a list filter reads one record.

Rules [P ``metadata_service`` request messages]: every name linked must exist (404 naming it);
adding a link twice is no error; a context may not be its own child, nor its own ancestor (400
[U]: Google's words); an event's ``type`` is ``INPUT`` or ``OUTPUT``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from airflow_aip.exceptions import JobNotFoundError, ValidationError
from airflow_aip.local.clock import rfc3339
from airflow_aip.local.vertex.metadata import MetadataService, enum_name, etag_of, node_name

EVENT_TYPES = {"TYPE_UNSPECIFIED": 0, "INPUT": 1, "OUTPUT": 2}


class MetadataLinks:
    """Links and lineage over one :class:`MetadataService`'s records."""

    def __init__(self, metadata: MetadataService) -> None:
        self.metadata = metadata
        self.records = metadata.records

    def _record(self, name: str, singular: str) -> dict[str, Any]:
        record = self.records.get(name)
        if record is None:
            raise JobNotFoundError(404, f"{singular} {name} is not found.")
        return record

    def _names(self, names: Iterable[Any], kind: str, field: str) -> list[str]:
        return [node_name(str(name), kind, f"{field}[{index}]") for index, name in enumerate(names)]

    def add_context_children(self, context: str, children: Iterable[Any]) -> dict[str, Any]:
        """``contexts.addContextChildren``: ``children`` become the context's child contexts."""
        parent_name = node_name(context, "contexts", "context")
        child_names = self._names(children, "contexts", "childContexts")
        with self.records.lock:
            parent = self._record(parent_name, "Context")
            ancestors = self._ancestors(parent_name)
            for index, child_name in enumerate(child_names):
                if child_name in ancestors:
                    raise ValidationError(f"childContexts[{index}]", "would make a cycle of contexts")
            for child_name in child_names:
                child = self._record(child_name, "Context")
                resource = copy.deepcopy(child["resource"])
                if parent_name not in resource.setdefault("parentContexts", []):
                    resource["parentContexts"].append(parent_name)
                    resource["updateTime"] = rfc3339()
                    resource["etag"] = etag_of(resource)
                    child["resource"] = resource
                    self.records.save(child)
                _link(parent, "children", child_name)
            self.records.save(parent)
        return {}

    def _ancestors(self, name: str) -> set[str]:
        """``name`` and every context above it (call with the lock held)."""
        seen, pending = set(), [name]
        while pending:
            current = pending.pop()
            if current in seen:
                continue
            seen.add(current)
            record = self.records.get(current)
            if record is not None:
                pending.extend(record["resource"].get("parentContexts", ()))
        return seen

    def add_artifacts_and_executions(
        self, context: str, artifacts: Iterable[Any], executions: Iterable[Any]
    ) -> dict[str, Any]:
        """``contexts.addContextArtifactsAndExecutions``: attribute them to the context."""
        context_name = node_name(context, "contexts", "context")
        nodes = [
            *((name, "Artifact") for name in self._names(artifacts, "artifacts", "artifacts")),
            *((name, "Execution") for name in self._names(executions, "executions", "executions")),
        ]
        with self.records.lock:
            parent = self._record(context_name, "Context")
            found = [(self._record(name, singular), name, singular) for name, singular in nodes]
            for record, name, singular in found:
                _link(parent, singular.lower() + "s", name)
                _link(record, "contexts", context_name)
                self.records.save(record)
            self.records.save(parent)
        return {}

    def add_execution_events(self, execution: str, events: Iterable[Any]) -> dict[str, Any]:
        """``executions.addExecutionEvents``: artifacts in or out of the execution."""
        execution_name = node_name(execution, "executions", "execution")
        added = []
        for index, event in enumerate(events):
            if not isinstance(event, Mapping):
                raise ValidationError(f"events[{index}]", "must be an Event object")
            artifact = node_name(str(event.get("artifact", "")), "artifacts", f"events[{index}].artifact")
            kind = enum_name(f"events[{index}].type", event.get("type", "TYPE_UNSPECIFIED"), EVENT_TYPES)
            shown: dict[str, Any] = {"artifact": artifact, "execution": execution_name, "type": kind}
            shown["eventTime"] = str(event.get("eventTime") or rfc3339())
            if event.get("labels"):
                shown["labels"] = dict(event["labels"])
            added.append(shown)
        with self.records.lock:
            record = self._record(execution_name, "Execution")
            for event in added:
                self._record(event["artifact"], "Artifact")
            record.setdefault("links", {}).setdefault("events", []).extend(added)
            self.records.save(record)
        return {}

    def context_subgraph(self, context: str) -> dict[str, Any]:
        """``contexts.queryContextLineageSubgraph``: the context's artifacts and executions, and the
        events between them."""
        context_name = node_name(context, "contexts", "context")
        with self.records.lock:
            links = self._record(context_name, "Context").get("links") or {}
            return self._subgraph(links.get("artifacts", ()), links.get("executions", ()))

    def execution_inputs_and_outputs(self, execution: str) -> dict[str, Any]:
        """``executions.queryExecutionInputsAndOutputs``: the execution, its events and their artifacts."""
        execution_name = node_name(execution, "executions", "execution")
        with self.records.lock:
            events = (self._record(execution_name, "Execution").get("links") or {}).get("events", ())
            return self._subgraph([event["artifact"] for event in events], [execution_name])

    def _subgraph(self, artifacts: Iterable[str], executions: Iterable[str]) -> dict[str, Any]:
        artifact_names, execution_names = list(dict.fromkeys(artifacts)), list(dict.fromkeys(executions))
        events = [
            copy.deepcopy(event)
            for name in execution_names
            for event in ((self.records.get(name) or {}).get("links") or {}).get("events", ())
            if event["artifact"] in artifact_names
        ]
        shown: dict[str, Any] = {
            "artifacts": [self.metadata.resource(name, "Artifact") for name in artifact_names],
            "executions": [self.metadata.resource(name, "Execution") for name in execution_names],
        }
        if events:
            shown["events"] = events
        return shown


def _link(record: dict[str, Any], key: str, name: str) -> None:
    names = record.setdefault("links", {}).setdefault(key, [])
    if name not in names:
        names.append(name)

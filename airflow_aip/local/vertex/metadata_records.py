"""Vertex AI Metadata and TensorBoard resources of the local service, on disk, by resource name.

Every resource (a metadata store, a context, an artifact, an execution, a tensorboard, its
experiments and runs) is one record under the data dir, at the path its resource name spells,
rewritten atomically (:func:`~airflow_aip.local.store.write_json_atomic`), so a restarted service
still knows every experiment run and what it logged, as it knows every job::

    metadata/projects/<number>/locations/<location>/metadataStores/default/contexts/<id>/record.json

A record is ``{"resource": <the resource as answered>, "seq": <creation order>, "links": {...}}``:
``links`` holds what the service keeps beside a resource and answers through other methods (the
artifacts and executions added to a context, an execution's events). Every read and write goes
through one lock (:attr:`MetadataRecords.lock`), held by the caller across a read-modify-persist.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from airflow_aip.local.store import safe_child, write_json_atomic

RECORD_FILE = "record.json"


def _read(path: Path) -> dict[str, Any] | None:
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # left on disk for a human, as the job store does with a record it cannot read
    return loaded if isinstance(loaded, dict) and isinstance(loaded.get("resource"), dict) else None


class MetadataRecords:
    """Records by full resource name (``projects/<number>/locations/<l>/...``), in memory and on disk."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.lock = threading.RLock()
        self._records: dict[str, dict[str, Any]] = {}
        self._seq = 0
        for path in sorted(self.root.glob(f"**/{RECORD_FILE}")):
            if (record := _read(path)) is not None:
                self._records[str(record["resource"]["name"])] = record
                self._seq = max(self._seq, int(record.get("seq", 0)))

    def _path(self, name: str) -> Path:
        """Where a record lives; every segment of the name came from a request, so each must be plain."""
        directory = self.root
        for segment in name.split("/"):
            directory = safe_child(directory, segment)
        return directory / RECORD_FILE

    def get(self, name: str) -> dict[str, Any] | None:
        """The stored record (not a copy: change it under the lock, then :meth:`save`)."""
        return self._records.get(name)

    def add(self, resource: dict[str, Any]) -> dict[str, Any]:
        """Store a new resource (its ``name`` set); the record, with its creation order."""
        self._seq += 1
        record = {"resource": resource, "seq": self._seq, "links": {}}
        self.save(record)
        return record

    def save(self, record: dict[str, Any]) -> None:
        name = str(record["resource"]["name"])
        write_json_atomic(self._path(name), record)
        self._records[name] = record

    def children(self, parent: str, collection: str) -> list[dict[str, Any]]:
        """The records directly under ``parent/collection/``, in creation order."""
        prefix = f"{parent}/{collection}/"
        found = [
            record
            for name, record in self._records.items()
            if name.startswith(prefix) and "/" not in name[len(prefix) :]
        ]
        return sorted(found, key=lambda record: int(record["seq"]))

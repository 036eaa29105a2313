"""An export decided before any write: what is copied where, the manifest, the promotion, the XCom.

Pure, like :mod:`airflow_aip.export` whose rules it applies. The operator reads the job, the
source listing and the manifests through hooks and hands them here; the storage hook then
carries the plan out without a judgement of its own. Every rule (the champion gate, what a
re-run rewrites, what XCom says) is therefore decided in one place and tested without a bucket.
The champion gate is :func:`airflow_aip.registry.gate.judge`, the Model Registry store's too: a
model that does not win (kept out, or refused because the two cannot be compared) is neither
copied nor promoted, and the task succeeds saying why.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from airflow_aip.exceptions import AipError
from airflow_aip.export import (
    MANIFEST_NAME,
    ExportSource,
    build_manifest,
    champion_metric,
    champion_standing,
    relative_names,
    same_export,
    source_standing,
)
from airflow_aip.registry.gate import Measurement, Verdict, judge
from airflow_aip.stored_manifest import StoredManifest
from airflow_aip.uris import GcsUri


class ListedObject(Protocol):
    """What the plan needs of a stored object (the storage hook's ``ObjectInfo`` is one)."""

    @property
    def uri(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def crc32c(self) -> str | None: ...
    @property
    def md5_hash(self) -> str | None: ...


@dataclass(frozen=True)
class ObjectCopy:
    """One source object and where its copy goes; size and crc32c tell a copy already there."""

    source_uri: str
    destination_uri: str
    size: int
    crc32c: str | None


@dataclass(frozen=True)
class ManifestWrite:
    """A JSON write that creates (generation 0) or replaces only the generation the plan saw."""

    uri: str
    content: Mapping[str, Any]
    if_generation_match: int

    @property
    def data(self) -> bytes:
        return json.dumps(self.content, indent=2, sort_keys=True).encode()


@dataclass(frozen=True)
class ExportPlan:
    """Copies first, then the writes in order (the model's manifest, then the champion's)."""

    copies: tuple[ObjectCopy, ...]
    writes: tuple[ManifestWrite, ...]
    summary: dict[str, Any]
    """The XCom, all but ``copied_bytes`` (known once the copies are done)."""
    notes: tuple[str, ...]
    """Log lines that say what was decided and why."""

    def report(self, copied_bytes: int) -> list[str]:
        """The task log's account of the export, once the storage hook has carried it out."""
        if not self.summary["exported"]:
            return list(self.notes)
        objects, destination = self.summary["objects"], self.summary["destination"]
        return [f"Exported {objects} objects ({copied_bytes} bytes copied) to {destination}", *self.notes]

    def xcom(self, copied_bytes: int) -> dict[str, Any]:
        """What the task returns, once the storage hook has copied ``copied_bytes``."""
        if not self.summary["exported"]:
            return dict(self.summary)
        return {**self.summary, "copied_bytes": copied_bytes}


def export_destination(source: ExportSource, destination_root: GcsUri) -> GcsUri:
    """``{destination_uri}/{job_id}[_trial{N}]``: one job (and trial) always exports to one place."""
    return destination_root.join(source.version, field="destination_uri")


def plan_export(
    source: ExportSource,
    destination_root: GcsUri,
    *,
    listed: Sequence[ListedObject],
    packages: Mapping[str, ListedObject | None],
    run: Mapping[str, Any],
    exported_at: str,
    existing_manifest: StoredManifest | None = None,
    champion_uri: GcsUri | None = None,
    champion: StoredManifest | None = None,
    measurement: Measurement | None = None,
    require_same_eval_data: bool = False,
) -> ExportPlan:
    """The export of ``source`` below ``destination_root``, or none when the champion gate says no.

    ``listed`` is every object below the source prefix, ``packages`` the job's trainer packages
    (their metadata, None when not in Cloud Storage), ``existing_manifest`` what the destination
    already holds, ``champion`` the manifest at ``champion_uri`` (None: no champion yet),
    ``measurement`` the champion scored again on this run's evaluation data (it replaces the
    champion's recorded metric when it scored that model). With no ``champion_uri`` the model is
    exported without a gate. Raises AipError when the source holds
    nothing to export.
    """
    summary: dict[str, Any] = {
        "job_id": source.job_id,
        "name": source.resource_name,
        "trial_id": source.trial_id,
        "metric": source.metric,
        "metric_tag": source.metric_tag,
        "eval_data": source.eval_data,
        "eval_uri": source.eval_uri,
    }
    destination = export_destination(source, destination_root)
    manifest_uri = destination.join(MANIFEST_NAME).uri
    verdict: Verdict | None = None
    if champion_uri:
        verdict, said = _gate(
            source, destination, champion_uri, champion, measurement, require_same_eval_data, manifest_uri
        )
        summary.update(said)
        if not verdict.promote:
            summary.update(promoted=False, exported=False, destination=None)
            return ExportPlan((), (), summary, (f"Not exported: {verdict.reason}",))

    copies, objects = _copies(source, destination, listed)
    manifest = build_manifest(source, destination, objects, _package_entries(packages), run, exported_at)
    writes, notes = [], []
    if existing_manifest and same_export(existing_manifest.content, manifest):
        notes.append(f"{destination.uri} already holds this export: nothing rewritten")
    else:
        generation = existing_manifest.generation if existing_manifest else 0
        writes.append(ManifestWrite(manifest_uri, manifest, generation))
    if champion_uri is None or verdict is None:
        notes.append("No champion_manifest_uri: exported without a promotion gate")
    elif champion and same_export(champion.content, manifest):
        notes.append(f"{champion_uri.uri} already names this export: nothing rewritten")
    else:
        writes.append(ManifestWrite(champion_uri.uri, manifest, champion.generation if champion else 0))
        notes.append(f"Promoted {destination.uri}: {verdict.reason}; {champion_uri.uri} is the new champion")
    summary.update(
        destination=destination.uri,
        manifest_uri=manifest_uri,
        objects=len(objects),
        bytes=sum(o["size"] for o in objects),
        exported=True,
        promoted=True if champion_uri else None,
    )
    return ExportPlan(tuple(copies), tuple(writes), summary, tuple(notes))


def _gate(
    source: ExportSource,
    destination: GcsUri,
    champion_uri: GcsUri,
    champion: StoredManifest | None,
    measurement: Measurement | None,
    require_same_eval_data: bool,
    manifest_uri: str,
) -> tuple[Verdict, dict[str, Any]]:
    """The champion gate's verdict on ``source`` against the manifest at ``champion_uri``, and what
    the XCom says of it. ``measurement`` replaces the champion's recorded metric when it scored it."""
    by_hand = (
        f"To promote it anyway, export it without champion_manifest_uri, then copy {manifest_uri} "
        f"over {champion_uri.uri}."
    )
    recorded = champion_standing(champion.content, champion_uri.uri) if champion else None
    held = recorded.measured(measurement) if recorded else None
    verdict = judge(
        source_standing(source, destination),
        held,
        by_hand=by_hand,
        require_same_eval_data=require_same_eval_data,
    )
    said = {
        "champion_metric": held.metric if held else None,
        "champion_recorded_metric": champion_metric(champion.content) if champion else None,
        "champion_job_id": champion.content.get("job_id") if champion else None,
        "same_eval_data": verdict.same_data,
        "decision": verdict.decision.value,
        "reason": verdict.reason,
    }
    return verdict, said


def _copies(
    source: ExportSource, destination: GcsUri, listed: Sequence[ListedObject]
) -> tuple[list[ObjectCopy], list[dict[str, Any]]]:
    """Every object below the source (but its root manifest), and its manifest entry."""
    by_uri = {info.uri: info for info in listed}
    names = relative_names(source.prefix, list(by_uri))
    if not names:
        raise AipError(f"Nothing to export: no object below {source.prefix.uri}")
    copies, objects = [], []
    for name in names:
        info = by_uri[source.prefix.join(name).uri]
        copies.append(ObjectCopy(info.uri, destination.join(name).uri, info.size, info.crc32c))
        objects.append({"name": name, "size": info.size, "crc32c": info.crc32c, "md5_hash": info.md5_hash})
    return copies, objects


def _package_entries(packages: Mapping[str, ListedObject | None]) -> list[dict[str, Any]]:
    """The manifest's record of the trainer packages: their checksums tie the model to its code."""
    return [
        {
            "uri": uri,
            "crc32c": info.crc32c if info else None,
            "md5_hash": info.md5_hash if info else None,
        }
        for uri, info in packages.items()
    ]

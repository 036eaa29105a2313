"""What to stage, and where: every package validated and content-addressed before the first upload.

A package built by ``BuildTrainerPackageOperator`` arrives as its XCom dict. Its ``path`` is a
file on the machine that built it; on a Celery worker or a Kubernetes pod that shares no disk
with that machine it is absent. The build is byte-reproducible, so the plan then rebuilds it
here from ``source`` (the trainer's directory, deployed with the DAGs on every worker) with the
same timestamp, and uses the rebuild only if its sha256 is the one the build task reported:
what is staged is always exactly what was built, or nothing is.

Pure apart from reading files and running that rebuild: no Airflow, no Google.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.training_input import MAX_PACKAGE_URIS  # the API's packageUris limit
from airflow_aip.packaging import build_sdist, sha256_file
from airflow_aip.uris import GcsUri, parse_gcs_uri

PACKAGE_SUFFIXES = (".tar.gz", ".whl")  # what AI Platform Training pip-installs
_SHA256 = re.compile(r"[0-9a-f]{64}")
ONE_TASK_HINT = "or build and stage in one task: BuildTrainerPackageOperator(staging_uri=...)"


@dataclass(frozen=True)
class PlannedUpload:
    """One entry of ``trainingInput.packageUris``: a local file to stage, or a gs:// URI as given.

    ``rebuilt`` says the file is not the build task's own but a rebuild of it on this machine
    (same sha256).
    """

    uri: str
    local_path: Path | None = None
    sha256: str | None = None
    rebuilt: bool = False


@dataclass(frozen=True)
class _Rebuild:
    """A built package whose file is not on this machine: checked now, rebuilt after every check."""

    field: str
    path: Path
    source: Path
    sha256: str
    epoch: int


def plan_staging(packages: Any, staging_uri: str, rebuild_dir: Path | None = None) -> list[PlannedUpload]:
    """Validate every package and compute ``{staging_uri}/{sha256}/{basename}``, in input order.

    ``packages`` holds local paths, gs:// URIs (kept as they are, like gcloud's ``--packages``) or
    ``BuiltPackage.to_dict()`` results (an XCom); a single one may be given bare. Every rule is
    checked here, before the first upload (and before any rebuild), so a bad list stages nothing.
    A built package absent here is rebuilt under ``rebuild_dir`` (required then).
    """
    staging = parse_gcs_uri(staging_uri, "staging_uri")
    items = [packages] if isinstance(packages, (str, os.PathLike, dict)) else packages
    if not isinstance(items, (list, tuple)) or not items:
        raise ValidationError("packages", "must be a non-empty list of package paths, URIs or built packages")
    if len(items) > MAX_PACKAGE_URIS:
        raise ValidationError(
            "packages", f"at most {MAX_PACKAGE_URIS} packages (API limit), got {len(items)}"
        )
    checked: list[PlannedUpload | _Rebuild] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(items):
        field = f"packages[{index}]"
        entry = _plan_one(item, field, staging)
        basename = entry.path.name if isinstance(entry, _Rebuild) else entry.uri.rsplit("/", 1)[-1]
        if basename in seen:
            raise ValidationError(field, f"basename {basename!r} repeats packages[{seen[basename]}]")
        seen[basename] = index
        checked.append(entry)
    if any(isinstance(entry, _Rebuild) for entry in checked) and rebuild_dir is None:
        raise ValueError("plan_staging: a package must be rebuilt here, and no rebuild_dir was given")
    return [
        _rebuild(entry, staging, Path(rebuild_dir or "") / str(index))
        if isinstance(entry, _Rebuild)
        else entry
        for index, entry in enumerate(checked)
    ]


def _plan_one(item: Any, field: str, staging: GcsUri) -> PlannedUpload | _Rebuild:
    built = item if isinstance(item, dict) else None
    if built is not None:
        # staged by the build task itself (staging_uri=): the URI names the content already
        item = built.get("uri") or built.get("path")
    if not isinstance(item, (str, os.PathLike)) or not str(item).strip():
        raise ValidationError(field, "must be a file path, a gs:// URI or a built package's dict with 'path'")
    if str(item).startswith("gs://"):
        uri = parse_gcs_uri(str(item), field, require_object=True)
        _check_suffix(uri.name, field)
        return PlannedUpload(uri.uri)
    path = Path(item).expanduser()
    _check_suffix(path.name, field)
    expected_sha = built.get("sha256") if built is not None else None
    if not path.is_file():
        if built is None or built.get("source") is None:
            raise ValidationError(field, f"{path} does not exist or is not a file")
        return _check_rebuild(built, path, field)
    digest = sha256_file(path)
    if expected_sha is not None and expected_sha != digest:
        raise ValidationError(field, f"{path} changed since it was built (sha256 differs)")
    return PlannedUpload(staging.join(digest, path.name, field=field).uri, path.absolute(), digest)


def _check_rebuild(built: dict[str, Any], path: Path, field: str) -> _Rebuild:
    """The built file is not here (another machine built it): can it be rebuilt here, exactly?"""
    sha, source, epoch = built.get("sha256"), built.get("source"), built.get("source_date_epoch")
    if not isinstance(sha, str) or not _SHA256.fullmatch(sha):
        raise ValidationError(f"{field}.sha256", f"must be the build's hex sha256, got {sha!r}")
    if not isinstance(source, str) or not source.strip():
        raise ValidationError(f"{field}.source", f"must be the trainer package's directory, got {source!r}")
    if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0:
        raise ValidationError(f"{field}.source_date_epoch", f"must be a non-negative integer, got {epoch!r}")
    if not Path(source).is_dir():
        raise ValidationError(
            field,
            f"{path} is not on this machine (it was built on another one), and neither is its source"
            f" {source}: deploy the trainer with the DAGs at the same path on every worker, {ONE_TASK_HINT}",
        )
    return _Rebuild(field, path, Path(source), sha, epoch)


def _rebuild(entry: _Rebuild, staging: GcsUri, out: Path) -> PlannedUpload:
    """Rebuild from the source here; refuse unless it is byte for byte the build task's file."""
    rebuilt = build_sdist(entry.source, out, epoch=entry.epoch)
    if rebuilt.sha256 != entry.sha256 or rebuilt.path.name != entry.path.name:
        raise ValidationError(
            entry.field,
            f"{entry.path} is not on this machine; rebuilding it here from {entry.source} gives"
            f" {rebuilt.path.name} with sha256 {rebuilt.sha256}, not the build task's {entry.sha256}:"
            f" the source or the build tools (setuptools, zlib) differ between the machines. Give every"
            f" worker the same trainer source and tools, {ONE_TASK_HINT}",
        )
    uri = staging.join(rebuilt.sha256, rebuilt.path.name, field=entry.field).uri
    return PlannedUpload(uri, rebuilt.path, rebuilt.sha256, rebuilt=True)


def _check_suffix(name: str, field: str) -> None:
    if not name.endswith(PACKAGE_SUFFIXES):
        raise ValidationError(field, f"{name!r} must be a .tar.gz sdist or a .whl wheel")

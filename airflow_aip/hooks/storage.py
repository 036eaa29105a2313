"""Cloud Storage I/O: the only place that creates a google-cloud-storage client.

Staging is content-addressed and safe under concurrency:
- an object that already holds our bytes (same size, crc32c and md5) is not uploaded again:
  a re-run costs one metadata request and zero uploaded bytes;
- objects are created with ``ifGenerationMatch=0``, so two stagers never overwrite each other;
  the loser of the race checks that the winner's object holds the same bytes;
- our md5/crc32c travel with the upload (GCS rejects a mismatch server-side) and the checksums
  of what landed are compared again; a mismatch is deleted (that generation only) and raised.

Retries are google-cloud-storage's own (``DEFAULT_RETRY``: 429, 5xx, dropped connections), which
it applies to writes only when they carry a generation precondition, so every write here that
must survive a lost answer carries one. The retry of a conditional write whose first attempt
landed meets 412: when the object then holds exactly the bytes we meant, that is our own write
(staging, :meth:`StorageHook.write_bytes`, :meth:`StorageHook.copy` all check). An
unconditional :meth:`~StorageHook.write_bytes` puts the same bytes again, so it is retried too.

``STORAGE_EMULATOR_HOST`` switches to the emulator with anonymous credentials. Nothing derived
from credentials is ever logged or returned. google.* is imported inside functions: this module
is on the DAG-parse path of every DAG that uses a staging operator.
"""

from __future__ import annotations

import base64
import builtins
import hashlib
import importlib
import io
import json
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from airflow_aip.exceptions import PreconditionFailedError, StagingError, StorageError, ValidationError
from airflow_aip.export_plan import ExportPlan, ObjectCopy
from airflow_aip.hooks.base import GoogleCloudBaseHook, anonymous_credentials
from airflow_aip.stored_manifest import StoredManifest
from airflow_aip.uris import GcsUri, parse_gcs_uri, storage_emulator_host

EMULATOR_PROJECT = "local-emulator"
PROGRESS_MIN_BYTES = 8 * 1024 * 1024  # smaller files go in one request: no progress to report
_CHUNK_QUANTUM = 256 * 1024  # resumable chunks must be multiples of 256 KiB
_MIN_CHUNK = 8 * 1024 * 1024
_MAX_CHUNK = 100 * 1024 * 1024  # the library's default; a chunk is held in memory
_PROGRESS_STEPS = 10  # log at most once per tenth of the file
_CHUNKS_PER_FILE = 4


@dataclass(frozen=True)
class Checksums:
    """Size and base64 md5/crc32c of local bytes, in the form GCS metadata uses."""

    size: int
    md5_hash: str
    crc32c: str


@dataclass(frozen=True)
class ObjectInfo:
    """An object's metadata (no ACLs, no owner: nothing that identifies a principal)."""

    uri: str
    size: int
    generation: int
    md5_hash: str | None
    crc32c: str | None
    content_type: str | None
    updated: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def same_object(self, other: ObjectInfo) -> bool:
        """Same size and every checksum both report matches (a copy of it)."""
        pairs = [(a, b) for a, b in ((self.md5_hash, other.md5_hash), (self.crc32c, other.crc32c)) if a and b]
        return self.size == other.size and bool(pairs) and all(a == b for a, b in pairs)

    def same_content(self, local: Checksums) -> bool:
        """Same size and every checksum GCS reports (composite objects have no md5) matches."""
        if self.size != local.size or (self.md5_hash is None and self.crc32c is None):
            return False
        return self.md5_hash in (None, local.md5_hash) and self.crc32c in (None, local.crc32c)


@dataclass(frozen=True)
class StagedObject:
    """Where a file was staged; ``bytes`` is what this call uploaded (0 when it was already there)."""

    uri: str
    uploaded: bool
    bytes: int


def file_checksums(path: str | os.PathLike[str]) -> Checksums:
    """md5 and crc32c of a file in one read."""
    with open(path, "rb") as fh:
        return _checksums(iter(lambda: fh.read(1 << 20), b""))


def _checksums(blocks: Iterable[bytes]) -> Checksums:
    # google_crc32c ships no type hints; through import_module its calls are typed Any.
    crc: Any = importlib.import_module("google_crc32c").Checksum()
    md5, size = hashlib.md5(usedforsecurity=False), 0
    for block in blocks:
        md5.update(block)
        crc.update(block)
        size += len(block)
    return Checksums(size, _b64(md5.digest()), _b64(crc.digest()))


def chunk_size_for(size: int) -> int:
    """About a quarter of the file per resumable chunk, within 8-100 MiB.

    A chunk is the unit of progress (the client reads one, then sends it) but each costs a round
    trip: quarters report progress at ~25/50/75/100% for four requests instead of one.
    """
    quarter = -(-size // _CHUNKS_PER_FILE)
    rounded = -(-quarter // _CHUNK_QUANTUM) * _CHUNK_QUANTUM
    return max(_MIN_CHUNK, min(_MAX_CHUNK, rounded))


class StorageHook(GoogleCloudBaseHook):
    """Cloud Storage through an Airflow Google Cloud connection (or ADC, or the emulator)."""

    hook_name = "Google Cloud Storage (airflow_aip)"

    @cached_property
    def client(self) -> Any:
        """A google.cloud.storage.Client, built once per hook."""
        from google.cloud import storage

        if storage_emulator_host():
            # The client reads STORAGE_EMULATOR_HOST itself for its endpoint.
            return storage.Client(project=EMULATOR_PROJECT, credentials=anonymous_credentials())
        credentials, project = self.load_credentials()
        return storage.Client(project=project, credentials=credentials)

    def get_conn(self) -> Any:
        return self.client

    # -- staging ---------------------------------------------------------------------------------

    def stage_file(self, local_path: str | os.PathLike[str], uri: str) -> StagedObject:
        """Make ``uri`` hold exactly the bytes of ``local_path``; upload only when it does not yet."""
        target = parse_gcs_uri(uri, "uri", require_object=True)
        path = Path(local_path)
        if not path.is_file():
            raise ValidationError("local_path", f"{path} is not an existing file")
        local = file_checksums(path)
        existing = self.get_metadata(target.uri)
        if existing is not None:
            return self._skip_if_same(existing, local)
        try:
            landed = self._upload(path, target, local)
        except PreconditionFailedError:
            # Another stager created the object between our check and our upload.
            winner = self.get_metadata(target.uri)
            if winner is None:
                raise StagingError(
                    f"{target.uri} was created and removed by another writer meanwhile"
                ) from None
            return self._skip_if_same(winner, local)
        except StorageError as err:  # e.g. GCS refusing our declared checksums: nothing landed
            raise StagingError(str(err)) from err
        if not landed.same_content(local):
            mismatch = (
                f"{target.uri}: what landed is not what was sent (sent {local.size} bytes"
                f" crc32c={local.crc32c} md5={local.md5_hash}; landed {landed.size} bytes"
                f" crc32c={landed.crc32c} md5={landed.md5_hash})"
            )
            try:
                self.delete(target.uri, if_generation_match=landed.generation)
            except StorageError as err:
                raise StagingError(f"{mismatch}; deleting it failed, remove it by hand: {err}") from err
            raise StagingError(f"{mismatch}; the object was deleted")
        return StagedObject(target.uri, uploaded=True, bytes=local.size)

    def _skip_if_same(self, existing: ObjectInfo, local: Checksums) -> StagedObject:
        if not existing.same_content(local):
            raise StagingError(
                f"{existing.uri} already exists with different content ({existing.size} bytes,"
                f" crc32c={existing.crc32c}; ours {local.size} bytes, crc32c={local.crc32c}); not overwriting"
            )
        self.log.info("Already staged, skipping: %s (%d bytes)", existing.uri, existing.size)
        return StagedObject(existing.uri, uploaded=False, bytes=0)

    def _upload(self, path: Path, target: GcsUri, local: Checksums) -> ObjectInfo:
        blob = self._blob(target, chunk_size=chunk_size_for(local.size))
        # Declared checksums: real GCS verifies them and rejects a corrupted upload outright.
        blob.md5_hash, blob.crc32c = local.md5_hash, local.crc32c
        progress = _Progress(self.log.info, target.uri, local.size)
        with _gcs_errors("uploading to", target.uri), _ProgressFile(path, progress) as fh:
            blob.upload_from_file(
                fh,
                size=local.size,
                content_type="application/octet-stream",
                if_generation_match=0,
                checksum=None,
            )
        return _info(target.bucket, blob)

    # -- generic helpers -------------------------------------------------------------------------

    def exists(self, uri: str) -> bool:
        return self.get_metadata(uri) is not None

    def get_metadata(self, uri: str) -> ObjectInfo | None:
        """One metadata request; None when the object does not exist."""
        target = parse_gcs_uri(uri, "uri", require_object=True)
        blob = self._blob(target)
        try:
            with _gcs_errors("reading metadata of", target.uri):
                blob.reload()
        except FileNotFoundError:
            return None
        return _info(target.bucket, blob)

    def list(self, prefix_uri: str) -> builtins.list[ObjectInfo]:
        """Every object whose name starts with the URI's object part (the whole bucket for gs://b)."""
        prefix = parse_gcs_uri(prefix_uri, "prefix_uri")
        with _gcs_errors("listing", prefix.uri):
            blobs = self.client.list_blobs(prefix.bucket, prefix=prefix.name or None)
            return [_info(prefix.bucket, blob) for blob in blobs]

    def read_bytes(self, uri: str) -> bytes:
        """The object's content; FileNotFoundError when it does not exist."""
        target = parse_gcs_uri(uri, "uri", require_object=True)
        with _gcs_errors("reading", target.uri):
            data: bytes = self._blob(target).download_as_bytes()
        return data

    def write_bytes(
        self,
        uri: str,
        data: bytes,
        if_generation_match: int | None = None,
        content_type: str = "application/octet-stream",
    ) -> ObjectInfo:
        """Write ``data``; ``if_generation_match=0`` creates only, N replaces generation N only.

        A 412 while the object holds exactly ``data`` is success: an earlier attempt of this
        write landed and its answer was lost (or someone wrote the very same bytes).
        """
        from google.cloud.storage.retry import DEFAULT_RETRY, DEFAULT_RETRY_IF_GENERATION_SPECIFIED

        target = parse_gcs_uri(uri, "uri", require_object=True)
        blob = self._blob(target)
        # Unconditional: putting the same bytes twice ends the same, so a retry is safe.
        retry = DEFAULT_RETRY if if_generation_match is None else DEFAULT_RETRY_IF_GENERATION_SPECIFIED
        try:
            with _gcs_errors("writing", target.uri):
                blob.upload_from_string(
                    data, content_type=content_type, if_generation_match=if_generation_match, retry=retry
                )
        except PreconditionFailedError:
            landed = self.get_metadata(target.uri)
            if landed is None or not landed.same_content(_checksums([data])):
                raise
            self.log.info("%s already holds these bytes (generation %d)", target.uri, landed.generation)
            return landed
        return _info(target.bucket, blob)

    def copy(self, src_uri: str, dst_uri: str, if_generation_match: int | None = None) -> ObjectInfo:
        """Server-side copy (rewrite): no byte passes through this machine, whatever the size.

        With ``if_generation_match`` (0: create only) the copy is retried on transient errors; a
        412 while the destination already holds the source's bytes is success (our earlier
        attempt landed, its answer was lost).
        """
        src = parse_gcs_uri(src_uri, "src_uri", require_object=True)
        dst = parse_gcs_uri(dst_uri, "dst_uri", require_object=True)
        source, destination = self._blob(src), self._blob(dst)
        token: str | None = None
        try:
            with _gcs_errors(f"copying {src.uri} to", dst.uri):
                while True:
                    token, written, total = destination.rewrite(
                        source, token=token, if_generation_match=if_generation_match
                    )
                    if token is None:
                        break
                    self.log.info("Copying %s -> %s: %d / %d bytes", src.uri, dst.uri, written, total)
        except PreconditionFailedError:
            original, landed = self.get_metadata(src.uri), self.get_metadata(dst.uri)
            if original is None or landed is None or not landed.same_object(original):
                raise
            self.log.info("%s already holds the bytes of %s", dst.uri, src.uri)
            return landed
        return _info(dst.bucket, destination)

    def metadata_of(self, uris: Iterable[str]) -> dict[str, ObjectInfo | None]:
        """Each URI's metadata, in order; None for one not in Cloud Storage or not there."""
        return {uri: self.get_metadata(uri) if uri.startswith("gs://") else None for uri in uris}

    # -- export ----------------------------------------------------------------------------------

    def read_manifest(self, uri: str) -> StoredManifest | None:
        """A JSON manifest and the generation a replace must match; None when there is none."""
        info = self.get_metadata(uri)
        if info is None:
            return None
        return StoredManifest(info.generation, json.loads(self.read_bytes(uri)))

    def write_export(self, plan: ExportPlan) -> int:
        """Carry out an export plan; the bytes copied (0 when every copy was already there).

        Exactly once under retries and re-runs: an object whose destination already holds its
        size and crc32c is not copied again, any other copy is conditional (create, or replace
        the generation just seen), and so are the manifests, written after every object in the
        plan's order, so that a reader that sees a manifest sees a complete model.
        """
        copied = sum(self._copy_unless_there(copy) for copy in plan.copies)
        for write in plan.writes:
            self.write_bytes(
                write.uri,
                write.data,
                if_generation_match=write.if_generation_match,
                content_type="application/json",
            )
        return copied

    def _copy_unless_there(self, copy: ObjectCopy) -> int:
        existing = self.get_metadata(copy.destination_uri)
        if existing is not None and (existing.size, existing.crc32c) == (copy.size, copy.crc32c):
            return 0
        generation = existing.generation if existing else 0
        self.copy(copy.source_uri, copy.destination_uri, if_generation_match=generation)
        return copy.size

    def delete(self, uri: str, if_generation_match: int | None = None) -> bool:
        """Delete (that generation only, if given); False when there was nothing to delete."""
        target = parse_gcs_uri(uri, "uri", require_object=True)
        try:
            with _gcs_errors("deleting", target.uri):
                self._blob(target).delete(if_generation_match=if_generation_match)
        except FileNotFoundError:
            return False
        return True

    def _blob(self, target: GcsUri, chunk_size: int | None = None) -> Any:
        return self.client.bucket(target.bucket).blob(target.name, chunk_size=chunk_size)


def _info(bucket: str, blob: Any) -> ObjectInfo:
    return ObjectInfo(
        uri=GcsUri(bucket, blob.name).uri,
        size=int(blob.size or 0),
        generation=int(blob.generation or 0),
        md5_hash=blob.md5_hash,
        crc32c=blob.crc32c,
        content_type=blob.content_type,
        updated=blob.updated.isoformat() if blob.updated else None,
    )


@contextmanager
def _gcs_errors(action: str, uri: str) -> Iterator[None]:
    """Translate google.api_core errors into ours: callers never import google to handle them."""
    from google.api_core import exceptions as gexc

    try:
        yield
    except gexc.PreconditionFailed as err:
        raise PreconditionFailedError(uri, str(err.message)) from err
    except gexc.NotFound as err:
        raise FileNotFoundError(f"{action} {uri}: not found") from err
    except gexc.GoogleAPICallError as err:
        raise StorageError(f"{action} {uri} failed: HTTP {err.code}: {err.message}") from err


def _b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode("ascii")


class _Progress:
    """Logs bytes and percent each time an upload crosses another tenth of a large file."""

    def __init__(self, log: Callable[..., None], uri: str, total: int) -> None:
        self.log, self.uri, self.total = log, uri, total
        self.reported = 0

    def __call__(self, position: int) -> None:
        if self.total < PROGRESS_MIN_BYTES:
            return
        step = position * _PROGRESS_STEPS // self.total
        if step > self.reported:
            self.reported = step
            percent = 100 * position // self.total
            self.log("Uploading %s: %d / %d bytes (%d%%)", self.uri, position, self.total, percent)


class _ProgressFile(io.FileIO):
    """A read-only file reporting its read position; the client reads one chunk before sending it."""

    def __init__(self, path: Path, on_read: Callable[[int], None]) -> None:
        super().__init__(path, "rb")
        self._on_read = on_read

    def read(self, size: int | None = -1, /) -> bytes:
        data = super().read(-1 if size is None else size)
        self._on_read(self.tell())
        return data

"""Cloud Storage URIs, bucket names and object names, checked before anything touches GCS.

Pure: no Airflow, no Google library. Every rule is one GCS naming rule
(https://cloud.google.com/storage/docs/buckets#naming, .../objects#naming) or one of ours that
keeps a staged path unambiguous (no ``.``/``..`` segments, no empty segments, not absolute).
A broken name fails here, naming the field, instead of as a 400 half-way through a DAG run.
"""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from airflow_aip.exceptions import ValidationError

SCHEME = "gs://"
_BUCKET_CHARS = re.compile(r"[a-z0-9._-]+")
_ALNUM = re.compile(r"[a-z0-9]")
# "google" and its close misspellings are reserved by GCS (e.g. "g00gle", "go0gle").
_GOOGLE_LIKE = re.compile(r"g[o0]{2}g[l1]e")
_MAX_OBJECT_BYTES = 1024
_ACME_PREFIX = ".well-known/acme-challenge/"


def validate_bucket_name(name: str, field: str = "bucket") -> str:
    """Return ``name`` if it obeys GCS bucket naming rules, else raise ValidationError(field, rule)."""
    if not isinstance(name, str) or not name:
        raise ValidationError(field, "bucket name must be a non-empty string")
    if not _BUCKET_CHARS.fullmatch(name):
        raise ValidationError(
            field, f"bucket name {name!r} may contain only lowercase letters, digits, '-', '_' and '.'"
        )
    if not (_ALNUM.match(name[0]) and _ALNUM.match(name[-1])):
        raise ValidationError(field, f"bucket name {name!r} must start and end with a letter or digit")
    limit = 222 if "." in name else 63
    if not 3 <= len(name) <= limit:
        raise ValidationError(
            field, f"bucket name {name!r} must be 3-63 characters (up to 222 when it contains dots)"
        )
    for component in name.split("."):
        if not component or len(component) > 63:
            raise ValidationError(
                field, f"bucket name {name!r}: each dot-separated part must be 1-63 characters"
            )
    if _is_dotted_ip(name):
        raise ValidationError(field, f"bucket name {name!r} must not be an IP address")
    if name.startswith("goog"):
        raise ValidationError(field, f"bucket name {name!r} must not start with 'goog'")
    if _GOOGLE_LIKE.search(name):
        raise ValidationError(field, f"bucket name {name!r} must not contain 'google' or a look-alike")
    return name


def validate_object_name(name: str, field: str = "object") -> str:
    """Return ``name`` if it is a safe, unambiguous GCS object name (or prefix ending in ``/``)."""
    if not isinstance(name, str) or not name:
        raise ValidationError(field, "object name must be a non-empty string")
    if len(name.encode("utf-8")) > _MAX_OBJECT_BYTES:
        raise ValidationError(field, f"object name must be at most {_MAX_OBJECT_BYTES} bytes in UTF-8")
    for char, what in (("\x00", "NUL"), ("\r", "carriage return"), ("\n", "line feed")):
        if char in name:
            raise ValidationError(field, f"object name must not contain a {what} character")
    if name.startswith("/"):
        raise ValidationError(field, f"object name {name!r} must not be absolute (leading '/')")
    if name.startswith(_ACME_PREFIX):
        raise ValidationError(field, f"object name must not start with {_ACME_PREFIX!r}")
    _check_segments(name, field)
    return name


def _check_segments(name: str, field: str) -> None:
    """No ``.``/``..`` and no empty segments: one object, one spelling, never outside its prefix."""
    segments = name.split("/")
    if name.endswith("/"):
        segments.pop()  # a trailing slash marks a prefix ("directory"), not an empty segment
    for segment in segments:
        if segment in (".", ".."):
            raise ValidationError(field, f"object name {name!r} must not contain '.' or '..' segments")
        if not segment:
            raise ValidationError(field, f"object name {name!r} must not contain empty segments ('//')")


@dataclass(frozen=True)
class GcsUri:
    """A validated ``gs://bucket/name`` (``name`` is empty for the bucket root)."""

    bucket: str
    name: str = ""

    @property
    def uri(self) -> str:
        return f"{SCHEME}{self.bucket}/{self.name}" if self.name else f"{SCHEME}{self.bucket}"

    def join(self, *parts: str, field: str = "uri") -> GcsUri:
        """A URI below this one; each part may hold ``/`` but is validated like any object name."""
        pieces = [self.name.rstrip("/")] if self.name else []
        pieces.extend(part.strip("/") for part in parts)
        name = "/".join(piece for piece in pieces if piece)
        if name:
            validate_object_name(name, field)
        return GcsUri(self.bucket, name)

    def __str__(self) -> str:
        return self.uri


def parse_gcs_uri(uri: str, field: str = "uri", *, require_object: bool = False) -> GcsUri:
    """Split ``gs://bucket[/name]`` after checking the scheme, the bucket and the object name.

    ``require_object`` rejects a bare bucket (``gs://b`` or ``gs://b/``) where a file is meant.
    """
    if not isinstance(uri, str) or not uri.startswith(SCHEME):
        raise ValidationError(field, f"must be a gs:// URI, got {uri!r}")
    bucket, _, name = uri[len(SCHEME) :].partition("/")
    validate_bucket_name(bucket, field)
    if name:
        validate_object_name(name, field)
    elif require_object:
        raise ValidationError(field, f"must name an object below the bucket, got {uri!r}")
    return GcsUri(bucket, name)


def _is_dotted_ip(name: str) -> bool:
    try:
        ipaddress.IPv4Address(name)
    except ValueError:
        return False
    return True


STORAGE_EMULATOR_ENV = "STORAGE_EMULATOR_HOST"


def storage_emulator_host() -> str | None:
    """``STORAGE_EMULATOR_HOST`` when set: every Cloud Storage client then talks to that emulator."""
    return os.environ.get(STORAGE_EMULATOR_ENV, "").strip() or None


def is_loopback(address: str) -> bool:
    """Whether ``address`` is on this machine: ``localhost``, 127.0.0.0/8 or ::1, never Google, never remote.

    The one loopback rule. ``address`` may be a URL (``http://127.0.0.2:8080/``), a host with a
    port (``localhost:5000``, ``[::1]:5000``) or a bare host (``localhost``, ``::1``, ``[::1]``).
    """
    address = address.strip()
    if "://" in address:
        host = urlsplit(address).hostname or ""
    else:
        bare = address.strip("[]")
        host = bare if _is_ip(bare) else (urlsplit(f"//{address}").hostname or "")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def is_emulator(url: str) -> bool:
    """An endpoint that gets anonymous credentials: loopback, or any plain-http URL.

    Google's APIs are https-only, so a plain-http endpoint is an emulator (the local training
    service on a compose network, say); and a bearer token must never travel over plain http.
    """
    return is_loopback(url) or urlsplit(url).scheme == "http"

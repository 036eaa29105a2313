"""Permission refusals on purpose: a disabled API, a denied ``actAs``, a bucket the agent cannot read.

The local service knows no IAM policy, so it grants everything, unless ``aip-local serve`` is told
otherwise, as ``--quota`` tells it what the region lacks (:mod:`.capacity`):

- ``--disable-api aiplatform.googleapis.com`` (or ``ml.googleapis.com``, ``logging.googleapis.com``):
  every call to that API answers Google's 403 ``SERVICE_DISABLED``, with its ``ErrorInfo``;
- ``--deny-act-as SA_EMAIL``: a create whose job runs as that ``serviceAccount`` answers IAM's 403
  for ``iam.serviceAccounts.actAs``; nothing is created;
- ``--unreadable-bucket NAME``: a create whose packages are in that bucket answers the preflight's
  400 FAILED_PRECONDITION naming the Vertex AI Custom Code Service Agent; nothing is created.

With ``--fault-admin`` each can be changed while the service runs: ``POST /_permissions`` with
``{"disabledApis": [...], "denyActAs": [...], "unreadableBuckets": [...]}`` replaces the lists it
names; ``GET`` shows them; ``DELETE`` grants everything again. The bodies are the model's
(:mod:`airflow_aip.jobs.permissions`), which the hooks read back into one line of advice.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.permissions import (
    SERVICE_TITLES,
    act_as_denied,
    agent_cannot_read,
    service_disabled,
)
from airflow_aip.uris import parse_gcs_uri

# Which API a path of this service belongs to (None: the service's own pages and admin routes).
_API_PATHS = (
    (re.compile(r"/(?:v1|ui)/projects/(?P<project>[^/]+)/locations/"), "aiplatform.googleapis.com"),
    (re.compile(r"/v1/projects/(?P<project>[^/:]+)(?:/|:|$)"), "ml.googleapis.com"),
    (re.compile(r"/v2/entries:"), "logging.googleapis.com"),
)
_BUCKET = re.compile(r"[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]")
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
_FIELDS = {"disabledApis", "denyActAs", "unreadableBuckets"}


class PermissionRefused(Exception):
    """A request refused on purpose; ``error`` is Google's ``error`` object to answer."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error["message"])
        self.error = error


@dataclass(frozen=True)
class PermissionSettings:
    disabled_apis: frozenset[str] = frozenset()
    deny_act_as: frozenset[str] = frozenset()
    unreadable_buckets: frozenset[str] = frozenset()


def parse_api(text: str, field: str = "--disable-api") -> str:
    if text not in SERVICE_TITLES:
        raise ValidationError(field, f"one of {', '.join(SERVICE_TITLES)}; got {text!r}")
    return text


def parse_service_account(text: str, field: str = "--deny-act-as") -> str:
    if not _EMAIL.fullmatch(text):
        raise ValidationError(field, f"a service account's email; got {text!r}")
    return text


def parse_bucket(text: str, field: str = "--unreadable-bucket") -> str:
    name = text.removeprefix("gs://").rstrip("/")
    if not _BUCKET.fullmatch(name):
        raise ValidationError(field, f"a bucket name (or gs://NAME); got {text!r}")
    return name


def api_of_path(path: str) -> tuple[str, str] | None:
    """``(API, project)`` of a request path this service serves as Google's; None for its own."""
    for pattern, api in _API_PATHS:
        match = pattern.match(path)
        if match is not None:
            return api, match.groupdict().get("project") or ""
    return None


class Permissions:
    """What is refused now: the flags' settings, changed at ``/_permissions``; thread-safe."""

    def __init__(self, settings: PermissionSettings) -> None:
        self._lock = threading.Lock()
        self._settings = settings

    def disabled(self, api: str) -> bool:
        with self._lock:
            return api in self._settings.disabled_apis

    def check_create(self, agent: str, service_account: str | None, packages: Iterable[str]) -> None:
        """Raise PermissionRefused if the job's ``serviceAccount`` or a package's bucket is refused;
        ``agent`` is the service agent that would read the packages."""
        with self._lock:
            settings = self._settings
        if service_account and service_account in settings.deny_act_as:
            raise PermissionRefused(act_as_denied(service_account))
        for uri in packages:
            bucket = parse_gcs_uri(uri, "packageUris").bucket
            if bucket in settings.unreadable_buckets:
                raise PermissionRefused(agent_cannot_read(agent, bucket))

    def update(self, body: Any) -> None:
        """Apply a ``POST /_permissions`` body: each list it names replaces the current one."""
        if not isinstance(body, Mapping) or set(body) - _FIELDS:
            raise ValidationError("body", f"a JSON object with only {', '.join(sorted(_FIELDS))}")
        parsers = {
            "disabledApis": parse_api,
            "denyActAs": parse_service_account,
            "unreadableBuckets": parse_bucket,
        }
        parsed: dict[str, frozenset[str]] = {}
        for name, parse in parsers.items():
            if name in body:
                items = body[name]
                if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
                    raise ValidationError(name, "must be a list of strings")
                parsed[name] = frozenset(parse(item, name) for item in items)
        with self._lock:
            current = self._settings
            self._settings = PermissionSettings(
                parsed.get("disabledApis", current.disabled_apis),
                parsed.get("denyActAs", current.deny_act_as),
                parsed.get("unreadableBuckets", current.unreadable_buckets),
            )

    def reset(self) -> None:
        with self._lock:
            self._settings = PermissionSettings()

    def snapshot(self) -> dict[str, list[str]]:
        with self._lock:
            settings = self._settings
        return {
            "disabledApis": sorted(settings.disabled_apis),
            "denyActAs": sorted(settings.deny_act_as),
            "unreadableBuckets": sorted(settings.unreadable_buckets),
        }


def disabled_answer(permissions: Permissions, path: str, number_of: Any) -> dict[str, Any] | None:
    """Google's SERVICE_DISABLED ``error`` for a request to a disabled API; None if it is served.

    ``number_of`` turns a path's project (an ID or a number) into its number, as Google names it.
    """
    found = api_of_path(path)
    if found is None or not permissions.disabled(found[0]):
        return None
    api, project = found
    return service_disabled(api, str(number_of(project)) if project else "0")

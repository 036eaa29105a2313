"""Credentials and project from an Airflow connection, shared by every hook.

We read the same connection extras as apache-airflow-providers-google (``key_path``,
``keyfile_dict``, ``project``, ``scope``, with or without the ``extra__google_cloud_platform__``
prefix), so a user's existing ``google_cloud_default`` connection keeps working without that
provider installed. When the connection does not exist, Application Default Credentials apply.

google.auth is imported inside functions: this module is on the DAG-parse path.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from airflow.sdk import BaseHook

from airflow_aip.exceptions import ValidationError

DEFAULT_CONN_ID = "google_cloud_default"
DEFAULT_SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
_PREFIX = "extra__google_cloud_platform__"
_KEYFILE_RULE = "must be a JSON object (a service-account key)"


@dataclass(frozen=True)
class ConnectionSettings:
    """What a Google Cloud connection says, parsed once. ``repr`` never shows key material."""

    project_id: str | None = None
    key_path: str | None = None
    keyfile_dict: dict[str, Any] | None = field(default=None, repr=False)
    scopes: tuple[str, ...] = DEFAULT_SCOPES
    extras: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_extras(cls, extras: dict[str, Any]) -> ConnectionSettings:
        """Parse provider-google style extras, prefixed or not (unprefixed wins)."""

        def get(name: str) -> Any:
            value = extras.get(name)
            return value if value not in (None, "") else extras.get(_PREFIX + name) or None

        keyfile = get("keyfile_dict")
        if isinstance(keyfile, str):
            try:
                keyfile = json.loads(keyfile)
            except json.JSONDecodeError:
                # Never echo the value: it is a secret.
                raise ValidationError("keyfile_dict", _KEYFILE_RULE) from None
        if keyfile is not None and not isinstance(keyfile, dict):
            raise ValidationError("keyfile_dict", _KEYFILE_RULE)
        scope = get("scope")
        scopes = tuple(s.strip() for s in str(scope).split(",") if s.strip()) if scope else DEFAULT_SCOPES
        return cls(
            project_id=get("project") or get("project_id"),
            key_path=get("key_path"),
            keyfile_dict=keyfile,
            scopes=scopes,
            extras={k.removeprefix(_PREFIX): v for k, v in extras.items()},
        )


def load_credentials(settings: ConnectionSettings) -> tuple[Any, str | None]:
    """Return ``(credentials, project_id)``: key file, key dict, or Application Default Credentials."""
    if settings.keyfile_dict is not None:
        from google.oauth2 import service_account

        creds = service_account.Credentials.from_service_account_info(
            settings.keyfile_dict, scopes=list(settings.scopes)
        )
        return creds, settings.project_id or settings.keyfile_dict.get("project_id")
    if settings.key_path:
        from google.oauth2 import service_account

        creds = service_account.Credentials.from_service_account_file(
            settings.key_path, scopes=list(settings.scopes)
        )
        return creds, settings.project_id or getattr(creds, "project_id", None)
    import google.auth

    creds, project = google.auth.default(scopes=list(settings.scopes))
    return creds, settings.project_id or project


def anonymous_credentials() -> Any:
    """Credentials for a local endpoint (the emulator or the local training service)."""
    from google.auth.credentials import AnonymousCredentials

    return AnonymousCredentials()


class GoogleCloudBaseHook(BaseHook):
    """Reads the Airflow connection once; subclasses build their client from it."""

    conn_name_attr = "gcp_conn_id"
    default_conn_name = DEFAULT_CONN_ID
    hook_name = "Google Cloud (airflow_aip)"

    def __init__(self, gcp_conn_id: str = DEFAULT_CONN_ID, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gcp_conn_id = gcp_conn_id

    @cached_property
    def settings(self) -> ConnectionSettings:
        """The connection's settings; a missing connection means Application Default Credentials."""
        from airflow.sdk.exceptions import AirflowNotFoundException

        try:
            conn = self.get_connection(self.gcp_conn_id)
        except AirflowNotFoundException:
            self.log.info("Connection %r not found: using Application Default Credentials", self.gcp_conn_id)
            return ConnectionSettings()
        return ConnectionSettings.from_extras(dict(conn.extra_dejson or {}))


def env_flag(name: str) -> str | None:
    """An environment variable's value, or None when unset or empty."""
    value = os.environ.get(name, "").strip()
    return value or None

"""Who a hook acts as: the Google provider's connection extras, turned into google-auth credentials.

Users come from ``apache-airflow-providers-google``: their ``google_cloud_default`` connection
must keep meaning the same identity here, without that provider installed. So we read its
extras (prefixed ``extra__google_cloud_platform__`` or not) and build credentials the way it
and Google's own clients do, with google-auth itself:

- ``keyfile_dict`` / ``key_path``: a service-account key; ``credential_config_file``: any
  google-auth credential file or JSON (workload identity federation's ``external_account``,
  ``impersonated_service_account``, ``authorized_user``...); none of them: Application
  Default Credentials; ``is_anonymous``: no credentials at all;
- ``impersonation_chain`` (extra or task argument): the last account is impersonated through
  the others, as the provider's hooks and triggers do;
- ``quota_project_id``: the ``x-goog-user-project`` every request then carries;
- ``scope``: comma-separated OAuth scopes.

An extra that carries credentials we do not support (Secret Manager keys, the IdP token flow)
is an error naming it. Falling back to ADC would silently act as a different identity.
google.auth is imported inside functions: this module is on the DAG-parse path.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_aip.exceptions import ValidationError

DEFAULT_SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
EXTRA_PREFIX = "extra__google_cloud_platform__"
IMPERSONATION_LIFETIME = 3600  # seconds; the provider's default
_KEYFILE_RULE = "must be a JSON object (a service-account key)"
# Credential-bearing extras of the Google provider that we do not implement: each is refused by
# name rather than ignored, because ignoring it means acting as someone else.
UNSUPPORTED_CREDENTIAL_EXTRAS = {
    "key_secret_name": "keys in Secret Manager are not read; put the key in keyfile_dict (from a secrets "
    "backend) or use credential_config_file",
    "key_secret_project_id": "keys in Secret Manager are not read; put the key in keyfile_dict",
    "idp_issuer_url": "the IdP token flow is not supported; use credential_config_file (workload "
    "identity federation)",
    "idp_extra_parameters": "the IdP token flow is not supported; use credential_config_file",
}
_SOURCES = ("keyfile_dict", "key_path", "credential_config_file")


def normalize_chain(chain: str | Sequence[str] | None, field_name: str = "impersonation_chain") -> list[str]:
    """``impersonation_chain`` as a list of accounts: a string may be one account or a comma list."""
    if chain is None or chain == "":
        return []
    accounts = chain.split(",") if isinstance(chain, str) else list(chain)
    if not all(isinstance(a, str) and "@" in a.strip() for a in accounts):
        raise ValidationError(field_name, f"must be service-account emails, got {chain!r}")
    return [a.strip() for a in accounts]


@dataclass(frozen=True)
class ConnectionSettings:
    """What a Google Cloud connection says, parsed once. ``repr`` never shows key material."""

    project_id: str | None = None
    key_path: str | None = None
    keyfile_dict: dict[str, Any] | None = field(default=None, repr=False)
    credential_config: dict[str, Any] | str | None = field(default=None, repr=False)
    impersonation_chain: tuple[str, ...] = ()
    quota_project_id: str | None = None
    anonymous: bool = False
    scopes: tuple[str, ...] = DEFAULT_SCOPES
    extras: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_extras(cls, extras: Mapping[str, Any]) -> ConnectionSettings:
        """Parse provider-google style extras, prefixed or not (unprefixed wins)."""
        plain = {k.removeprefix(EXTRA_PREFIX): v for k, v in extras.items() if k.startswith(EXTRA_PREFIX)}
        plain.update({k: v for k, v in extras.items() if not k.startswith(EXTRA_PREFIX)})
        given = {k: v for k, v in plain.items() if v not in (None, "")}
        for name, why in UNSUPPORTED_CREDENTIAL_EXTRAS.items():
            if name in given:
                raise ValidationError(f"extra.{name}", why)
        sources = [name for name in _SOURCES if name in given]
        if len(sources) > 1:
            raise ValidationError(f"extra.{sources[1]}", f"conflicts with {sources[0]}: set only one")
        anonymous = _flag(given.get("is_anonymous"))
        if anonymous and sources:
            raise ValidationError("extra.is_anonymous", f"conflicts with {sources[0]}: set only one")
        scope = given.get("scope")
        return cls(
            project_id=given.get("project") or given.get("project_id"),
            key_path=_text(given.get("key_path"), "extra.key_path"),
            keyfile_dict=_keyfile(given.get("keyfile_dict")),
            credential_config=_credential_config(given.get("credential_config_file")),
            impersonation_chain=tuple(
                normalize_chain(given.get("impersonation_chain"), "extra.impersonation_chain")
            ),
            quota_project_id=_text(given.get("quota_project_id"), "extra.quota_project_id"),
            anonymous=anonymous,
            scopes=tuple(s.strip() for s in str(scope).split(",") if s.strip()) if scope else DEFAULT_SCOPES,
            extras=plain,
        )


def _flag(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() in ("true", "1", "yes"))


def _text(value: Any, field_name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError(field_name, f"must be a string, got {type(value).__name__}")
    return value.strip() or None


def _keyfile(value: Any) -> dict[str, Any] | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise ValidationError("extra.keyfile_dict", _KEYFILE_RULE) from None  # never echo a secret
    if value is not None and not isinstance(value, dict):
        raise ValidationError("extra.keyfile_dict", _KEYFILE_RULE)
    return value


def _credential_config(value: Any) -> dict[str, Any] | str | None:
    """A path to a credential file, or its JSON content (as the provider accepts both)."""
    if value is None or isinstance(value, dict):
        return value
    if not isinstance(value, str):
        raise ValidationError("extra.credential_config_file", "must be a file path or a JSON object")
    if value.lstrip().startswith("{"):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            raise ValidationError("extra.credential_config_file", "is not valid JSON") from None
        if not isinstance(parsed, dict):
            raise ValidationError("extra.credential_config_file", "must be a JSON object")
        return parsed
    return value


def _readable(path: str, field_name: str) -> str:
    """A missing key file is a configuration error to report now, not an outage to retry."""
    if not Path(path).is_file():
        raise ValidationError(field_name, f"no such file: {path}")
    return path


def _base_credentials(settings: ConnectionSettings) -> tuple[Any, str | None]:
    scopes = list(settings.scopes)
    if settings.anonymous:
        return anonymous_credentials(), settings.project_id
    if settings.keyfile_dict is not None:
        from google.oauth2 import service_account

        creds = service_account.Credentials.from_service_account_info(settings.keyfile_dict, scopes=scopes)
        return creds, settings.keyfile_dict.get("project_id")
    if settings.key_path:
        from google.oauth2 import service_account

        path = _readable(settings.key_path, "extra.key_path")
        creds = service_account.Credentials.from_service_account_file(path, scopes=scopes)
        return creds, getattr(creds, "project_id", None)
    import google.auth

    # An external account's project is looked up (Resource Manager) while loading: through the
    # same requests session as every token request, so one transport serves all auth traffic.
    found: tuple[Any, str | None]
    if isinstance(settings.credential_config, dict):
        found = google.auth.load_credentials_from_dict(
            settings.credential_config, scopes=scopes, request=auth_request()
        )
    elif settings.credential_config:
        path = _readable(settings.credential_config, "extra.credential_config_file")
        found = google.auth.load_credentials_from_file(path, scopes=scopes, request=auth_request())
    else:
        found = google.auth.default(scopes=scopes)
    return found


def load_credentials(
    settings: ConnectionSettings, impersonation_chain: str | Sequence[str] | None = None
) -> tuple[Any, str | None]:
    """``(credentials, project_id)`` for the connection, impersonating the chain's last account.

    The task's ``impersonation_chain`` wins over the connection's. The project is the
    connection's, else the impersonated account's (``sa@PROJECT.iam.gserviceaccount.com``),
    else the credentials'.
    """
    credentials, project = _base_credentials(settings)
    chain = normalize_chain(impersonation_chain) or list(settings.impersonation_chain)
    if chain:
        from google.auth import impersonated_credentials

        credentials = impersonated_credentials.Credentials(
            source_credentials=credentials,
            target_principal=chain[-1],
            delegates=[f"projects/-/serviceAccounts/{account}" for account in chain[:-1]],
            target_scopes=list(settings.scopes),
            lifetime=IMPERSONATION_LIFETIME,
        )
        project = _project_of_account(chain[-1]) or project
    if settings.quota_project_id:
        if not hasattr(credentials, "with_quota_project"):
            raise ValidationError("extra.quota_project_id", "these credentials cannot carry a quota project")
        credentials = credentials.with_quota_project(settings.quota_project_id)
    return credentials, settings.project_id or project


def _project_of_account(email: str) -> str | None:
    name, _, domain = email.partition("@")
    suffix = ".iam.gserviceaccount.com"
    return domain.removesuffix(suffix) if name and domain.endswith(suffix) else None


@functools.cache
def auth_request() -> Any:
    """google-auth's transport for token requests; one per process (it holds a requests session)."""
    from google.auth.transport.requests import Request

    return Request()


def anonymous_credentials() -> Any:
    """Credentials for a local endpoint (the emulator or the local training service)."""
    from google.auth.credentials import AnonymousCredentials

    return AnonymousCredentials()

"""Model Registry names and rules (aiplatform v1 ``models``), once, for the hook and the local service.

A model is ``projects/{project}/locations/{location}/models/{model_id}``; each upload under it is
a version, ``versionId`` "1", "2"... (auto-incrementing decimal strings). A version is addressed
as ``{model}@{versionId}`` or ``{model}@{alias}``; the bare name means the version holding the
``default`` alias. An alias is on one version at a time: merging it onto a version takes it from
whichever held it. The first version gets ``default``, and a model always has exactly one.

Rules are the discovery document's (aiplatform.v1.json): ``UploadModelRequest.modelId``,
``Model.versionAliases``, ``MergeVersionAliasesRequest.versionAliases``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_aip.exceptions import ValidationError

DEFAULT_ALIAS = "default"
# "up to 63 characters, and valid characters are [a-z0-9_-]. The first character cannot be a
# number or hyphen." (UploadModelRequest.modelId)
MODEL_ID = re.compile(r"[a-z_][a-z0-9_-]{0,62}")
# "at most 128 characters, and match a-z{0,126}[a-z-0-9]": a letter first, so that an alias never
# reads as a version ID (MergeVersionAliasesRequest.versionAliases).
ALIAS = re.compile(r"[a-z][a-zA-Z0-9-]{0,126}[a-z0-9]")
VERSION_ID = re.compile(r"[1-9][0-9]{0,18}")
_NAME = re.compile(
    r"projects/(?P<project>[^/@]+)/locations/(?P<location>[^/@]+)/models/(?P<model>[^/@]+)"
    r"(?:@(?P<version>[^/@]+))?"
)


@dataclass(frozen=True)
class ModelRef:
    """A model, or one version of it (``version``: a version ID or an alias; None: the default)."""

    project: str
    location: str
    model_id: str
    version: str | None = None

    @property
    def name(self) -> str:
        """The model's resource name, without a version."""
        return f"projects/{self.project}/locations/{self.location}/models/{self.model_id}"

    @property
    def versioned(self) -> str:
        """``name@version`` (the bare name when no version is given)."""
        return f"{self.name}@{self.version}" if self.version else self.name

    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/{self.location}"

    def at(self, version: str) -> ModelRef:
        return ModelRef(self.project, self.location, self.model_id, version)

    @property
    def by_alias(self) -> bool:
        return self.version is not None and not VERSION_ID.fullmatch(self.version)


def parse_model_name(text: str, field: str = "name") -> ModelRef:
    """``projects/P/locations/L/models/M[@V]`` as a ModelRef; a ValidationError naming ``field`` otherwise."""
    match = _NAME.fullmatch(str(text).strip())
    if match is None:
        raise ValidationError(
            field,
            "must be a model resource name, projects/{project}/locations/{location}/models/{model}"
            f"[@{{version or alias}}]; got {text!r}",
        )
    version = match["version"]
    if version is not None and not (VERSION_ID.fullmatch(version) or ALIAS.fullmatch(version)):
        raise ValidationError(field, f"{version!r} after '@' is neither a version ID nor an alias")
    return ModelRef(match["project"], match["location"], match["model"], version)


def validate_model_id(model_id: str, field: str = "modelId") -> str:
    if not MODEL_ID.fullmatch(model_id):
        raise ValidationError(
            field,
            "may be up to 63 characters of [a-z0-9_-], and its first character cannot be a number or "
            f"hyphen; got {model_id!r}",
        )
    return model_id


def validate_alias(alias: str, field: str = "versionAliases") -> str:
    if not ALIAS.fullmatch(alias):
        raise ValidationError(
            field,
            "an alias is at most 128 characters, starts with a lowercase letter, ends with a lowercase "
            f"letter or digit and holds only letters, digits and '-' (so it never reads as a version ID); "
            f"got {alias!r}",
        )
    return alias


def alias_changes(entries: Sequence[str], field: str = "versionAliases") -> tuple[list[str], list[str]]:
    """A merge request's aliases split into (added, removed): ``-golden`` removes ``golden``.

    Adding and removing the same alias in one request cancel out, as the API documents.
    """
    added: list[str] = []
    removed: list[str] = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, str):
            raise ValidationError(f"{field}[{index}]", f"must be a string, got {entry!r}")
        name = entry[1:] if entry.startswith("-") else entry
        validate_alias(name, f"{field}[{index}]")
        (removed if entry.startswith("-") else added).append(name)
    both = set(added) & set(removed)
    return [a for a in added if a not in both], [r for r in removed if r not in both]


def operation_state(operation: Mapping[str, Any]) -> str:
    """A long-running operation as a job state: RUNNING until ``done``, then SUCCEEDED or FAILED."""
    if not operation.get("done"):
        return "RUNNING"
    return "FAILED" if operation.get("error") else "SUCCEEDED"


def operation_error(operation: Mapping[str, Any]) -> str:
    """The error of a failed operation, in one line."""
    error = operation.get("error") or {}
    return f"code {error.get('code')}: {error.get('message') or 'no message'}"

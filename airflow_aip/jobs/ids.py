"""Job IDs: ``{prefix}_{YYYYMMDD_HHMMSS}`` and the API's rule for them.

The rule (seed 001): letters, digits and underscores only; starts with a letter; at most
128 characters. A generated ID is shortened in its prefix, never in its timestamp or attempt
suffix, so IDs still sort by time and retries of one run still find their job.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

from airflow_aip.exceptions import ValidationError

JOB_ID_MAX_LENGTH = 128
TIMESTAMP_FORMAT = "%Y%m%d_%H%M%S"
_FORBIDDEN_RUN = re.compile(r"[^A-Za-z0-9_]+")
_ALLOWED = re.compile(r"[A-Za-z0-9_]*")
_ATTEMPT_SUFFIX = re.compile(r"_r([0-9]+)$")


def sanitize_prefix(prefix: str, field: str = "job_id_prefix") -> str:
    """Letters, digits and underscores; a run of anything else becomes one ``_``; starts with a letter."""
    if not isinstance(prefix, str):
        raise ValidationError(field, f"must be a string, got {type(prefix).__name__}")
    cleaned = _FORBIDDEN_RUN.sub("_", prefix).strip("_")
    if not cleaned:
        return "job"
    if not ("a" <= cleaned[0].lower() <= "z"):
        cleaned = "job_" + cleaned
    return cleaned


def _utc(when: datetime) -> datetime:
    """Naive datetimes are taken to be UTC already (Airflow's dates are aware and UTC)."""
    return when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when.astimezone(timezone.utc)


def make_job_id(prefix: str, when: datetime, suffix: str | None = None) -> str:
    """``{prefix}_{YYYYMMDD_HHMMSS}[_{suffix}]``, ``when`` in UTC, valid by construction.

    ``suffix`` is e.g. ``"r2"`` for a second attempt; a leading underscore is optional.
    """
    tail = "_" + _utc(when).strftime(TIMESTAMP_FORMAT)
    if suffix:
        clean_suffix = _FORBIDDEN_RUN.sub("_", suffix).strip("_")
        if clean_suffix:
            tail += "_" + clean_suffix
    if len(tail) >= JOB_ID_MAX_LENGTH - 1:
        raise ValidationError("suffix", f"leaves no room for a prefix within {JOB_ID_MAX_LENGTH} characters")
    head = sanitize_prefix(prefix)[: JOB_ID_MAX_LENGTH - len(tail)].rstrip("_") or "job"
    return head + tail


def with_attempt(job_id: str, attempt: int) -> str:
    """The ID of attempt ``attempt`` of ``job_id``: itself for 1, ``{job_id}_r{attempt}`` after.

    An existing ``_rN`` suffix is replaced, not stacked. The base is shortened to fit 128
    characters; for IDs from :func:`make_job_id` prefer passing ``suffix=f"r{attempt}"`` there,
    which shortens the prefix instead.
    """
    if attempt < 1:
        raise ValidationError("attempt", "must be at least 1")
    base = _ATTEMPT_SUFFIX.sub("", job_id)
    if attempt == 1:
        return base
    tail = f"_r{attempt}"
    return base[: JOB_ID_MAX_LENGTH - len(tail)] + tail


def attempt_of(job_id: str) -> int:
    """The attempt number an ID carries: N for ``..._rN``, else 1."""
    match = _ATTEMPT_SUFFIX.search(job_id)
    return int(match.group(1)) if match else 1


def validate_job_id(job_id: str, field: str = "job_id") -> str:
    """Return ``job_id`` unchanged if the API would accept it; else say which rule it breaks."""
    if not isinstance(job_id, str):
        raise ValidationError(field, f"must be a string, got {type(job_id).__name__}")
    if not job_id:
        raise ValidationError(field, "must not be empty")
    if len(job_id) > JOB_ID_MAX_LENGTH:
        raise ValidationError(field, f"must be at most {JOB_ID_MAX_LENGTH} characters, got {len(job_id)}")
    if not _ALLOWED.fullmatch(job_id):
        bad = sorted({c for c in job_id if not _ALLOWED.fullmatch(c)})
        raise ValidationError(
            field, f"may contain only letters, digits and underscores; found {''.join(bad)!r}"
        )
    if not ("a" <= job_id[0].lower() <= "z"):
        raise ValidationError(field, f"must start with a letter, starts with {job_id[0]!r}")
    return job_id

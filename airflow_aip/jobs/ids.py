"""Job IDs: ``{prefix}[_{map_index}]_{YYYYMMDD_HHMMSS}[_{hash}][_rN]``, and the API's rule for them.

AI Platform Training's rule for job IDs: letters, digits and underscores only; starts with a letter; at most
128 characters. Its documented naming convention: a base name, then the date and time (UTC). Each part
is there for a reason:

- the prefix (by default ``{dag_id}_{task_id}``), sanitised, is the only part ever cut;
- the map index stays visible even when the prefix is cut;
- the timestamp is the run's logical date (or run_after), so IDs sort by time;
- the hash (12 hex digits, :mod:`.hashing`) is of everything that tells the job's owner apart:
  the whole prefix, the map index, and for a task the dag id, task id and run id. So two runs
  triggered in the same second, or two prefixes that differ only past the cut, get different
  IDs, while every try of one task instance (same run, same map index) computes the same ID
  and finds the job its previous try created. 1,000 IDs that differ only in it collide with
  probability under 2e-9 (birthday bound over 48 bits);
- ``_rN`` names attempt N >= 2 (after a job that failed, or one that is not ours). Room for
  ``_r{MAX_ATTEMPTS}`` is always left, so an attempt ID never cuts its base.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timezone

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.hashing import short_hash, shorten

JOB_ID_MAX_LENGTH = 128
MAX_ATTEMPTS = 100  # attempt IDs tried for one base before giving up: _r2 ... _r100
TIMESTAMP_FORMAT = "%Y%m%d_%H%M%S"
_STAMP_LENGTH = len("_YYYYMMDD_HHMMSS")
_ATTEMPT_ROOM = len(f"_r{MAX_ATTEMPTS}")
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


def make_job_id(
    prefix: str, when: datetime, *, map_index: int | None = None, distinct_by: Sequence[object] = ()
) -> str:
    """``{prefix}[_{map_index}]_{YYYYMMDD_HHMMSS}[_{hash}]``, ``when`` in UTC, valid by construction.

    The hash (of ``prefix``, ``map_index`` and ``distinct_by``) is there when ``distinct_by``
    is given or the prefix had to be cut: a cut prefix never merges two IDs.
    """
    if map_index is not None and (
        isinstance(map_index, bool) or not isinstance(map_index, int) or map_index < 0
    ):
        raise ValidationError("map_index", f"must be a non-negative integer or None, got {map_index!r}")
    head = sanitize_prefix(prefix)
    mapped = f"_{map_index}" if map_index is not None else ""
    stamp = "_" + _utc(when).strftime(TIMESTAMP_FORMAT)
    room = JOB_ID_MAX_LENGTH - _ATTEMPT_ROOM - _STAMP_LENGTH - len(mapped)
    if not distinct_by and len(head) <= room:
        return head + mapped + stamp
    digest = "_" + short_hash(prefix, map_index, *distinct_by)
    return (head[: room - len(digest)].rstrip("_") or "job") + mapped + stamp + digest


def job_id_for_task(
    prefix: str | None, when: datetime, *, dag_id: str, task_id: str, run_id: str | None, map_index: int = -1
) -> str:
    """The base job ID of one task instance: the same for all its tries, distinct from any other's.

    ``prefix`` defaults to ``{dag_id}_{task_id}``; ``map_index`` -1 (or None) means not mapped.
    dag id and task id are hashed apart from the prefix: ``a_b``/``c`` and ``a``/``b_c`` differ.
    """
    return make_job_id(
        prefix or f"{dag_id}_{task_id}",
        when,
        map_index=map_index if map_index is not None and map_index >= 0 else None,
        distinct_by=(dag_id, task_id, run_id),
    )


def with_attempt(job_id: str, attempt: int) -> str:
    """The ID of attempt ``attempt`` of ``job_id``: itself for 1, ``{job_id}_r{attempt}`` after.

    An existing ``_rN`` suffix is replaced, not stacked. IDs from :func:`make_job_id` leave room
    for the suffix; any other base too long for it is cut and keeps a hash of itself.
    """
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
        raise ValidationError("attempt", f"must be a whole number of at least 1, got {attempt!r}")
    base = _ATTEMPT_SUFFIX.sub("", job_id)
    if attempt == 1:
        return base
    tail = f"_r{attempt}"
    return shorten(base, JOB_ID_MAX_LENGTH - len(tail), sep="_") + tail


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


def validate_pinned_job_id(job_id: str, field: str = "job_id") -> str:
    """A job ID a user pins: valid, and not ending in ``_rN``, the suffix that names attempts.

    Attempt 1 of a base is the base with any ``_rN`` removed (:func:`with_attempt`), so a
    pinned ``model_r3`` would silently become ``model``.
    """
    validate_job_id(job_id, field)
    if _ATTEMPT_SUFFIX.search(job_id):
        raise ValidationError(
            field,
            f"must not end in _r<number> ({job_id!r}): that suffix names the attempts after a failed job",
        )
    return job_id

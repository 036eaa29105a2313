"""Job labels: the rules Google Cloud applies to them, and Airflow's identity as labels.

Two rules, one per API (:class:`LabelRule`). ml v1: at most 64 labels; keys 1-63 characters,
values 0-63, both made of ASCII lowercase letters, digits, ``_`` and ``-``; keys start with a
letter. Vertex AI (custom_job.proto, ``labels``): up to 64 characters (Unicode codepoints),
"lowercase letters, numeric characters, underscores and dashes. International characters are
allowed." Airflow identifiers (``manual__2024-01-01T00:00:00+00:00``) break both, so they are
sanitised to the ml v1 rule, which is valid on both; a value cut to 63 characters keeps a short
hash of the original (see :mod:`.hashing`) so two long run ids do not collapse into one label.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.hashing import shorten

MAX_LABELS = 64
MAX_LABEL_LENGTH = 63
_FORBIDDEN_RUN = re.compile(r"[^a-z0-9_-]+")
_VALUE = re.compile(r"[a-z0-9_-]{0,63}")
_KEY = re.compile(r"[a-z][a-z0-9_-]{0,62}")
# Vertex's "lowercase letters ... International characters are allowed": Ll, and letters without
# case (Lo: CJK, Arabic...; Lm). [U] unverified: that caseless letters, combining marks (Mn, Mc: a
# decomposed "é") and non-ASCII decimal digits (Nd) count; Google names no Unicode categories.
_VERTEX_LETTERS = frozenset({"Ll", "Lo", "Lm"})
_VERTEX_CHARS = _VERTEX_LETTERS | {"Mn", "Mc", "Nd"}


@dataclass(frozen=True)
class LabelRule:
    """What one API takes as a label key or value: how long, and whether letters may be non-ASCII."""

    max_length: int
    international: bool

    def valid(self, text: str, *, key: bool) -> bool:
        """Whether ``text`` is a valid label key (``key``) or value under this rule."""
        if not self.international:
            return bool((_KEY if key else _VALUE).fullmatch(text))
        # [U] unverified: Vertex states no first-character rule for keys (nor that they are not empty);
        # Cloud's general label rule ("keys must start with a lowercase letter or international
        # character") is kept.
        if key and not (text and unicodedata.category(text[0]) in _VERTEX_LETTERS):
            return False
        return len(text) <= self.max_length and all(
            c in "_-" or unicodedata.category(c) in _VERTEX_CHARS for c in text
        )

    def describe(self, what: str) -> str:
        letters = "lowercase letters (any script)" if self.international else "lowercase letters"
        lengths = f"1-{self.max_length}" if what == "key" else f"0-{self.max_length}"
        start = ", starting with a letter" if what == "key" else ""
        return f"{what} must be {lengths} {letters}, digits, '_' or '-'{start}"


ML_V1_LABELS = LabelRule(MAX_LABEL_LENGTH, international=False)
VERTEX_LABELS = LabelRule(64, international=True)

DAG_ID_LABEL = "airflow-dag-id"
TASK_ID_LABEL = "airflow-task-id"
RUN_ID_LABEL = "airflow-run-id"
MAP_INDEX_LABEL = "airflow-map-index"
# Vertex AI assigns numeric IDs: our job ID (sanitised) in this label is how a job is found again.
# An underscore, not a dash: it is written in list filters (``labels.aip_job_id="..."``).
JOB_ID_LABEL = "aip_job_id"
# Together they name the task instance that made a job: the adoption rule's owner.
OWNER_LABELS = (DAG_ID_LABEL, TASK_ID_LABEL, RUN_ID_LABEL, MAP_INDEX_LABEL)
# The try that made the job: tells a job made before the task instance was last cleared (see
# jobs.adoption.Tries). It differs between tries by design, so it is never a spec difference.
TRY_LABEL = "airflow-try-number"


@lru_cache(maxsize=8192)  # the triggerer's job poller asks again for every watched job each round
def sanitize_label_value(value: str) -> str:
    """Lowercase; any run of other characters becomes ``-``; long values end in a hash of the original."""
    cleaned = _FORBIDDEN_RUN.sub("-", str(value).lower()).strip("-")
    return shorten(cleaned, MAX_LABEL_LENGTH, sep="-", original=str(value))


def sanitize_label_key(key: str) -> str:
    """As a value, and starting with a letter (else ``k-`` is put in front)."""
    cleaned = sanitize_label_value(key) or "k"
    if not cleaned[0].isalpha():
        cleaned = sanitize_label_value("k-" + cleaned)
    return cleaned


def validate_labels(
    labels: object, field: str = "labels", *, rule: LabelRule = ML_V1_LABELS
) -> dict[str, str]:
    """Return ``labels`` as a plain dict if Google would accept it under ``rule``, else name the rule broken.

    ml v1's rule by default; the Vertex AI validator passes :data:`VERTEX_LABELS`.
    """
    if not isinstance(labels, Mapping):
        raise ValidationError(field, f"must be a mapping of strings, got {type(labels).__name__}")
    if len(labels) > MAX_LABELS:
        raise ValidationError(field, f"at most {MAX_LABELS} labels, got {len(labels)}")
    out: dict[str, str] = {}
    for key, value in labels.items():
        if not isinstance(key, str) or not rule.valid(key, key=True):
            raise ValidationError(f"{field}.{key}", rule.describe("key"))
        if not isinstance(value, str) or not rule.valid(value, key=False):
            raise ValidationError(f"{field}.{key}", rule.describe("value"))
        out[key] = value
    return out


def airflow_labels(
    dag_id: str,
    task_id: str,
    run_id: str | None,
    user_labels: Mapping[str, str] | None = None,
    map_index: int | None = None,
    try_number: int | None = None,
) -> dict[str, str]:
    """The user's labels (sanitised) plus the task instance's identity; ours win on a clash.

    The identity (dag id, task id, run id, and the map index of a mapped task) is what the
    adoption rule reads to tell an earlier try's job from another run's; the try number tells
    a job made before a clear from one made since.
    """
    labels = {sanitize_label_key(k): sanitize_label_value(v) for k, v in (user_labels or {}).items()}
    labels[DAG_ID_LABEL] = sanitize_label_value(dag_id)
    labels[TASK_ID_LABEL] = sanitize_label_value(task_id)
    if run_id:
        labels[RUN_ID_LABEL] = sanitize_label_value(run_id)
    if map_index is not None and map_index >= 0:
        labels[MAP_INDEX_LABEL] = str(map_index)
    if try_number is not None:
        labels[TRY_LABEL] = str(try_number)
    return validate_labels(labels)

"""The region's capacity as flags and as ``/_capacity`` bodies, read into :mod:`.capacity`'s model.

Every value is checked whole before anything changes (ValidationError naming the field), so a
typo in a test's body fails that test at once instead of leaving the region as it was.

``GET /_capacity`` answers the model's state, always (a test, or someone wondering why a job waits).
``POST /_capacity`` changes it and ``DELETE /_capacity`` makes the region unconstrained again, only
with ``--fault-admin`` (as ``/_faults``), or with ``--capacity-admin`` from loopback (what ``make ui``
and ``make demo`` start: a Dag's ``local_stockout`` Param asks from the task, on this machine).
A POST body, every field optional::

    {"quotas": {"us-central1:custom_model_training_nvidia_t4_gpus": 1,   # null removes the limit
                "us-central1:custom_model_training_cpus": null},
     "quotaMode": "queue",                          # or "reject": 429 at create past a limit
     "stockouts": ["us-central1:NVIDIA_TESLA_A100",   # the whole set: [] restocks everything
                   "us-central1:my-reservation",     # a reservation, by name
                   "us-central1:SPOT"],              # every Spot VM (a strategy: SPOT, STANDARD...)
     "stockoutsRemoved": ["us-west1:SPOT"],         # or a change, in one step: these out (after
     "stockoutsAdded": ["us-west1:STANDARD"],       # "stockouts"), then these in; others' kept
     "flexStartCapacityAfter": 5,                   # seconds a FLEX_START job waits; null: for ever
     "flexStartCapacityNow": true,                  # capacity for every FLEX_START job waiting now
     "preemptSpotAfter": 2,                         # seconds into a SPOT job; null: never
     "preempt": ["<job id>"],                       # reclaim a running SPOT job's VMs now
     "create429": ["rate:2", "quota:1"]}            # the next creates get 429 (added to the queue)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.local.capacity import CREATE_429_KINDS, QUOTA_MODES, CapacitySettings, RegionCapacity

_REGION = re.compile(r"[a-z]+(-[a-z]+)+[0-9]+")
_METRIC = re.compile(r"custom_model_training_[a-z0-9_]+")
# A Compute Engine resource name (a reservation's); one shaped like a machine type is a typo of one.
_RESERVATION = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
_MACHINE_LIKE = re.compile(r"[a-z][a-z0-9]*-(standard|high[a-z]+|mega[a-z]+|ultra[a-z]+)-[0-9][0-9a-z]*")
# A scheduling strategy a stockout may name: the region has no VMs of that kind to give.
STRATEGY_STOCKOUTS = ("SPOT", "STANDARD", "FLEX_START")
_TIMING = {"flexStartCapacityAfter": "flex_start_after", "preemptSpotAfter": "preempt_spot_after"}
_STOCKOUT_FIELDS = ("stockouts", "stockoutsAdded", "stockoutsRemoved")
_FIELDS = {"quotas", "quotaMode", *_STOCKOUT_FIELDS, "flexStartCapacityNow", "preempt", "create429", *_TIMING}


def _region(text: str, field: str) -> str:
    if not _REGION.fullmatch(text):
        raise ValidationError(field, f"{text!r} is not a region like us-central1")
    return text


def parse_quota(text: str, field: str = "--quota") -> tuple[str, str, int]:
    """``us-central1:custom_model_training_nvidia_t4_gpus=0`` -> (region, metric, limit)."""
    where, _, limit = text.partition("=")
    region, _, metric = where.partition(":")
    if not _METRIC.fullmatch(metric):
        raise ValidationError(
            field, f"the metric in {text!r} is not like custom_model_training_nvidia_t4_gpus"
        )
    return _region(region, field), metric, _count(limit, field, text)


def _count(value: Any, field: str, text: Any) -> int:
    if isinstance(value, bool) or not (isinstance(value, int) or str(value).isdigit()):
        raise ValidationError(field, f"needs a whole number >= 0, got {text!r}")
    return int(value)


def _known_hardware() -> set[str] | None:
    try:
        from airflow_aip.jobs.vertex import hardware
    except ImportError:  # the table is optional here: then any name goes
        return None
    known = set(hardware.MACHINES) | set(hardware.N1_GPUS) | set(hardware.REFUSED_ACCELERATORS)
    for accelerators in hardware.REGION_ACCELERATORS.values():
        known |= accelerators
    return known


def parse_stockout(text: str, field: str = "--stockout") -> tuple[str, str]:
    """``us-central1:NVIDIA_TESLA_A100`` (or a machine type, or a reservation's name) -> (region, name).

    A name that is no known machine or accelerator type is a reservation's if it is a valid one and
    does not look like a machine type (``n1-standard-5`` is a typo, not a reservation).
    """
    region, _, name = text.partition(":")
    if name in STRATEGY_STOCKOUTS:  # every VM of that scheduling strategy (Vertex AI jobs)
        return _region(region, field), name
    known = _known_hardware()
    reservation = _RESERVATION.fullmatch(name) and not _MACHINE_LIKE.fullmatch(name)
    if not name or (known is not None and name not in known and not reservation):
        raise ValidationError(
            field,
            f"{name!r} in {text!r} is no machine or accelerator type Vertex AI knows, nor a reservation name",
        )
    return _region(region, field), name


def parse_seconds(value: Any, field: str) -> float | None:
    """Seconds >= 0, or ``never``/None."""
    if value is None or value == "never":
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = -1.0
    if isinstance(value, bool) or not 0 <= number <= 7 * 24 * 3600:
        raise ValidationError(field, f"needs seconds (0 to 7 days) or 'never', got {value!r}")
    return number


def parse_create_429(text: str, field: str = "--create-429") -> tuple[str, int]:
    """``rate:N`` or ``quota:N`` (N defaults to 1): the next N creates get 429."""
    kind, _, count = text.partition(":")
    if kind not in CREATE_429_KINDS:
        raise ValidationError(field, f"must be rate[:N] or quota[:N], got {text!r}")
    number = _count(count or "1", field, text)
    if not number:
        raise ValidationError(field, f"N must be at least 1, got {text!r}")
    return kind, number


def parse_quota_mode(text: Any, field: str = "--quota-mode") -> str:
    if text not in QUOTA_MODES:
        raise ValidationError(field, f"must be one of {', '.join(QUOTA_MODES)}, got {text!r}")
    return str(text)


def _strings(body: Mapping[str, Any], name: str) -> list[str]:
    value = body[name]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValidationError(name, "must be a list of strings")
    return value


@dataclass
class CapacityUpdate:
    """A ``POST /_capacity`` body, read and checked; nothing applied yet."""

    quotas: list[tuple[str, str, int | None]] = field(default_factory=list)
    quota_mode: str | None = None
    stockouts: set[tuple[str, str]] | None = None
    stockouts_added: set[tuple[str, str]] = field(default_factory=set)
    stockouts_removed: set[tuple[str, str]] = field(default_factory=set)
    timing: dict[str, float | None] = field(default_factory=dict)  # attribute -> seconds, as given
    flex_start_now: bool = False
    preempt: list[str] = field(default_factory=list)
    create_429: list[tuple[str, int]] = field(default_factory=list)


def _quotas(value: Any) -> list[tuple[str, str, int | None]]:
    if not isinstance(value, Mapping):
        raise ValidationError(
            "quotas", 'must be an object like {"us-central1:custom_model_training_cpus": 8}'
        )
    quotas: list[tuple[str, str, int | None]] = []
    for key, limit in value.items():
        region, metric, _ = parse_quota(f"{key}=0", "quotas")
        quotas.append((region, metric, None if limit is None else _count(limit, "quotas", limit)))
    return quotas


def _stockout_set(body: Mapping[str, Any], name: str) -> set[tuple[str, str]]:
    return {parse_stockout(item, name) for item in _strings(body, name)} if name in body else set()


def parse_update(body: Any) -> CapacityUpdate:
    """A ``POST /_capacity`` body, checked whole (ValidationError naming the field)."""
    if not isinstance(body, Mapping):
        raise ValidationError("body", "must be a JSON object")
    unknown = sorted(set(body) - _FIELDS)
    if unknown:
        raise ValidationError(unknown[0], f"unknown field; known: {', '.join(sorted(_FIELDS))}")
    update = CapacityUpdate(quotas=_quotas(body.get("quotas") or {}))
    if "quotaMode" in body:
        update.quota_mode = parse_quota_mode(body["quotaMode"], "quotaMode")
    if "stockouts" in body:
        update.stockouts = _stockout_set(body, "stockouts")
    if "stockoutsAdded" in body:
        update.stockouts_added = {
            parse_stockout(s, "stockoutsAdded") for s in _strings(body, "stockoutsAdded")
        }
    if "stockoutsRemoved" in body:
        removed = _strings(body, "stockoutsRemoved")
        update.stockouts_removed = {parse_stockout(s, "stockoutsRemoved") for s in removed}
    for name, attribute in _TIMING.items():
        if name in body:
            update.timing[attribute] = parse_seconds(body[name], name)
    update.flex_start_now = bool(body.get("flexStartCapacityNow"))
    update.preempt = _strings(body, "preempt") if "preempt" in body else []
    if "create429" in body:
        update.create_429 = [parse_create_429(item, "create429") for item in _strings(body, "create429")]
    return update


def apply_update(capacity: RegionCapacity, body: Any) -> None:
    """A ``POST /_capacity`` body, checked whole, then applied; the scheduler is woken."""
    update = parse_update(body)
    for job_id in update.preempt:  # refused (400) before anything changed if the job is no SPOT job
        capacity.preempt(job_id)
    for region, metric, limit in update.quotas:
        capacity.set_quota(region, metric, limit)
    if update.quota_mode is not None:
        capacity.quota_mode = update.quota_mode
    if update.stockouts is not None:
        capacity.set_stockouts(update.stockouts)
    if update.stockouts_added or update.stockouts_removed:
        capacity.change_stockouts(update.stockouts_added, update.stockouts_removed)
    for attribute, value in update.timing.items():
        setattr(capacity, attribute, value)
    if update.flex_start_now:
        capacity.grant_flex_start()
    for kind, count in update.create_429:
        capacity.add_create_429(kind, count)
    capacity.changed()


def settings_from_flags(
    quotas: list[tuple[str, str, int]],
    quota_mode: str,
    stockouts: list[tuple[str, str]],
    flex_start_after: float | None,
    preempt_spot_after: float | None,
    create_429: list[tuple[str, int]],
) -> CapacitySettings:
    """``aip-local serve``'s capacity flags as the model's settings."""
    return CapacitySettings(
        tuple(quotas), quota_mode, tuple(stockouts), flex_start_after, preempt_spot_after, tuple(create_429)
    )

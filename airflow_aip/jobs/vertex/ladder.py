"""A capacity ladder: the ordered ways to get a job's machines, each tried once, pure.

GPUs are the scarce part of training: a region runs out of A100s, a Spot VM is reclaimed, a
Flex-Start request waits, a project's quota is spent. A ladder says what to try, in order, for
example a reservation, then SPOT, then FLEX_START with a wait limit, then STANDARD; each rung may
also move the job to another machine, accelerator or region. The rules, owned here once:

- A rung is one job, created exactly once: its ID is the task's base ID plus ``_{label}``
  (attempts after a trainer failure on that rung add ``_rN`` as everywhere) and its labels carry
  ``aip_rung``. So a retry of the task, on any worker, finds the jobs of the rungs it passed
  and resumes at the rung it had reached: the jobs themselves are the ladder's memory.
- Only a capacity failure climbs (:mod:`.capacity`): a stockout, Flex-Start's wait limit, a
  create refused for a resource quota, QUEUED past the rung's ``queued_limit``, or Spot
  preemptions Vertex AI gave up on. A trainer's own failure never climbs; a request-rate 429 is
  retried with backoff and never climbs.
- Every rung's body is built and validated before anything is sent (machine table rules
  included), so a ladder that could fail on rung 3 fails before rung 1 is created.

The operator's ``placement`` is a ladder when it is a list (:mod:`.placement` parses it); each
error names the rung's field, ``placement[2].strategy``.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.hashing import shorten
from airflow_aip.jobs.ids import JOB_ID_MAX_LENGTH, MAX_ATTEMPTS, with_attempt
from airflow_aip.jobs.locations import check_location
from airflow_aip.jobs.vertex.body import (
    TRIAL_JOB_SPEC,
    job_spec_key,
    validate_custom_job,
    validate_tuning_job,
)
from airflow_aip.jobs.vertex.machines import image_for

if TYPE_CHECKING:
    from airflow_aip.jobs.request import JobRequest

FIELD = "placement"
RUNG_LABEL = "aip_rung"
STRATEGIES = ("STANDARD", "SPOT", "FLEX_START")
MAX_RUNGS = 8
RESERVATION_KEY = "compute.googleapis.com/reservation-name"
ANY_RESERVATION = "any"
_LABEL = re.compile(r"[a-z][a-z0-9]{0,11}")
_ATTEMPT_LIKE = re.compile(r"r[0-9]+")
_ATTEMPT_ROOM = len(f"_r{MAX_ATTEMPTS}")
DURATION = re.compile(r"[0-9]+(\.[0-9]{1,9})?s")
_DEFAULT_LABELS = {"STANDARD": "standard", "SPOT": "spot", "FLEX_START": "flex"}
# What the ml v1 API is told about a placement (it has no Spot VMs, Flex-Start or reservations).
VERTEX_ONLY = "is Vertex AI's vocabulary (Spot, Flex-Start, reservations): set backend='vertex' to use it"


@dataclass(frozen=True)
class Rung:
    """One way to get the machines. Unset fields keep what the job itself asks for.

    ``queued_limit``: seconds the job may stay QUEUED (waiting for quota) before the rung is
    given up: its job is cancelled and the next rung tried. ``max_wait_duration``: Flex-Start's
    own wait limit, sent to Vertex AI (``"3600s"``). ``reservation``: a reservation's name (or
    resource name) to consume, or ``"any"``. ``restart_job_on_worker_restart`` and
    ``tensorboard``: the job's own settings (``scheduling.restartJobOnWorkerRestart``,
    ``tensorboard``), set on the rung's job.
    """

    label: str
    strategy: str | None = None
    max_wait_duration: str | None = None
    queued_limit: float | None = None
    region: str | None = None
    machine_type: str | None = None
    accelerator_type: str | None = None
    accelerator_count: int | None = None
    reservation: str | None = None
    persistent_resource_id: str | None = None
    restart_job_on_worker_restart: bool | None = None
    tensorboard: str | None = None

    def describe(self) -> str:
        """``spot (SPOT, a2-highgpu-1g, 1 x NVIDIA_TESLA_A100, europe-west4)``: for the task log."""
        parts = [p for p in (self.strategy, self.machine_type, self.region) if p]
        if self.accelerator_type:
            accelerators = f"{self.accelerator_count or 1} x {self.accelerator_type}"
            parts.insert(1 if self.strategy else 0, accelerators)
        if self.reservation:
            parts.append(f"reservation {self.reservation}")
        if self.persistent_resource_id:
            parts.append(f"persistent resource {self.persistent_resource_id}")
        return f"{self.label} ({', '.join(parts)})" if parts else self.label

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


_KEYS = tuple(f.name for f in fields(Rung))


def parse_ladder(value: Sequence[object], field: str = FIELD) -> tuple[Rung, ...]:
    """The rungs of a ladder: a list of strategies (``"SPOT"``) or mappings of :class:`Rung`'s fields.

    Every rule is checked here, each error naming ``{field}[i].key``.
    """
    if isinstance(value, str) or not isinstance(value, Sequence) or not value:
        raise ValidationError(field, f"must be a non-empty list of rungs, got {value!r}")
    if len(value) > MAX_RUNGS:
        raise ValidationError(field, f"takes at most {MAX_RUNGS} rungs, got {len(value)}")
    rungs = [_rung(item, f"{field}[{i}]") for i, item in enumerate(value)]
    labels = [r.label for r in rungs]
    for i, label in enumerate(labels):
        if labels.index(label) != i:
            raise ValidationError(f"{field}[{i}].label", f"{label!r} is already rung {labels.index(label)}'s")
    return tuple(rungs)


def check_rung(item: Mapping[str, Any], path: str) -> Rung:
    """One rung's fields, every rule checked (errors name ``{path}.key``); labelled by default."""
    unknown = sorted(set(item) - set(_KEYS))
    if unknown:
        raise ValidationError(f"{path}.{unknown[0]}", f"is not a rung field; use one of {', '.join(_KEYS)}")
    strategy = item.get("strategy")
    if strategy is not None and strategy not in STRATEGIES:
        raise ValidationError(f"{path}.strategy", f"must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    label = item.get("label") or default_label(item)
    if not isinstance(label, str) or not _LABEL.fullmatch(label) or _ATTEMPT_LIKE.fullmatch(label):
        rule = "must be 1-12 lowercase letters and digits, starting with a letter and not r<number>"
        raise ValidationError(f"{path}.label", f"{rule}, got {label!r}")
    _check_waits(item, path)
    _check_placement(item, path)
    limit = item.get("queued_limit")
    return Rung(**{**dict(item), "label": label, "queued_limit": float(limit) if limit is not None else None})


def _rung(item: object, path: str) -> Rung:
    if isinstance(item, str):
        item = {"strategy": item}
    if not isinstance(item, Mapping):
        raise ValidationError(path, f"must be a strategy name or a mapping, got {type(item).__name__}")
    return check_rung(item, path)


def _check_waits(item: Mapping[str, Any], path: str) -> None:
    wait, strategy = item.get("max_wait_duration"), item.get("strategy")
    if wait is not None and strategy != "FLEX_START":
        raise ValidationError(f"{path}.max_wait_duration", f"only with strategy FLEX_START, got {strategy}")
    if wait is not None and (not isinstance(wait, str) or not DURATION.fullmatch(wait)):
        raise ValidationError(
            f"{path}.max_wait_duration", f"must be a duration such as '3600s', got {wait!r}"
        )
    limit = item.get("queued_limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int | float) or limit <= 0):
        raise ValidationError(f"{path}.queued_limit", f"must be a positive number of seconds, got {limit!r}")


def _check_placement(item: Mapping[str, Any], path: str) -> None:
    if item.get("region") is not None:
        check_location(item["region"], f"{path}.region")
    count = item.get("accelerator_count")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
        raise ValidationError(f"{path}.accelerator_count", f"must be a whole number >= 0, got {count!r}")
    for name in ("machine_type", "accelerator_type", "reservation", "persistent_resource_id", "tensorboard"):
        if item.get(name) is not None and (not isinstance(item[name], str) or not item[name]):
            raise ValidationError(f"{path}.{name}", f"must be a non-empty string, got {item[name]!r}")
    restart = item.get("restart_job_on_worker_restart")
    if restart is not None and not isinstance(restart, bool):
        raise ValidationError(
            f"{path}.restart_job_on_worker_restart", f"must be true or false, got {restart!r}"
        )


def default_label(item: Mapping[str, Any]) -> str:
    """The label of a rung that gives none: its reservation, persistent resource or strategy."""
    if item.get("reservation"):
        return "reserved"
    if item.get("persistent_resource_id"):
        return "persistent"
    return _DEFAULT_LABELS.get(str(item.get("strategy")), "rung")


def rung_job_id(base: str, rung: Rung, attempt: int = 1) -> str:
    """Rung ``rung``'s job ID for attempt ``attempt``: ``{base}_{label}[_rN]``, within the length rule."""
    tail = f"_{rung.label}"
    return with_attempt(shorten(base, JOB_ID_MAX_LENGTH - _ATTEMPT_ROOM - len(tail), sep="_") + tail, attempt)


def apply_rung(body: Mapping[str, Any], rung: Rung, *, label: bool = True) -> dict[str, Any]:
    """A Vertex AI CustomJob or HyperparameterTuningJob body with ``rung``'s choices made.

    Machine, accelerator and reservation apply to every worker pool (FLEX_START wants the same
    machine in each); the strategy replaces the job's, and a strategy other than FLEX_START drops
    ``maxWaitDuration``, which only FLEX_START takes. Not validated here: the caller validates
    the result with the machine table, for the rung's region. ``label``: mark the job as the
    rung's (its ``aip_rung`` label).
    """
    out = copy.deepcopy(dict(body))
    spec: dict[str, Any] = out.setdefault(job_spec_key(out), {})
    if label:
        out.setdefault("labels", {})[RUNG_LABEL] = rung.label
    if rung.strategy is not None:
        scheduling = spec.setdefault("scheduling", {})
        scheduling["strategy"] = rung.strategy
        if rung.strategy != "FLEX_START":
            scheduling.pop("maxWaitDuration", None)
    if rung.max_wait_duration is not None:
        spec.setdefault("scheduling", {})["maxWaitDuration"] = rung.max_wait_duration
    if rung.restart_job_on_worker_restart is not None:
        spec.setdefault("scheduling", {})["restartJobOnWorkerRestart"] = rung.restart_job_on_worker_restart
    if rung.persistent_resource_id is not None:
        spec["persistentResourceId"] = rung.persistent_resource_id
    if rung.tensorboard is not None:
        spec["tensorboard"] = rung.tensorboard
    for pool in spec.get("workerPoolSpecs") or []:
        if pool:
            _apply_machine(pool.setdefault("machineSpec", {}), rung)
            _apply_image(pool, rung)
    return out


def _apply_image(pool: dict[str, Any], rung: Rung) -> None:
    """A rung that adds or removes GPUs, or moves the job, gets the pre-built image's twin for it."""
    package = pool.get("pythonPackageSpec") or {}
    moved = rung.region is not None or rung.accelerator_type is not None or rung.accelerator_count is not None
    if moved and package.get("executorImageUri"):
        gpu = bool(pool["machineSpec"].get("acceleratorType"))
        package["executorImageUri"] = image_for(package["executorImageUri"], gpu=gpu, region=rung.region)


def _apply_machine(machine: dict[str, Any], rung: Rung) -> None:
    if rung.machine_type is not None:
        machine["machineType"] = rung.machine_type
    if rung.accelerator_count == 0:
        machine.pop("acceleratorType", None)
        machine.pop("acceleratorCount", None)
    elif rung.accelerator_type is not None:
        machine["acceleratorType"] = rung.accelerator_type
        machine["acceleratorCount"] = rung.accelerator_count or machine.get("acceleratorCount") or 1
    elif rung.accelerator_count is not None:
        machine["acceleratorCount"] = rung.accelerator_count
    if rung.reservation == ANY_RESERVATION:
        machine["reservationAffinity"] = {"reservationAffinityType": "ANY_RESERVATION"}
    elif rung.reservation is not None:
        machine["reservationAffinity"] = {
            "reservationAffinityType": "SPECIFIC_RESERVATION",
            "key": RESERVATION_KEY,
            "values": [rung.reservation],
        }


def rung_request(request: JobRequest, rung: Rung, field: str = FIELD) -> JobRequest:
    """The request of one rung: ``rung``'s choices over the job, validated for the rung's region.

    Any rule the result breaks (the machine table's included) is reported under ``field``, the
    rung's own path, before anything is sent.
    """
    region = rung.region or request.region
    body = apply_rung(request.body, rung)
    validate = validate_tuning_job if job_spec_key(body) == TRIAL_JOB_SPEC else validate_custom_job
    try:
        checked = validate(body, region=region)
    except ValidationError as err:
        raise ValidationError(f"{field}.{err.field}", err.rule) from None
    return replace(request, body=checked, region=region)


def ladder_requests(request: JobRequest, rungs: Sequence[Rung]) -> tuple[JobRequest, ...]:
    """Every rung's request, all validated before the first is sent (a bad rung 3 fails at once)."""
    if not request.backend.schedules_capacity:
        raise ValidationError(FIELD, VERTEX_ONLY)
    return tuple(rung_request(request, rung, f"{FIELD}[{i}]") for i, rung in enumerate(rungs))

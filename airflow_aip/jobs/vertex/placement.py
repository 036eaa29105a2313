"""Where and how a Vertex AI job gets its machines: the operator's ``placement``, parsed and checked, pure.

AI Platform had a few of these in ``trainingInput`` (``serviceAccount``, ``network``,
``scheduling.maxWaitTime``), which the translation keeps; Vertex AI added the rest, and our
users should not have to write a ``vertex_job`` overlay to use them. ``placement`` says it in
one argument:

- a mapping (:class:`Placement`) is the job's own placement: its strategy, reservation,
  persistent resource... (the table below);
- a list of them is a capacity ladder (:mod:`.ladder`): each rung one job, tried in order, and a
  rung may also move the job to another machine, accelerator or region.

=================================  =====================================================
``placement`` key                  Vertex AI field (``jobSpec``, or ``trialJobSpec``)
=================================  =====================================================
``strategy``                       ``scheduling.strategy``: STANDARD, SPOT, FLEX_START
``max_wait_duration``              ``scheduling.maxWaitDuration`` (FLEX_START only)
``restart_job_on_worker_restart``  ``scheduling.restartJobOnWorkerRestart``
``reservation``                    ``workerPoolSpecs[*].machineSpec.reservationAffinity``
``persistent_resource_id``         ``persistentResourceId``
``tensorboard``                    ``tensorboard`` (needs ``serviceAccount``)
=================================  =====================================================

They go on top of the translation and of ``vertex_job``, and the whole body is then checked
with the machine table's rules (FLEX_START's GPUs and same machine in every pool, no Spot for
TPU pods, ...), so each is refused before anything is sent, naming the field
(``placement.strategy``, ``placement[2].region``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.vertex.ladder import (
    DURATION,
    FIELD,
    STRATEGIES,
    Rung,
    apply_rung,
    check_rung,
    parse_ladder,
)


class Placement(TypedDict, total=False):
    """One job's placement on Vertex AI, or one rung of a capacity ladder. Every key is optional.

    - ``strategy``: ``"STANDARD"``, ``"SPOT"`` (cheaper, can be reclaimed) or ``"FLEX_START"``
      (Dynamic Workload Scheduler: L4, A100, H100, H200 or B200 GPUs, the same machine in every pool).
    - ``max_wait_duration``: how long FLEX_START may wait for machines, ``"3600s"`` (FLEX_START only).
    - ``reservation``: a Compute Engine reservation to consume (its name or resource name), or ``"any"``.
    - ``persistent_resource_id``: run on this persistent resource's machines.
    - ``restart_job_on_worker_restart``: restart the whole job when a worker restarts.
    - ``tensorboard``: a Vertex AI TensorBoard resource name to upload logs to (needs
      ``trainingInput.serviceAccount``).

    Only a ladder's rungs (``placement=[...]``) take these:

    - ``label``: the rung's name, 1-12 lowercase letters and digits: its job ID ends ``_{label}``
      (default: ``reserved``, ``persistent``, ``spot``, ``flex``, ``standard`` or ``rung``).
    - ``queued_limit``: seconds the rung's job may stay QUEUED (waiting for quota) before the rung is
      given up: its job is cancelled and the next rung tried.
    - ``region``: run the rung's job in this region.
    - ``machine_type``, ``accelerator_type``, ``accelerator_count``: the machine of every worker
      pool (``accelerator_count: 0`` removes the GPUs).
    """

    strategy: str
    max_wait_duration: str
    reservation: str
    persistent_resource_id: str
    restart_job_on_worker_restart: bool
    tensorboard: str
    label: str
    queued_limit: float
    region: str
    machine_type: str
    accelerator_type: str
    accelerator_count: int


# The translator's names (``to_vertex(placement=...)``) of the keys a job's own placement takes.
NAMES = {
    "strategy": "scheduling_strategy",
    "max_wait_duration": "max_wait_duration",
    "restart_job_on_worker_restart": "restart_job_on_worker_restart",
    "reservation": "reservation",
    "persistent_resource_id": "persistent_resource_id",
    "tensorboard": "tensorboard",
}
RUNG_ONLY = ("label", "queued_limit", "region", "machine_type", "accelerator_type", "accelerator_count")
_NONE = ("", "null", "None", "[]", "{}")  # what an empty form field or an unset Param renders


@dataclass(frozen=True)
class Placed:
    """A parsed ``placement``: the job's own (``job``, in the translator's names) or a ladder's ``rungs``.

    ``field``: what to name when the placement is refused as a whole (on ml v1): the first key of
    a job's placement, ``placement`` for a ladder.
    """

    job: Mapping[str, Any]
    rungs: tuple[Rung, ...] = ()
    field: str = FIELD

    @property
    def given(self) -> bool:
        return bool(self.job or self.rungs)


NOWHERE = Placed({})


def placement_given(value: object) -> bool:
    """Whether ``placement`` asks for anything: None, an empty list or mapping, and the text an empty
    form field renders (``""``, ``"null"``, ``"None"``, ``"[]"``, ``"{}"``) leave the job as it is."""
    if isinstance(value, str):
        return value.strip() not in _NONE
    return value is not None and value != [] and value != {}


def parse_placement(value: object) -> Placed:
    """``placement`` checked: a :class:`Placement` mapping (the job's), a list of them or of strategy
    names (a capacity ladder), or either as the JSON text a template renders
    (``{{ params.ladder | tojson }}``). Each error names its field (``placement[1].strategy``)."""
    if not placement_given(value):
        return NOWHERE
    if isinstance(value, str) and value.lstrip()[:1] in ("[", "{"):  # a template renders text
        try:
            value = json.loads(value)
        except ValueError:
            raise ValidationError(FIELD, f"is not JSON of a placement or a list of them: {value!r}") from None
    if isinstance(value, Mapping):
        return _job_placement(value)
    if isinstance(value, Sequence) and not isinstance(value, str):
        return Placed({}, parse_ladder(value))
    raise ValidationError(
        FIELD,
        "must be a mapping (the job's placement, e.g. {'strategy': 'SPOT'}) or a list of them "
        f"(a capacity ladder, e.g. ['SPOT', 'STANDARD']), got {value!r}",
    )


def _job_placement(value: Mapping[str, Any]) -> Placed:
    given = {key: item for key, item in value.items() if item is not None}
    for key in given:
        if key in RUNG_ONLY:
            raise ValidationError(
                f"{FIELD}.{key}", "is a capacity ladder rung's: give a list, placement=[{...}, ...]"
            )
        if key not in NAMES:
            raise ValidationError(
                f"{FIELD}.{key}", f"is not a placement field; use one of {', '.join(NAMES)}"
            )
    check_rung(given, FIELD)
    field = f"{FIELD}.{next(iter(given))}" if given else FIELD
    return Placed({NAMES[key]: item for key, item in given.items()}, field=field)


def check_placement(placement: Mapping[str, Any]) -> dict[str, Any]:
    """The given (not None) arguments of a job's placement in the translator's names, each checked."""
    given = {name: value for name, value in placement.items() if value is not None}
    for name, value in given.items():
        if name not in NAMES.values():
            raise ValidationError(
                name, f"is not a placement argument; use one of {', '.join(NAMES.values())}"
            )
        if name == "restart_job_on_worker_restart":
            if not isinstance(value, bool):
                raise ValidationError(name, f"must be true or false, got {value!r}")
        elif not isinstance(value, str) or not value:
            raise ValidationError(name, f"must be a non-empty string, got {value!r}")
    strategy = given.get("scheduling_strategy")
    if strategy is not None and strategy not in STRATEGIES:
        raise ValidationError(
            "scheduling_strategy", f"must be one of {', '.join(STRATEGIES)}, got {strategy!r}"
        )
    wait = given.get("max_wait_duration")
    if wait is not None and not DURATION.fullmatch(wait):
        raise ValidationError("max_wait_duration", f"must be a duration such as '3600s', got {wait!r}")
    if "max_wait_duration" in given and strategy != "FLEX_START":
        raise ValidationError(
            "max_wait_duration",
            f"Vertex AI takes it only with scheduling_strategy FLEX_START, got {strategy}",
        )
    return given


def apply_placement(body: Mapping[str, Any], placement: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` with a job's placement set (see the module's table); not yet validated."""
    given = check_placement(placement)
    if not given:
        return dict(body)
    rung = Rung(
        label="placement",
        strategy=given.get("scheduling_strategy"),
        max_wait_duration=given.get("max_wait_duration"),
        reservation=given.get("reservation"),
        persistent_resource_id=given.get("persistent_resource_id"),
        restart_job_on_worker_restart=given.get("restart_job_on_worker_restart"),
        tensorboard=given.get("tensorboard"),
    )
    return apply_rung(body, rung, label=False)

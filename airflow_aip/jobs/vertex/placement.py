"""Where and how a Vertex AI job gets its machines, from the operator's named arguments, pure.

AI Platform had a few of these in ``trainingInput`` (``serviceAccount``, ``network``,
``scheduling.maxWaitTime``), which the translation keeps; Vertex AI added the rest, and our
users should not have to write a ``vertex_job`` overlay to use them:

=================================  =====================================================
argument                           Vertex AI field (``jobSpec``, or ``trialJobSpec``)
=================================  =====================================================
``scheduling_strategy``            ``scheduling.strategy``: STANDARD, SPOT, FLEX_START
``max_wait_duration``              ``scheduling.maxWaitDuration`` (FLEX_START only)
``restart_job_on_worker_restart``  ``scheduling.restartJobOnWorkerRestart``
``reservation``                    ``workerPoolSpecs[*].machineSpec.reservationAffinity``
``persistent_resource_id``         ``persistentResourceId``
``tensorboard``                    ``tensorboard`` (needs ``serviceAccount``)
=================================  =====================================================

They go on top of the translation and of ``vertex_job``, and the whole body is then checked
with the machine table's rules (FLEX_START's GPUs and same machine in every pool, no Spot for
TPU pods, ...), so each is refused before anything is sent, naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.vertex.body import job_spec_key
from airflow_aip.jobs.vertex.ladder import DURATION, STRATEGIES, Rung, apply_rung

NAMES = (
    "scheduling_strategy",
    "max_wait_duration",
    "restart_job_on_worker_restart",
    "reservation",
    "persistent_resource_id",
    "tensorboard",
)


def check_placement(placement: Mapping[str, Any]) -> dict[str, Any]:
    """The given (not None) placement arguments, each of the right type; ValidationError naming it."""
    given = {name: value for name, value in placement.items() if value is not None}
    for name, value in given.items():
        if name not in NAMES:
            raise ValidationError(name, f"is not a placement argument; use one of {', '.join(NAMES)}")
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
    """``body`` with the placement arguments set (see the module's table); not yet validated."""
    given = check_placement(placement)
    if not given:
        return dict(body)
    rung = Rung(
        label="placement",
        strategy=given.get("scheduling_strategy"),
        max_wait_duration=given.get("max_wait_duration"),
        reservation=given.get("reservation"),
        persistent_resource_id=given.get("persistent_resource_id"),
    )
    out = apply_rung(body, rung, label=False)
    spec: dict[str, Any] = out[job_spec_key(out)]
    if "restart_job_on_worker_restart" in given:
        spec.setdefault("scheduling", {})["restartJobOnWorkerRestart"] = given[
            "restart_job_on_worker_restart"
        ]
    if "tensorboard" in given:
        spec["tensorboard"] = given["tensorboard"]
    return out

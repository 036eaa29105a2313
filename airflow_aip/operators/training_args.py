"""The submit operator's grouped arguments, and the old spellings folded into them for one release.

``training_input`` is AI Platform's ``trainingInput`` as one mapping (:class:`TrainingInput`),
``placement`` Vertex AI's ways to get machines (:class:`~airflow_aip.jobs.vertex.placement.Placement`,
or a list of them: a capacity ladder). Both are ``TypedDict`` mappings, not objects, because
Airflow renders templates inside a template field's dicts and lists and finds the upstream tasks
of the XComArgs in them (``{"packageUris": stage.output}``), but looks inside no other object.

The arguments they replace (``package_uris=``, ``scheduling_strategy=``, ``capacity_ladder=``...)
are still taken, through ``**kwargs``, for one release: :func:`fold_deprecated` moves each into
its group when the operator is built (so it is templated, and its XComArgs are found, as the
group's), with one :class:`~airflow.exceptions.AirflowProviderDeprecationWarning` per name and
process. Giving a field both ways is a ValidationError naming both.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from airflow.exceptions import AirflowProviderDeprecationWarning
from airflow.sdk import XComArg

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.training_input import camel_keys
from airflow_aip.jobs.vertex.ladder import default_label
from airflow_aip.jobs.vertex.placement import placement_given


class TrainingInput(TypedDict, total=False):
    """AI Platform's ``trainingInput``, keyed as in gcloud's ``config.yaml``. Every key is optional.

    A value may be a Jinja template or an upstream task's output (``stage.output``, ``data["train"]``).
    The most used keys:

    - ``packageUris``: the trainer's packages, ``gs://`` URIs (at most 100).
    - ``pythonModule``: the module to run, ``trainer.task``.
    - ``args``: the trainer's command-line arguments.
    - ``jobDir``: the job's output directory, ``gs://``; the trainer gets ``--job-dir``.
    - ``scaleTier``: ``BASIC`` (default), ``BASIC_GPU``, ``STANDARD_1``, ``PREMIUM_1`` or ``CUSTOM``.
    - ``masterType``, ``masterConfig``; ``workerType``, ``workerCount``, ``workerConfig``;
      ``parameterServerType``, ``parameterServerCount``, ``parameterServerConfig``;
      ``evaluatorType``, ``evaluatorCount``, ``evaluatorConfig``: a ``CUSTOM`` cluster's machines.
    - ``runtimeVersion``, ``pythonVersion``: AI Platform's runtime (on Vertex AI: which pre-built container).
    - ``scheduling``: ``maxRunningTime``, ``maxWaitTime``.
    - ``serviceAccount``: the account the job runs as.
    - ``network``: the VPC network to peer with.
    - ``hyperparameters``: a tuning job's search (``goal``, ``params``, ``maxTrials``...).
    - ``region``: the job's region (the operator's ``region`` wins).

    Also ``enableWebAccess``, ``encryptionConfig`` and ``useChiefInTfConfig``. Each field, and
    what it becomes on Vertex AI: ``docs/vertex-migration.md``.
    """

    packageUris: Sequence[str | XComArg] | XComArg
    pythonModule: str
    args: Sequence[Any] | XComArg
    jobDir: str
    scaleTier: str
    masterType: str
    masterConfig: Mapping[str, Any]
    workerType: str
    workerCount: int | str
    workerConfig: Mapping[str, Any]
    parameterServerType: str
    parameterServerCount: int | str
    parameterServerConfig: Mapping[str, Any]
    evaluatorType: str
    evaluatorCount: int | str
    evaluatorConfig: Mapping[str, Any]
    runtimeVersion: str
    pythonVersion: str
    scheduling: Mapping[str, Any]
    serviceAccount: str
    network: str
    hyperparameters: Mapping[str, Any] | XComArg
    region: str
    enableWebAccess: bool
    encryptionConfig: Mapping[str, Any]
    useChiefInTfConfig: bool


# Removed argument -> its trainingInput key.
TRAINING_INPUT_ARGUMENTS = {
    "package_uris": "packageUris",
    "python_module": "pythonModule",
    "args": "args",
    "job_dir": "jobDir",
    "scale_tier": "scaleTier",
    "master_type": "masterType",
    "master_config": "masterConfig",
    "worker_type": "workerType",
    "worker_count": "workerCount",
    "worker_config": "workerConfig",
    "parameter_server_type": "parameterServerType",
    "parameter_server_count": "parameterServerCount",
    "parameter_server_config": "parameterServerConfig",
    "runtime_version": "runtimeVersion",
    "python_version": "pythonVersion",
    "scheduling": "scheduling",
    "service_account": "serviceAccount",
    "hyperparameters": "hyperparameters",
    "network": "network",
}
# Removed argument -> its placement key; and the removed ladder.
PLACEMENT_ARGUMENTS = {
    "scheduling_strategy": "strategy",
    "max_wait_duration": "max_wait_duration",
    "restart_job_on_worker_restart": "restart_job_on_worker_restart",
    "reservation": "reservation",
    "persistent_resource_id": "persistent_resource_id",
    "tensorboard": "tensorboard",
}
LADDER_ARGUMENT = "capacity_ladder"

_ABSENT: Any = object()
_warned: set[str] = set()  # one warning per argument name and process
_OURS = tuple(
    os.path.dirname(os.path.abspath(module.__file__ or "")) + os.sep
    for module in (sys.modules["airflow_aip"], sys.modules["airflow"])
)


def fold_deprecated(kwargs: dict[str, Any], training_input: Any, placement: Any) -> tuple[Any, Any]:
    """``training_input`` and ``placement`` with the removed arguments in ``kwargs`` folded in (and
    taken out of ``kwargs``); each warns once. A field given both ways is a ValidationError."""
    old_input = {name: kwargs.pop(name) for name in TRAINING_INPUT_ARGUMENTS if name in kwargs}
    old_placement = {name: kwargs.pop(name) for name in PLACEMENT_ARGUMENTS if name in kwargs}
    ladder = kwargs.pop(LADDER_ARGUMENT, None) if LADDER_ARGUMENT in kwargs else _ABSENT
    for name in old_input:
        _warn(name, f"training_input={{'{TRAINING_INPUT_ARGUMENTS[name]}': ...}}")
    for name in old_placement:
        _warn(name, f"placement={{'{PLACEMENT_ARGUMENTS[name]}': ...}}")
    if ladder is not _ABSENT:
        _warn(LADDER_ARGUMENT, "placement=[...] (a list of rungs)")
    training_input = _fold_input(training_input, {k: v for k, v in old_input.items() if v is not None})
    job = {PLACEMENT_ARGUMENTS[k]: v for k, v in old_placement.items() if v is not None}
    given = [name for name, value in old_placement.items() if value is not None]
    if ladder is not _ABSENT and placement_given(ladder):
        given.append(LADDER_ARGUMENT)
    if not given:
        return training_input, placement
    if placement_given(placement):
        raise ValidationError("placement", f"is given twice: as placement= and as {given[0]}= (deprecated)")
    if LADDER_ARGUMENT not in given:
        return training_input, job
    return training_input, _ladder_with(ladder, job)


def _fold_input(training_input: Any, old: dict[str, Any]) -> Any:
    if not old:
        return training_input
    if training_input is None:
        training_input = {}
    if not isinstance(training_input, Mapping):
        raise ValidationError(
            "training_input",
            f"must be a mapping to take {', '.join(old)}= (deprecated): put every field in training_input",
        )
    folded = dict(training_input)
    for name, value in old.items():
        key = TRAINING_INPUT_ARGUMENTS[name]
        if key in folded:
            raise ValidationError(
                f"training_input.{key}",
                f"is given twice: as training_input['{key}'] and as {name}= (deprecated)",
            )
        folded[key] = camel_keys(value)  # as the named argument was: nested snake_case keys allowed
    return folded


def _ladder_with(ladder: Any, job: dict[str, Any]) -> Any:
    """The old ladder, each rung taking the old placement arguments it does not set itself (as
    ``capacity_ladder`` rungs went on top of them); labels stay the rungs' own."""
    if not job:
        return ladder
    if isinstance(ladder, str) or not isinstance(ladder, Sequence):
        raise ValidationError(
            LADDER_ARGUMENT,
            f"takes {', '.join(job)} from the other placement arguments only as a list: "
            "write placement=[{...}, ...] with each rung's choices",
        )
    rungs: list[Any] = []
    for item in ladder:
        rung = {"strategy": item} if isinstance(item, str) else item
        if not isinstance(rung, Mapping):
            rungs.append(item)  # refused, naming it, when the plan is built
            continue
        inherited = {key: value for key, value in job.items() if key not in rung}
        if rung.get("strategy") not in (None, "FLEX_START"):
            inherited.pop("max_wait_duration", None)  # only FLEX_START waits
        rungs.append({**inherited, **rung, "label": rung.get("label") or default_label(rung)})
    return rungs


def _warn(name: str, instead: str) -> None:
    if name in _warned:
        return
    _warned.add(name)
    warnings.warn(
        f"{name}= is deprecated: use {instead}",
        AirflowProviderDeprecationWarning,
        stacklevel=_caller_level(),
    )


def _caller_level() -> int:
    """The stack level of the first frame outside this package and Airflow's: the DAG's line."""
    level, frame = 2, sys._getframe(2)  # the caller of _warn
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(_OURS):
        level, frame = level + 1, frame.f_back
    return level

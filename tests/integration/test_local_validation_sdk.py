"""The last validation rules, met the way an SDK user meets them: ``HyperparameterTuningJob.run()``
and ``CustomJob.submit()`` of google-cloud-aiplatform against the local service.

A refused body is an HTTP 400 that the SDK's REST transport raises as ``BadRequest`` before any
job exists; an accepted one is created (then cancelled: nothing here needs it to run). What the SDK
cannot express (two conditional parameters of one name: its ``conditional_parameter_spec`` is a
dict) is tested over REST in tests/unit/test_vertex_study_rules.py.

An accepted job is cancelled only once RUNNING: cancelling one while its package environment is
being built can leave that environment half-built in the shared cache, and the session's later jobs
of the same package then fail with ModuleNotFoundError (seen once on a branch on 2026-11-28; not
reproduced since, with a cancel 0, 1.5 and 4 s after the create).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.fixtures.local_service import StagedTrainer
from tests.fixtures.tools import need_module
from tests.fixtures.vertex import VERTEX_TERMINAL, sdk_pools, wait_for_sdk_state

pytestmark = pytest.mark.integration
aiplatform = need_module("google.cloud.aiplatform")


def _tuning(sdk: Any, trainer: StagedTrainer, parameters: dict[str, Any], **counts: int) -> Any:
    trial = sdk.CustomJob(display_name="trial", worker_pool_specs=sdk_pools(trainer, "sleep", []))
    return sdk.HyperparameterTuningJob(
        display_name="rules",
        custom_job=trial,
        metric_spec={"score": "maximize"},
        parameter_spec=parameters,
        max_trial_count=counts.get("max_trial_count", 2),
        parallel_trial_count=counts.get("parallel_trial_count", 1),
    )


def test_a_conditional_value_outside_the_parent_s_values_is_a_400(
    sdk: Any, staged_trainer: StagedTrainer
) -> None:
    from google.api_core import exceptions
    from google.cloud.aiplatform import hyperparameter_tuning as hpt

    lr = hpt.DoubleParameterSpec(min=0.01, max=1, scale="log", parent_values=["adagrad"])
    parameters = {
        "optimizer": hpt.CategoricalParameterSpec(
            values=["adam", "sgd"], conditional_parameter_spec={"lr": lr}
        )
    }

    with pytest.raises(
        exceptions.BadRequest, match="'adagrad' is not in the feasible space of the parent parameter"
    ):
        _tuning(sdk, staged_trainer, parameters).run(sync=True)
    assert list(sdk.HyperparameterTuningJob.list()) == []


@pytest.mark.parametrize(
    ("spec", "counts"),
    [
        ("one-point range", {}),  # [U] min == max
        ("parallel above max", {"max_trial_count": 1, "parallel_trial_count": 3}),  # [U]
    ],
)
def test_what_google_may_take_is_created(
    sdk: Any, staged_trainer: StagedTrainer, spec: str, counts: dict[str, int]
) -> None:
    from google.cloud.aiplatform import hyperparameter_tuning as hpt

    low = 0.5 if spec == "one-point range" else 0.1
    tuning = _tuning(
        sdk, staged_trainer, {"x": hpt.DoubleParameterSpec(min=low, max=0.5, scale="linear")}, **counts
    )
    tuning.run(sync=False)
    tuning.wait_for_resource_creation()
    wait_for_sdk_state(tuning, {"JOB_STATE_RUNNING"}, timeout=120)  # see the module's docstring
    tuning.cancel()
    assert wait_for_sdk_state(tuning, VERTEX_TERMINAL, timeout=60) == "JOB_STATE_CANCELLED"


@pytest.mark.parametrize(
    ("disk", "field"),
    [
        ({"boot_disk_type": "nvme", "boot_disk_size_gb": 100}, "disk_spec.boot_disk_type"),
        ({"boot_disk_type": "pd-ssd", "boot_disk_size_gb": 50}, "disk_spec.boot_disk_size_gb"),
    ],
)
def test_a_disk_google_does_not_offer_is_a_400(
    sdk: Any, staged_trainer: StagedTrainer, disk: dict[str, Any], field: str
) -> None:
    from google.api_core import exceptions

    specs = [sdk_pools(staged_trainer, "succeed", [])[0] | {"disk_spec": disk}]
    with pytest.raises(exceptions.BadRequest, match=f"worker_pool_specs\\[0\\].{field}"):
        sdk.CustomJob(display_name="disk", worker_pool_specs=specs).submit()
    assert list(sdk.CustomJob.list()) == []


def test_the_sdk_s_default_disk_is_taken(sdk: Any, staged_trainer: StagedTrainer) -> None:
    specs = [
        sdk_pools(staged_trainer, "sleep", [])[0]
        | {"disk_spec": {"boot_disk_type": "pd-ssd", "boot_disk_size_gb": 100}}
    ]
    job = sdk.CustomJob(display_name="disk", worker_pool_specs=specs)
    job.submit()
    wait_for_sdk_state(job, {"JOB_STATE_RUNNING"}, timeout=120)  # see the module's docstring
    job.cancel()
    assert wait_for_sdk_state(job, VERTEX_TERMINAL, timeout=60) == "JOB_STATE_CANCELLED"

"""Proto enum numbers of the aiplatform v1 fields a CustomJob or HyperparameterTuningJob carries.

The proto3 JSON mapping lets a client send an enum as its number, but a discovery document lists
only the names, in declaration order, which is not number order (``NVIDIA_TESLA_A100`` is 8, after
``TPU_V3`` = 7). Generated from google-cloud-aiplatform's ``aiplatform_v1.types`` (a test checks it
still matches); keyed by ``<schema>.<property>`` of ``aiplatform.v1.json``. Requests are checked with them
(:func:`airflow_aip.jobs.schema.check_object`'s ``enums``), and answers given as numbers to the
clients that ask for them (:func:`enums_as_numbers`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_aip.jobs.locations import AIPLATFORM_V1
from airflow_aip.jobs.schema import schema

ENUM_NUMBERS: dict[str, dict[str, int]] = {
    "GoogleCloudAiplatformV1CustomJob.state": {
        "JOB_STATE_CANCELLED": 7,
        "JOB_STATE_CANCELLING": 6,
        "JOB_STATE_EXPIRED": 9,
        "JOB_STATE_FAILED": 5,
        "JOB_STATE_PARTIALLY_SUCCEEDED": 11,
        "JOB_STATE_PAUSED": 8,
        "JOB_STATE_PENDING": 2,
        "JOB_STATE_QUEUED": 1,
        "JOB_STATE_RUNNING": 3,
        "JOB_STATE_SUCCEEDED": 4,
        "JOB_STATE_UNSPECIFIED": 0,
        "JOB_STATE_UPDATING": 10,
    },
    "GoogleCloudAiplatformV1HyperparameterTuningJob.state": {
        "JOB_STATE_CANCELLED": 7,
        "JOB_STATE_CANCELLING": 6,
        "JOB_STATE_EXPIRED": 9,
        "JOB_STATE_FAILED": 5,
        "JOB_STATE_PARTIALLY_SUCCEEDED": 11,
        "JOB_STATE_PAUSED": 8,
        "JOB_STATE_PENDING": 2,
        "JOB_STATE_QUEUED": 1,
        "JOB_STATE_RUNNING": 3,
        "JOB_STATE_SUCCEEDED": 4,
        "JOB_STATE_UNSPECIFIED": 0,
        "JOB_STATE_UPDATING": 10,
    },
    "GoogleCloudAiplatformV1MachineSpec.acceleratorType": {
        "ACCELERATOR_TYPE_UNSPECIFIED": 0,
        "NVIDIA_A100_80GB": 9,
        "NVIDIA_B200": 16,
        "NVIDIA_GB200": 17,
        "NVIDIA_H100_80GB": 13,
        "NVIDIA_H100_MEGA_80GB": 14,
        "NVIDIA_H200_141GB": 15,
        "NVIDIA_L4": 11,
        "NVIDIA_RTX_PRO_6000": 18,
        "NVIDIA_TESLA_A100": 8,
        "NVIDIA_TESLA_K80": 1,
        "NVIDIA_TESLA_P100": 2,
        "NVIDIA_TESLA_P4": 4,
        "NVIDIA_TESLA_T4": 5,
        "NVIDIA_TESLA_V100": 3,
        "TPU_V2": 6,
        "TPU_V3": 7,
        "TPU_V4_POD": 10,
        "TPU_V5_LITEPOD": 12,
    },
    "GoogleCloudAiplatformV1ReservationAffinity.reservationAffinityType": {
        "ANY_RESERVATION": 2,
        "NO_RESERVATION": 1,
        "SPECIFIC_RESERVATION": 3,
        "TYPE_UNSPECIFIED": 0,
    },
    "GoogleCloudAiplatformV1Scheduling.strategy": {
        "FLEX_START": 6,
        "LOW_COST": 2,
        "ON_DEMAND": 1,
        "SPOT": 4,
        "STANDARD": 3,
        "STRATEGY_UNSPECIFIED": 0,
    },
    "GoogleCloudAiplatformV1StudySpec.algorithm": {
        "ALGORITHM_UNSPECIFIED": 0,
        "GRID_SEARCH": 2,
        "RANDOM_SEARCH": 3,
    },
    "GoogleCloudAiplatformV1StudySpec.measurementSelectionType": {
        "BEST_MEASUREMENT": 2,
        "LAST_MEASUREMENT": 1,
        "MEASUREMENT_SELECTION_TYPE_UNSPECIFIED": 0,
    },
    "GoogleCloudAiplatformV1StudySpec.observationNoise": {
        "HIGH": 2,
        "LOW": 1,
        "OBSERVATION_NOISE_UNSPECIFIED": 0,
    },
    "GoogleCloudAiplatformV1StudySpecMetricSpec.goal": {
        "GOAL_TYPE_UNSPECIFIED": 0,
        "MAXIMIZE": 1,
        "MINIMIZE": 2,
    },
    "GoogleCloudAiplatformV1StudySpecParameterSpec.scaleType": {
        "SCALE_TYPE_UNSPECIFIED": 0,
        "UNIT_LINEAR_SCALE": 1,
        "UNIT_LOG_SCALE": 2,
        "UNIT_REVERSE_LOG_SCALE": 3,
    },
    "GoogleCloudAiplatformV1Trial.state": {
        "ACTIVE": 2,
        "INFEASIBLE": 5,
        "REQUESTED": 1,
        "STATE_UNSPECIFIED": 0,
        "STOPPING": 3,
        "SUCCEEDED": 4,
    },
}


def enums_as_numbers(value: Any, schema_name: str, document: str = AIPLATFORM_V1) -> Any:
    """An answer with its enums as proto numbers, for clients asking ``$alt=json;enum-encoding=int``.

    Google's REST clients (the Vertex AI SDK's transport) ask for that; a name without a known
    number is left as it is, as proto3 JSON parsers take either.
    """
    if not isinstance(value, Mapping):
        return value
    props: Mapping[str, Any] = schema(schema_name, document).get("properties", {})
    out = dict(value)
    for key, item in value.items():
        prop = props.get(key)
        if prop is not None:
            out[key] = _enum_numbers_in(item, prop, ENUM_NUMBERS.get(f"{schema_name}.{key}"), document)
    return out


def _enum_numbers_in(
    value: Any, prop: Mapping[str, Any], numbers: Mapping[str, int] | None, document: str
) -> Any:
    if "$ref" in prop:
        return enums_as_numbers(value, prop["$ref"], document)
    if prop.get("type") == "array" and isinstance(value, list):
        return [_enum_numbers_in(item, prop["items"], numbers, document) for item in value]
    if "enum" in prop and isinstance(value, str) and numbers and value in numbers:
        return numbers[value]
    return value

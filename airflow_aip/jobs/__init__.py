"""The pure job model: IDs, states, trainingInput, hyperparameter rules, adoption, best trial, summary.

Imports neither Airflow nor Google: the operators and the local training service both use it,
so each rule exists once.
"""

from __future__ import annotations

from airflow_aip.jobs.adoption import (
    CLOCK_SKEW,
    IF_EXISTS,
    Action,
    Adoption,
    Owner,
    Tries,
    check_if_exists,
    decide_adoption,
    spec_differences,
)
from airflow_aip.jobs.hashing import short_hash, shorten
from airflow_aip.jobs.hyperparameters import check_hyperparameters, check_param
from airflow_aip.jobs.ids import (
    JOB_ID_MAX_LENGTH,
    MAX_ATTEMPTS,
    attempt_of,
    job_id_for_task,
    make_job_id,
    sanitize_prefix,
    validate_job_id,
    validate_pinned_job_id,
    with_attempt,
)
from airflow_aip.jobs.labels import (
    DAG_ID_LABEL,
    MAP_INDEX_LABEL,
    OWNER_LABELS,
    RUN_ID_LABEL,
    TASK_ID_LABEL,
    TRY_LABEL,
    airflow_labels,
    sanitize_label_key,
    sanitize_label_value,
    validate_labels,
)
from airflow_aip.jobs.schema import discovery_document, discovery_document_path
from airflow_aip.jobs.states import TERMINAL_STATES, JobState
from airflow_aip.jobs.summary import summarize_job
from airflow_aip.jobs.training_input import (
    build_training_input,
    deep_merge,
    duration_seconds,
    load_job_config,
    validate_job,
    validate_training_input,
)
from airflow_aip.jobs.trials import DEFAULT_METRIC_TAG, best_trial, objective_value

__all__ = [
    "CLOCK_SKEW",
    "DAG_ID_LABEL",
    "DEFAULT_METRIC_TAG",
    "IF_EXISTS",
    "JOB_ID_MAX_LENGTH",
    "MAP_INDEX_LABEL",
    "MAX_ATTEMPTS",
    "OWNER_LABELS",
    "RUN_ID_LABEL",
    "TASK_ID_LABEL",
    "TERMINAL_STATES",
    "TRY_LABEL",
    "Action",
    "Adoption",
    "JobState",
    "Owner",
    "Tries",
    "airflow_labels",
    "attempt_of",
    "best_trial",
    "build_training_input",
    "check_hyperparameters",
    "check_if_exists",
    "check_param",
    "decide_adoption",
    "deep_merge",
    "discovery_document",
    "discovery_document_path",
    "duration_seconds",
    "job_id_for_task",
    "load_job_config",
    "make_job_id",
    "objective_value",
    "sanitize_label_key",
    "sanitize_label_value",
    "sanitize_prefix",
    "short_hash",
    "shorten",
    "spec_differences",
    "summarize_job",
    "validate_job",
    "validate_job_id",
    "validate_labels",
    "validate_pinned_job_id",
    "validate_training_input",
    "with_attempt",
]

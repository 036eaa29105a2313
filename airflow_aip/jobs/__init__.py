"""The pure job model: IDs, states, trainingInput, hyperparameter rules, best trial, summary.

Imports neither Airflow nor Google: the operators and the local training service both use it,
so each rule exists once.
"""

from __future__ import annotations

from airflow_aip.jobs.diff import diff_training_input
from airflow_aip.jobs.hyperparameters import check_hyperparameters, check_param
from airflow_aip.jobs.ids import (
    JOB_ID_MAX_LENGTH,
    attempt_of,
    make_job_id,
    sanitize_prefix,
    validate_job_id,
    with_attempt,
)
from airflow_aip.jobs.labels import (
    DAG_ID_LABEL,
    RUN_ID_LABEL,
    TASK_ID_LABEL,
    airflow_labels,
    sanitize_label_key,
    sanitize_label_value,
    validate_labels,
)
from airflow_aip.jobs.schema import discovery_document, discovery_document_path
from airflow_aip.jobs.states import TERMINAL_STATES, JobState
from airflow_aip.jobs.summary import console_url, summarize_job
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
    "DAG_ID_LABEL",
    "DEFAULT_METRIC_TAG",
    "JOB_ID_MAX_LENGTH",
    "RUN_ID_LABEL",
    "TASK_ID_LABEL",
    "TERMINAL_STATES",
    "JobState",
    "airflow_labels",
    "attempt_of",
    "best_trial",
    "build_training_input",
    "check_hyperparameters",
    "check_param",
    "console_url",
    "deep_merge",
    "diff_training_input",
    "discovery_document",
    "discovery_document_path",
    "duration_seconds",
    "load_job_config",
    "make_job_id",
    "objective_value",
    "sanitize_label_key",
    "sanitize_label_value",
    "sanitize_prefix",
    "summarize_job",
    "validate_job",
    "validate_job_id",
    "validate_labels",
    "validate_training_input",
    "with_attempt",
]

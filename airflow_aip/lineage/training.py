"""Lineage of a training job: the data its args name and its packages in, its output directory out.

The job itself is no dataset but a run facet (resource name, state, best trial's metric): the
graph joins the data and the code to the output directory, which the export task reads from.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_aip.lineage.facets import (
    JOB_FACET,
    facet,
    gcs_dataset,
    operator_lineage,
    operator_lineage_type,
    package_facets,
    str_or_none,
)
from airflow_aip.lineage.uris import gcs_uris_in_args, staged_sha256, values_under

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

__all__ = ["submit_lineage"]


def submit_lineage(summary: Any, specs: Sequence[Any] = ()) -> OperatorLineage[Any, Any] | None:
    """SubmitTrainingJobOperator: the data in its job's args and its packages in, its output directory out.

    ``specs`` are where a job's args and packages come from, rendered: the operator's
    ``training_input``, ``config`` (a mapping or a file path) and a Vertex AI ``vertex_job``. The
    job itself is a run facet, not a dataset.
    """
    try:
        operator_lineage_type()
    except ImportError:
        return None
    summary = summary if isinstance(summary, Mapping) else {}
    output_dir = str_or_none(summary.get("output_dir"))
    loaded = [_loaded(spec) for spec in specs]
    all_args: list[Any] = []
    packages: list[Any] = []
    for spec in loaded:
        all_args += values_under(spec, "args")
        packages += values_under(spec, "packageUris")
    data = [gcs_dataset(uri) for uri in gcs_uris_in_args(all_args, exclude_under=output_dir)]
    code = [gcs_dataset(uri, package_facets(staged_sha256(uri))) for uri in packages]
    run_facets = {JOB_FACET: _job_facet(summary)} if summary else {}
    return operator_lineage(inputs=data + code, outputs=[gcs_dataset(output_dir)], run_facets=run_facets)


def _loaded(spec: Any) -> Any:
    """A config file path read as the operator reads it; anything unreadable adds nothing."""
    if not isinstance(spec, str | os.PathLike):
        return spec
    from airflow_aip.jobs import load_job_config

    try:
        return load_job_config(spec)
    except Exception:  # lineage never fails a task: the operator already reported a bad config
        return None


def _job_facet(summary: Mapping[str, Any]) -> Any:
    from airflow_aip.jobs.trials import objective_value

    best = summary.get("best_trial")
    best = best if isinstance(best, Mapping) else {}
    return facet(
        "AipTrainingJobRunFacet",
        jobId=str_or_none(summary.get("job_id")),
        name=str_or_none(summary.get("name")),
        backend=str_or_none(summary.get("backend")),
        state=str_or_none(summary.get("state")),
        projectId=str_or_none(summary.get("project_id")),
        region=str_or_none(summary.get("region")),
        consoleUrl=str_or_none(summary.get("console_url")),
        hyperparameterTuning=bool(summary.get("is_hyperparameter_tuning_job")),
        metricTag=str_or_none(summary.get("hyperparameter_metric_tag")),
        goal=str_or_none(summary.get("goal")),
        bestTrialId=str_or_none(best.get("trialId")),
        bestMetric=objective_value(best),
    )

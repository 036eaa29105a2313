"""The operators' bases: the connection's arguments (:mod:`airflow_aip.hooks.job_reference`), on BaseOperator.

Airflow applies a DAG's ``default_args`` to the parameters of each ``__init__`` in an operator's
class hierarchy that a BaseOperator subclass defines itself (``BaseOperatorMeta`` wraps it, and
reads its signature); ``.partial()`` checks its keywords against the same signatures. The
connection's ``__init__`` is a plain mixin's, shared with the triggers, so each base here defines
an ``__init__`` that stands for it (``functools.update_wrapper``: the signature Airflow reads is
the connection's; the body only passes the arguments on). So ``default_args={"gcp_conn_id": ...,
"project_id": ..., "region": ...}`` reaches every operator and the sensor.
"""

from __future__ import annotations

from functools import update_wrapper
from typing import Any

from airflow.sdk import BaseOperator

from airflow_aip.hooks.job_reference import GoogleIdentity, JobConnection, JobHooksMixin


class GoogleOperator(GoogleIdentity, BaseOperator):
    """An operator that reaches Google as ``gcp_conn_id`` (impersonating ``impersonation_chain``)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)

    update_wrapper(__init__, GoogleIdentity.__init__, assigned=())  # its signature: see the module


class JobOperator(JobHooksMixin, GoogleOperator):
    """An operator that addresses a job (or the Model Registry) through its job API, with its hooks.

    The sensor is one too: ``class TrainingJobSensor(JobOperator, BaseSensorOperator)``.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)

    update_wrapper(__init__, JobConnection.__init__, assigned=())  # its signature: see the module

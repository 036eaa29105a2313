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
from airflow_aip.jobs.budget import Budget, check_budget
from airflow_aip.jobs.pricing import PriceTable


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


class BudgetedJobOperator(JobOperator):
    """A job operator that waits on a job under a budget: the submit operator and the sensor.

    Their ``budget``, ``budget_currency`` and ``refuse_over_budget`` arguments (each stored by the
    subclass's ``__init__``, templated) are checked here, once, before anything is sent
    (:func:`airflow_aip.jobs.budget.check_budget`: a ValidationError naming the argument).
    """

    budget: Any
    budget_currency: Any
    refuse_over_budget: bool

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)

    update_wrapper(__init__, JobConnection.__init__, assigned=())  # its signature: see the module

    def checked_budget(self) -> Budget | None:
        """The task's budget in the price table's currency, or None; checked before any side effect."""
        return check_budget(self.budget, self.budget_currency, PriceTable.load())

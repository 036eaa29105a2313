"""Submit a training job (Vertex AI by default, or ml v1) and wait for it.

Users keep AI Platform's vocabulary (``training_input``, gcloud's config.yaml): on Vertex AI
(``backend="vertex"``, the default: ``[aip] backend``) it is translated to a CustomJob or a
HyperparameterTuningJob (``airflow_aip.jobs.vertex.translate``), with Vertex's own vocabulary
(``vertex_job``) and where the job gets its machines (``placement``) on top. Everything below
holds on both backends, ``placement`` aside.

What the removed MLEngineStartTrainingJobOperator got wrong, and what this does instead:

- Job IDs are ``{dag_id}_{task_id}[_{map_index}]_{YYYYMMDD_HHMMSS}_{hash}`` of the run's
  logical date (or run_after), the hash telling runs (and cut prefixes) apart: valid by
  construction (length included), distinct for two runs in the same second, and stable
  across retries of one task instance, so a retry finds the job its previous try created.
- ``if_exists="adopt"`` waits on that job only if it is this task instance's (its labels say
  so) with the same trainingInput and labels (else JobSpecMismatchError lists the differing
  fields); another run's job is never adopted, and a job that ended FAILED or CANCELLED is
  never re-adopted: the next attempt gets ``_r2``, ``_r3``... A retry resumes: it adopts the
  job of an earlier try. A user's clear asks for a new run: once the earlier job has ended
  (SUCCEEDED too), the cleared task trains anew under the next attempt ID; one still running is
  adopted. ``if_exists="always_adopt"`` adopts after a clear too. (Rule:
  ``airflow_aip.jobs.adoption``, which reads Airflow's try numbers.)
- Only SUCCEEDED succeeds; FAILED and CANCELLED fail with the job's errorMessage.
- ``cancel_on_kill`` cancels the job when the task is killed in the worker (``on_kill``) or
  while deferred (the trigger's ``on_kill``), and when the task gives up waiting
  (``wait_timeout``). Nothing else does: waiting is observation only (``airflow_aip.jobs.
  waiting``). An API outage while waiting (429, 5xx, dropped connections) is ridden out with
  backoff until ``wait_timeout``, in the worker as in the triggerer; any other error reading
  the job fails the task and leaves the job running, for the retry to adopt.
- The return value (XCom) is the job summary, trials and best trial included.
- ``stream_logs`` (default) copies the job's log lines into the task log while it waits, once
  each, in order, at most ``max_log_lines_per_minute``, and drains the last ones after the job
  ends; in deferrable mode the trigger does it (see TrainingJobTrigger).

How it runs: :mod:`.submit_run` (one path: a plain job, or a capacity ladder's rungs) and
:mod:`.watching` (announce, defer, wait, end). The arguments this replaced: :mod:`.training_args`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from airflow.sdk import Context

from airflow_aip import config
from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs import (
    Tries,
    airflow_labels,
    deep_merge,
    job_id_for_task,
    load_job_config,
    validate_pinned_job_id,
    with_attempt,
)
from airflow_aip.jobs.backends import build_requests
from airflow_aip.jobs.vertex.placement import Placement
from airflow_aip.links import TrainingJobConsoleLink
from airflow_aip.operators.connected import BudgetedJobOperator
from airflow_aip.operators.submit_run import SubmitPlan, SubmitRun
from airflow_aip.operators.training_args import TrainingInput, fold_deprecated
from airflow_aip.operators.watching import TaskWatch, WaitPolicy

__all__ = ["Placement", "SubmitTrainingJobOperator", "TrainingInput"]


class SubmitTrainingJobOperator(BudgetedJobOperator):
    """Submit a training job and, by default, wait for it to end.

    trainingInput comes from ``config`` (a config.yaml-style mapping or file path), then
    ``training_input``; later wins, as gcloud's flags beat its config file. Everything is
    validated before the first request, each error naming its field.

    :param training_input: AI Platform's ``trainingInput``
        (:class:`~airflow_aip.operators.training_args.TrainingInput`): the package, module, args,
        machines, runtime, hyperparameters... Values may be templates or upstream tasks' outputs
        (``{"packageUris": stage.output}``). Merged over ``config``'s.
    :param config: gcloud's ``config.yaml``: a path (YAML or JSON) or the mapping it holds
        (``{"trainingInput": {...}, "labels": {...}}``).
    :param vertex_job: a CustomJob or HyperparameterTuningJob body in Vertex AI's own REST
        vocabulary, merged over the translation (or the whole job, without a trainingInput).
    :param executor_image_uri: Vertex AI pre-built training container; wins over the one
        ``runtimeVersion``/``pythonVersion``/``framework`` translate to.
    :param framework: what the trainer needs from the container on Vertex AI
        (tensorflow, scikit-learn, xgboost, pytorch; default tensorflow, as AI Platform's runtimes).
    :param placement: where the job gets its machines, Vertex AI only: a
        :class:`~airflow_aip.jobs.vertex.placement.Placement` mapping (``{"strategy": "SPOT"}``, a
        reservation, a persistent resource, a TensorBoard), or a list of them, a capacity ladder
        (``["SPOT", "STANDARD"]``): each rung is one job, created once; a capacity failure climbs to
        the next rung, a trainer's failure never does, and ``wait_timeout`` bounds each rung's wait
        (:mod:`airflow_aip.jobs.vertex.ladder`). Checked with the machine table's rules before
        anything is sent.
    :param job_id: the job's ID, exactly (default: derived from the task instance and run).
    :param job_id_prefix: the start of the derived job ID (default: ``{dag_id}_{task_id}``).
    :param labels: the job's labels, over ``config``'s (Airflow's own are added).
    :param if_exists: when the job ID is taken: "adopt" (default: a retry adopts the earlier
        try's job; after a user's clear, a job that ended is trained anew), "always_adopt" (a
        clear adopts too), "new" (always a new job) or "fail".
    :param wait_for_completion: wait for the job to end (else return once it is created).
    :param deferrable: wait in the triggerer rather than in the worker (default ``[aip] deferrable``).
    :param defer_after: deferrable: seconds first waited in the worker, so a job that ends within
        them ends the task with no deferral and no ``[aip] deferral_hold`` (default ``[aip] defer_after``;
        0 defers at once).
    :param poll_interval: seconds between reads of the job (default ``[aip] poll_interval``).
    :param wait_timeout: seconds to wait before giving up (None: no limit of our own).
    :param cancel_on_kill: cancel the job if the task is killed or gives up waiting.
    :param stream_logs: while waiting, copy the job's log lines (Cloud Logging) into the task log.
    :param max_log_lines_per_minute: cap on those lines; the count of lines dropped is logged.
    :param budget: at most this much, in the price table's currency, for the job (a capacity
        ladder: for the whole climb; a retry or clear: with what earlier tries of the run spent).
        Checked at every read of the job while waiting, in the worker or the triggerer: past it,
        the job is cancelled once and the task fails with the estimate, the budget and the price
        table's date. Before submit, a worst case (every trial until ``scheduling.timeout``) over
        it is logged; a ladder never climbs to a rung whose worst case passes what is left.
        Estimates only (:mod:`airflow_aip.jobs.cost`): a job that cannot be estimated is never
        cancelled for cost. None: costs are logged, nothing is stopped.
    :param budget_currency: the budget's currency; must be the price table's (default: it).
    :param refuse_over_budget: refuse to submit when the worst case is over the budget.
    :param project_id: the Google Cloud project (default: the connection's).
    :param region: the job's region (default: the trainingInput's, then ``[aip] region``).
    :param gcp_conn_id: the Airflow connection to Google Cloud.
    :param api_endpoint: the training API's endpoint, e.g. the local training service's URL.
    :param impersonation_chain: a service account to impersonate, or a chain of them.
    :param backend: "vertex" (Vertex AI custom training; default ``[aip] backend``) or
        "ai_platform" (the ml v1 API: the local service or a compatible endpoint; Google shut
        AI Platform Training down on 2025-01-31).

    The arguments ``training_input`` and ``placement`` replaced (``package_uris=``,
    ``scheduling_strategy=``, ``capacity_ladder=``...) are still taken for one release, with a
    deprecation warning (:mod:`airflow_aip.operators.training_args`).
    """

    template_fields: Sequence[str] = (
        "backend",
        "job_id",
        "job_id_prefix",
        "project_id",
        "region",
        "training_input",
        "config",
        "vertex_job",
        "executor_image_uri",
        "framework",
        "placement",
        "labels",
        "gcp_conn_id",
        "api_endpoint",
        "impersonation_chain",
        "budget",
    )
    template_fields_renderers = {
        name: "json" for name in ("training_input", "config", "vertex_job", "placement", "labels")
    }
    operator_extra_links = (TrainingJobConsoleLink(),)
    ui_color = "#d2e3fc"

    def __init__(
        self,
        *,
        training_input: TrainingInput | Mapping[str, Any] | None = None,
        config: Mapping[str, Any] | str | None = None,
        vertex_job: Mapping[str, Any] | None = None,
        executor_image_uri: str | None = None,
        framework: str | None = None,
        placement: Placement | Sequence[Placement | Mapping[str, Any] | str] | str | None = None,
        job_id: str | None = None,
        job_id_prefix: str | None = None,
        labels: Mapping[str, str] | None = None,
        if_exists: Literal["adopt", "always_adopt", "fail", "new"] = "adopt",
        wait_for_completion: bool = True,
        deferrable: bool = config.default_deferrable(),
        defer_after: float = config.defer_after(),
        poll_interval: float = config.poll_interval(),
        wait_timeout: float | None = None,
        cancel_on_kill: bool = True,
        stream_logs: bool = True,
        max_log_lines_per_minute: int = config.max_log_lines_per_minute(),
        budget: float | str | None = None,
        budget_currency: str | None = None,
        refuse_over_budget: bool = False,
        **kwargs: Any,
    ) -> None:
        training_input, placement = fold_deprecated(kwargs, training_input, placement)
        super().__init__(**kwargs)
        self.training_input = training_input
        self.config = config
        self.vertex_job = vertex_job
        self.executor_image_uri = executor_image_uri
        self.framework = framework
        self.placement = placement
        self.job_id = job_id
        self.job_id_prefix = job_id_prefix
        self.labels = labels
        self.if_exists = if_exists
        self.wait_for_completion = wait_for_completion
        self.deferrable = deferrable
        self.defer_after = defer_after
        self.poll_interval = poll_interval
        self.wait_timeout = wait_timeout
        self.cancel_on_kill = cancel_on_kill
        self.stream_logs = stream_logs
        self.max_log_lines_per_minute = max_log_lines_per_minute
        self.budget = budget
        self.budget_currency = budget_currency
        self.refuse_over_budget = refuse_over_budget
        self._watch: TaskWatch | None = None  # this try's watch over its job, once it runs (on_kill)

    def default_region(self) -> str | None:
        """None: the region is the trainingInput's, then ``[aip] region``, decided when the task runs."""
        return None

    # -- building the requests (pure; every check before any side effect) --------------------

    def wait_policy(self) -> WaitPolicy:
        """How this task waits, every value checked."""
        return WaitPolicy(
            wait_for_completion=self.wait_for_completion,
            deferrable=self.deferrable,
            defer_after=self.defer_after,
            poll_interval=self.poll_interval,
            wait_timeout=self.wait_timeout,
            cancel_on_kill=self.cancel_on_kill,
            stream_logs=self.stream_logs,
            max_log_lines_per_minute=self.max_log_lines_per_minute,
            budget=self.checked_budget(),
            refuse_over_budget=bool(self.refuse_over_budget),
        ).checked()

    def build_job(self, context: Context) -> SubmitPlan:
        """Every request this task may send (the job's, or each rung's of a ladder), validated."""
        loaded = load_job_config(self.config)
        if self.training_input is not None and not isinstance(self.training_input, Mapping):
            kind = type(self.training_input).__name__
            raise ValidationError("training_input", f"must be a mapping of trainingInput fields, got {kind}")
        layered = deep_merge(loaded.get("trainingInput") or {}, self.training_input or {})
        if self.labels is not None and not isinstance(self.labels, Mapping):
            raise ValidationError("labels", f"must be a mapping of strings, got {type(self.labels).__name__}")
        ti = context["ti"]
        user_labels = {**(loaded.get("labels") or {}), **(self.labels or {})}
        try_number = int(getattr(ti, "try_number", None) or 1)
        labels = airflow_labels(
            ti.dag_id, ti.task_id, ti.run_id, user_labels, getattr(ti, "map_index", -1), try_number
        )
        base_id = self._base_id(context)
        planned = build_requests(
            self.backend,
            placement=self.placement,
            layered_input=layered,
            named={"region": self.region},
            labels=labels,
            first_id=base_id,
            default_region=config.region(),
            executor_image_uri=self.executor_image_uri,
            framework=self.framework,
            vertex_job=self.vertex_job,
        )
        tries, retries = None, int(self.retries or 0)
        if self.if_exists != "always_adopt":
            max_tries = getattr(ti, "max_tries", None)
            tries = Tries.of(try_number, retries if max_tries is None else int(max_tries), retries)
        return SubmitPlan(planned.rungs, planned.requests, base_id, tries=tries, if_exists=self.if_exists)

    def _base_id(self, context: Context) -> str:
        """Attempt 1's job ID: every try of this task instance computes the same (see jobs.ids)."""
        if self.job_id:
            return with_attempt(validate_pinned_job_id(self.job_id), 1)
        ti = context["ti"]
        base = job_id_for_task(
            self.job_id_prefix,
            context.get("logical_date") or context["dag_run"].run_after,
            dag_id=ti.dag_id,
            task_id=ti.task_id,
            run_id=ti.run_id,
            map_index=getattr(ti, "map_index", -1),
        )
        return with_attempt(base, 1)

    # -- running ---------------------------------------------------------------------------

    def execute(self, context: Context) -> dict[str, Any]:
        watch = self._watching()
        watch.say_what_core_lacks()
        return self._kept(self._run(context, watch).run(context))

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """Resumed from the trigger: the event says which job and how it ended (a ladder may climb on)."""
        return self._run(context, self._watching()).complete(event, context)

    def _run(self, context: Context, watch: TaskWatch) -> SubmitRun:
        run = SubmitRun(self.build_job(context), watch.hook, watch.policy, watch)
        run.resume()  # a tuning job resuming an earlier one: find it, count its trials
        return run

    def _watching(self) -> TaskWatch:
        self._watch = TaskWatch(self, self.job_api, self.wait_policy(), clock=time.time)
        return self._watch

    def on_kill(self) -> None:
        """Killed while waiting in the worker: cancel the job (deferred kills: the trigger's on_kill)."""
        if self._watch is not None:
            self._watch.kill()

    # -- lineage (airflow_aip.lineage) ---------------------------------------------------------

    def _kept(self, summary: dict[str, Any]) -> dict[str, Any]:
        """The summary ``execute`` returns, kept for :meth:`get_openlineage_facets_on_complete`."""
        self._lineage_result = summary
        return summary

    def resume_execution(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Context) -> Any:
        """Resumed from the triggerer (``execute_complete``, a ladder's next rung): keep what it returns.

        A resumed task is a new operator instance in a new process: ``execute`` kept nothing here.
        """
        self._lineage_result = super().resume_execution(next_method, next_kwargs, context)
        return self._lineage_result

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """OpenLineage (the optional provider calls this): data and packages in, output directory out.

        The summary is the one ``execute`` or ``resume_execution`` kept on this instance (see
        :func:`airflow_aip.lineage.task_result`); the job's args and packages are read from the
        rendered ``training_input``, ``config`` and ``vertex_job``.
        """
        from airflow_aip.lineage import submit_lineage, task_result

        specs = (self.training_input, self.config, self.vertex_job)
        return submit_lineage(task_result(self, task_instance), specs)

"""Submit a training job (Vertex AI by default, or ml v1) and wait for it.

Users keep AI Platform's vocabulary (trainingInput arguments, gcloud's config.yaml): on Vertex
AI (``backend="vertex"``, the default: ``[aip] backend``) it is translated to a CustomJob or a
HyperparameterTuningJob (``airflow_aip.jobs.vertex.translate``), with Vertex's own vocabulary
(``vertex_job``) on top. Everything below holds on both backends.

What the removed MLEngineStartTrainingJobOperator got wrong, and what this does instead:

- Job IDs are ``{dag_id}_{task_id}[_{map_index}]_{YYYYMMDD_HHMMSS}_{hash}`` of the run's
  logical date (or run_after), the hash telling runs (and cut prefixes) apart: valid by
  construction (length included), distinct for two runs in the same second, and stable
  across retries of one task instance, so a retry finds the job its previous try created.
- ``if_exists="adopt"`` waits on that job only if it is this task instance's (its labels say
  so) with the same trainingInput and labels (else JobSpecMismatchError lists the differing
  fields); another run's job is never adopted, and a job that ended FAILED or CANCELLED is
  never re-adopted: the next attempt gets ``_r2``, ``_r3``... (rule: ``airflow_aip.jobs.adoption``)
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
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, Literal

from airflow.sdk import BaseOperator, Context

from airflow_aip import config
from airflow_aip.exceptions import ValidationError
from airflow_aip.hooks.base import DEFAULT_CONN_ID
from airflow_aip.hooks.job_reference import JobHooksMixin, cancel_quietly
from airflow_aip.hooks.waiting import SyncWait, finished
from airflow_aip.jobs import (
    JobState,
    airflow_labels,
    check_if_exists,
    deep_merge,
    job_id_for_task,
    load_job_config,
    summarize_job,
    validate_pinned_job_id,
    with_attempt,
)
from airflow_aip.jobs.backends import build_request
from airflow_aip.jobs.logs import LogStream, check_lines_per_minute
from airflow_aip.jobs.mlv1.view import ml_job_name
from airflow_aip.jobs.request import JobRequest
from airflow_aip.jobs.vertex.ladder import ladder_given, parse_ladder
from airflow_aip.jobs.waiting import DEFERRAL_TIMEOUT_MARGIN
from airflow_aip.links import (
    CONSOLE_URL_XCOM_KEY,
    JOB_API_XCOM_KEY,
    JOB_ID_XCOM_KEY,
    TrainingJobConsoleLink,
    record_ending,
)
from airflow_aip.masking import masked_values_in
from airflow_aip.operators.laddered import LadderMixin, LadderPlan, plan_ladder
from airflow_aip.operators.submission import submit_job
from airflow_aip.triggers.training import TrainingJobTrigger


class SubmitTrainingJobOperator(LadderMixin, JobHooksMixin, BaseOperator):
    """Submit a training job and, by default, wait for it to end.

    trainingInput comes from ``config`` (a config.yaml-style mapping or file path), then
    ``training_input`` (any API field), then the named arguments; later wins, as gcloud's
    flags beat its config file. Everything is validated before the first request.

    :param if_exists: "adopt" (default), "fail" or "new" when the job ID is taken.
    :param wait_timeout: seconds to wait before giving up (None: no limit of our own).
    :param cancel_on_kill: cancel the job if the task is killed or gives up waiting.
    :param stream_logs: while waiting, copy the job's log lines (Cloud Logging) into the task log.
    :param max_log_lines_per_minute: cap on those lines; the count of lines dropped is logged.
    :param backend: "vertex" (Vertex AI custom training; default ``[aip] backend``) or
        "ai_platform" (the ml v1 API: the local service or a compatible endpoint; Google shut
        AI Platform Training down on 2025-01-31).
    :param executor_image_uri: Vertex AI pre-built training container; wins over the one
        ``runtime_version``/``python_version``/``framework`` translate to.
    :param framework: what the trainer needs from the container on Vertex AI
        (tensorflow, scikit-learn, xgboost, pytorch; default tensorflow, as AI Platform's runtimes).
    :param vertex_job: a CustomJob or HyperparameterTuningJob body in Vertex AI's own REST
        vocabulary, merged over the translation (or the whole job, without AI Platform arguments).
    :param scheduling_strategy: Vertex AI's STANDARD, SPOT or FLEX_START.
    :param max_wait_duration: how long FLEX_START may wait for machines (``"3600s"``).
    :param restart_job_on_worker_restart: restart the whole job when a worker restarts.
    :param reservation: a Compute Engine reservation to consume (its name), or ``"any"``.
    :param persistent_resource_id: run on this persistent resource's machines.
    :param network: the VPC network to peer with (AI Platform's ``trainingInput.network``).
    :param tensorboard: a Vertex AI TensorBoard resource to upload logs to (needs ``service_account``).
        These are checked with the machine table's rules before anything is sent
        (:mod:`airflow_aip.jobs.vertex.placement`).
    :param capacity_ladder: an ordered list of rungs, each a strategy (``"SPOT"``) or a mapping
        (``label``, ``strategy``, ``max_wait_duration``, ``queued_limit``, ``region``,
        ``machine_type``, ``accelerator_type``, ``accelerator_count``, ``reservation``,
        ``persistent_resource_id``): each rung is one job, created once; a capacity failure
        climbs to the next rung, a trainer's failure never does (:mod:`airflow_aip.jobs.vertex.ladder`).
        ``wait_timeout`` bounds each rung's wait. Vertex AI only.
    """

    template_fields: Sequence[str] = (
        "backend",
        "job_id",
        "job_id_prefix",
        "project_id",
        "region",
        "job_dir",
        "package_uris",
        "python_module",
        "args",
        "scale_tier",
        "master_type",
        "master_config",
        "worker_type",
        "worker_count",
        "worker_config",
        "parameter_server_type",
        "parameter_server_count",
        "parameter_server_config",
        "runtime_version",
        "python_version",
        "scheduling",
        "service_account",
        "hyperparameters",
        "training_input",
        "config",
        "labels",
        "gcp_conn_id",
        "api_endpoint",
        "impersonation_chain",
        "executor_image_uri",
        "framework",
        "vertex_job",
        "scheduling_strategy",
        "max_wait_duration",
        "restart_job_on_worker_restart",
        "reservation",
        "persistent_resource_id",
        "network",
        "tensorboard",
        "capacity_ladder",
    )
    template_fields_renderers = {
        name: "json"
        for name in (
            "args",
            "hyperparameters",
            "training_input",
            "config",
            "labels",
            "scheduling",
            "master_config",
            "vertex_job",
            "capacity_ladder",
        )
    }
    operator_extra_links = (TrainingJobConsoleLink(),)
    ui_color = "#d2e3fc"

    def __init__(
        self,
        *,
        project_id: str | None = None,
        region: str | None = None,
        job_id: str | None = None,
        job_id_prefix: str | None = None,
        package_uris: list[str] | None = None,
        python_module: str | None = None,
        args: list[str] | None = None,
        job_dir: str | None = None,
        scale_tier: str | None = None,
        master_type: str | None = None,
        master_config: dict[str, Any] | None = None,
        worker_type: str | None = None,
        worker_count: int | None = None,
        worker_config: dict[str, Any] | None = None,
        parameter_server_type: str | None = None,
        parameter_server_count: int | None = None,
        parameter_server_config: dict[str, Any] | None = None,
        runtime_version: str | None = None,
        python_version: str | None = None,
        scheduling: dict[str, Any] | None = None,
        service_account: str | None = None,
        hyperparameters: dict[str, Any] | None = None,
        training_input: dict[str, Any] | None = None,
        config: dict[str, Any] | str | None = None,
        labels: dict[str, str] | None = None,
        if_exists: Literal["adopt", "fail", "new"] = "adopt",
        wait_for_completion: bool = True,
        deferrable: bool = config.default_deferrable(),
        poll_interval: float = config.poll_interval(),
        wait_timeout: float | None = None,
        cancel_on_kill: bool = True,
        stream_logs: bool = True,
        max_log_lines_per_minute: int = config.max_log_lines_per_minute(),
        gcp_conn_id: str = DEFAULT_CONN_ID,
        api_endpoint: str | None = None,
        impersonation_chain: str | list[str] | None = None,
        backend: str = config.backend(),
        executor_image_uri: str | None = None,
        framework: str | None = None,
        vertex_job: dict[str, Any] | None = None,
        scheduling_strategy: str | None = None,
        max_wait_duration: str | None = None,
        restart_job_on_worker_restart: bool | None = None,
        reservation: str | None = None,
        persistent_resource_id: str | None = None,
        network: str | None = None,
        tensorboard: str | None = None,
        capacity_ladder: list[Any] | str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.scheduling_strategy = scheduling_strategy
        self.max_wait_duration = max_wait_duration
        self.restart_job_on_worker_restart = restart_job_on_worker_restart
        self.reservation = reservation
        self.persistent_resource_id = persistent_resource_id
        self.network = network
        self.tensorboard = tensorboard
        self.capacity_ladder = capacity_ladder
        self.backend = backend
        self.executor_image_uri = executor_image_uri
        self.framework = framework
        self.vertex_job = vertex_job
        self.project_id = project_id
        self.region = region
        self.job_id = job_id
        self.job_id_prefix = job_id_prefix
        self.package_uris = package_uris
        self.python_module = python_module
        self.args = args
        self.job_dir = job_dir
        self.scale_tier = scale_tier
        self.master_type = master_type
        self.master_config = master_config
        self.worker_type = worker_type
        self.worker_count = worker_count
        self.worker_config = worker_config
        self.parameter_server_type = parameter_server_type
        self.parameter_server_count = parameter_server_count
        self.parameter_server_config = parameter_server_config
        self.runtime_version = runtime_version
        self.python_version = python_version
        self.scheduling = scheduling
        self.service_account = service_account
        self.hyperparameters = hyperparameters
        self.training_input = training_input
        self.config = config
        self.labels = labels
        self.if_exists = if_exists
        self.wait_for_completion = wait_for_completion
        self.deferrable = deferrable
        self.poll_interval = poll_interval
        self.wait_timeout = wait_timeout
        self.cancel_on_kill = cancel_on_kill
        self.stream_logs = stream_logs
        self.max_log_lines_per_minute = max_log_lines_per_minute
        self.gcp_conn_id = gcp_conn_id
        self.api_endpoint = api_endpoint
        self.impersonation_chain = impersonation_chain
        self._watched: tuple[str, str] | None = None  # (job name, project) while waiting, for on_kill
        self._request_region: str | None = None  # where the validated request runs (Vertex AI)
        self._plan: LadderPlan | None = None  # a capacity ladder or a resumed study, once built

    # -- building the request (pure; every check before any side effect) --------------------

    def _named_arguments(self) -> dict[str, Any]:
        return {
            "region": self.region,
            "jobDir": self.job_dir,
            "packageUris": self.package_uris,
            "pythonModule": self.python_module,
            "args": self.args,
            "scaleTier": self.scale_tier,
            "masterType": self.master_type,
            "masterConfig": self.master_config,
            "workerType": self.worker_type,
            "workerCount": self.worker_count,
            "workerConfig": self.worker_config,
            "parameterServerType": self.parameter_server_type,
            "parameterServerCount": self.parameter_server_count,
            "parameterServerConfig": self.parameter_server_config,
            "runtimeVersion": self.runtime_version,
            "pythonVersion": self.python_version,
            "scheduling": self.scheduling,
            "serviceAccount": self.service_account,
            "network": self.network,
            "hyperparameters": self.hyperparameters,
        }

    def _placement(self) -> dict[str, Any]:
        """Vertex AI's scheduling and placement arguments (see airflow_aip.jobs.vertex.placement)."""
        return {
            "scheduling_strategy": self.scheduling_strategy,
            "max_wait_duration": self.max_wait_duration,
            "restart_job_on_worker_restart": self.restart_job_on_worker_restart,
            "reservation": self.reservation,
            "persistent_resource_id": self.persistent_resource_id,
            "tensorboard": self.tensorboard,
        }

    def job_region(self) -> str | None:
        """The request's region (argument, config file, then ``[aip] region``) once it is built."""
        return self._request_region or self.region

    def build_job(self, context: Context) -> tuple[JobRequest, Callable[[int], str]]:
        """The validated request (any attempt ID) and the attempt-ID function; sets ``region``."""
        check_if_exists(self.if_exists)
        for name in ("poll_interval", "wait_timeout"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int | float) or value <= 0):
                raise ValidationError(name, f"must be a positive number of seconds, got {value!r}")
        check_lines_per_minute(self.max_log_lines_per_minute)
        loaded = load_job_config(self.config)
        layered = deep_merge(loaded.get("trainingInput") or {}, self.training_input or {})
        if self.labels is not None and not isinstance(self.labels, Mapping):
            raise ValidationError("labels", f"must be a mapping of strings, got {type(self.labels).__name__}")
        ti = context["ti"]
        user_labels = {**(loaded.get("labels") or {}), **(self.labels or {})}
        labels = airflow_labels(ti.dag_id, ti.task_id, ti.run_id, user_labels, getattr(ti, "map_index", -1))
        id_for = self._attempt_ids(context)
        request = build_request(
            self.backend,
            layered_input=layered,
            named=self._named_arguments(),
            labels=labels,
            first_id=id_for(1),
            default_region=config.region(),
            executor_image_uri=self.executor_image_uri,
            framework=self.framework,
            vertex_job=self.vertex_job,
            placement=self._placement(),
        )
        self._request_region = request.region
        rungs = parse_ladder(self.capacity_ladder) if ladder_given(self.capacity_ladder) else ()
        self._plan = plan_ladder(request, rungs, id_for(1)) if rungs or request.resume_from else None
        return request, id_for

    def _attempt_ids(self, context: Context) -> Callable[[int], str]:
        """Attempt n's job ID: every try of this task instance computes the same ones (see jobs.ids)."""
        if self.job_id:
            base = validate_pinned_job_id(self.job_id)
        else:
            ti = context["ti"]
            base = job_id_for_task(
                self.job_id_prefix,
                context.get("logical_date") or context["dag_run"].run_after,
                dag_id=ti.dag_id,
                task_id=ti.task_id,
                run_id=ti.run_id,
                map_index=getattr(ti, "map_index", -1),
            )
        return lambda n: with_attempt(base, n)

    # -- running ---------------------------------------------------------------------------

    def execute(self, context: Context) -> dict[str, Any]:
        request, id_for = self.build_job(context)
        if self._plan is not None:
            return self._kept(self.run_ladder(context, self._resolved(self._plan, request)))
        project = self.hook.project_id
        job = submit_job(self.hook, request, id_for, self.if_exists, self.log)
        job_id, name = str(job["job_id"]), str(job["name"])
        self._watched = (name, project)
        summary = summarize_job(job)
        context["ti"].xcom_push(key=JOB_ID_XCOM_KEY, value=job_id)
        api = self.job_api.for_job(name, project)
        context["ti"].xcom_push(key=JOB_API_XCOM_KEY, value=api)  # the UI's live tab reads the job
        context["ti"].xcom_push(key=CONSOLE_URL_XCOM_KEY, value=summary["console_url"])
        self.log.info("Training job %s (%s): %s", job_id, name, summary["console_url"])
        if not self.wait_for_completion:
            self._watched = None
            return self._kept(summary)
        end_time = time.time() + self.wait_timeout if self.wait_timeout else None
        if self.deferrable and not JobState.parse(job.get("state")).is_terminal:
            self.defer(
                trigger=TrainingJobTrigger.for_task(
                    self,
                    job_id=job_id,
                    job_name=name,
                    project_id=project,
                    poll_interval=self.poll_interval,
                    end_time=end_time,
                    masked_values=masked_values_in(request.body),
                ),
                method_name="execute_complete",
                timeout=timedelta(seconds=self.wait_timeout + DEFERRAL_TIMEOUT_MARGIN)
                if self.wait_timeout
                else None,
            )
        return self._kept(self._poll(job, project, end_time))

    def _poll(self, job: dict[str, Any], project: str, end_time: float | None) -> dict[str, Any]:
        """Wait in the worker: the one wait step, driven by the sync runner (see hooks/waiting.py).

        With ``stream_logs``, each poll also copies the new log lines, and once the job ended
        the last ones are drained (lines printed just before the end are ingested after it).
        """

        def stream_for(seen: Mapping[str, Any]) -> LogStream:
            return LogStream.for_job(
                str(seen["log_id"]), seen.get("create_time"), lines_per_minute=self.max_log_lines_per_minute
            )

        wait = SyncWait(
            self.wait_hook,
            self.logs_hook,
            str(job["job_id"]),
            project,
            job_name=str(job["name"]),
            poll_interval=self.poll_interval,
            deadline=end_time,
            log=self.log,
            stream_for=stream_for if self.stream_logs else None,
        )
        return self._finish(wait.run(job))

    def _resolved(self, plan: LadderPlan, request: JobRequest) -> LadderPlan:
        return self.resumed_plan(plan, request.resume_from) if request.resume_from else plan

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """Resumed from the trigger: the event alone says which job and how it ended."""
        request, _ = self.build_job(context)  # pure: is there a ladder, or a resumed study?
        if self._plan is not None:
            return self.ladder_complete(event, context, self._resolved(self._plan, request))
        project = str(event.get("project_id"))
        name = event.get("job_name") or ml_job_name(
            project, str(event.get("job_id"))
        )  # events before job_name
        self._watched = (str(name), project)
        return self._finish(event)

    def _finish(self, event: dict[str, Any]) -> dict[str, Any]:
        # Only giving up (our own wait_timeout) cancels; an error reading the job never does.
        if event.get("status") == "timeout" and self.cancel_on_kill and self._watched:
            self._cancel(*self._watched, reason=str(event.get("status")))
        self._watched = None
        record_ending(event, self.log)
        return finished(event, self.log)

    def _cancel(self, name: str, project: str, reason: str) -> None:
        """Cancel through the job's own region (a ladder's rung may have moved it)."""
        api = self.job_api.addressing(name).arguments
        cancel_quietly(name, project_id=project, reason=reason, log=self.log, **api)

    def on_kill(self) -> None:
        """Killed while waiting in the worker: cancel the job (deferred kills: the trigger's on_kill)."""
        if self.cancel_on_kill and self._watched:
            watched, self._watched = self._watched, None
            self._cancel(*watched, reason="task killed")

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
        :func:`airflow_aip.lineage.task_result`); args and packages are the rendered arguments.
        """
        from airflow_aip.lineage import submit_lineage, task_result

        specs = (self.training_input, self.config, self.vertex_job)
        return submit_lineage(task_result(self, task_instance), self.args, self.package_uris, specs)

"""The submit operator's capacity ladder and resumed studies: create a rung, wait, climb on capacity only.

The submit operator hands over here when it was given ``capacity_ladder`` or when its tuning
job resumes an earlier one (``resumePreviousJobId``). Each pass: climb (:mod:`.climbing`: find
the rung reached, create its job once), wait on that job in the worker or deferred (the trigger
carries the rung's region and ``queued_limit``), then decide on what ended the wait:

- QUEUED past the rung's ``queued_limit``: cancel the job (the ladder gives the rung up) and climb;
- FAILED for capacity (:func:`airflow_aip.jobs.vertex.capacity.rung_ending`): climb;
- anything else ends the task as it would without a ladder: a trainer's failure fails it.

The summary in XCom gains ``ladder`` (each rung: job, outcome, why it ended, waited and ran
seconds) and, for a study over several jobs, every trial with the job and rung that ran it,
and the best over all of them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from airflow_aip.exceptions import CapacityExhaustedError, ValidationError
from airflow_aip.hooks.waiting import SyncWait, finished
from airflow_aip.jobs import JobState, summarize_job
from airflow_aip.jobs.ids import with_attempt
from airflow_aip.jobs.logs import LogStream
from airflow_aip.jobs.request import JobRequest
from airflow_aip.jobs.vertex.capacity import rung_ending
from airflow_aip.jobs.vertex.ladder import RUNG_LABEL, Rung, ladder_requests
from airflow_aip.jobs.vertex.ladder_trials import Earlier, continue_study, rung_record, with_ladder
from airflow_aip.jobs.vertex.view import TUNING_KIND
from airflow_aip.jobs.view import JobView
from airflow_aip.jobs.waiting import DEFERRAL_TIMEOUT_MARGIN
from airflow_aip.links import CONSOLE_URL_XCOM_KEY, JOB_API_XCOM_KEY, JOB_ID_XCOM_KEY, record_ending
from airflow_aip.masking import masked_values_in
from airflow_aip.operators.climbing import Position, climb
from airflow_aip.operators.submission import submit_job
from airflow_aip.triggers.training import TrainingJobTrigger

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_aip.hooks.job_client import JobClient

RESUMED = "previous"  # what ran an earlier job's trials, in the summary: not one of this task's rungs


@dataclass(frozen=True)
class LadderPlan:
    """Everything the ladder needs, validated before any side effect; ``rungs`` may be one (a resume)."""

    rungs: tuple[Rung, ...]
    requests: tuple[JobRequest, ...]
    base_id: str
    earlier: tuple[Earlier, ...] = ()


def plan_ladder(request: JobRequest, rungs: tuple[Rung, ...], base_id: str) -> LadderPlan:
    """The plan for a ladder (every rung's request checked now), or for one job when ``rungs`` is empty."""
    if rungs:
        return LadderPlan(rungs, ladder_requests(request, rungs), base_id)
    return LadderPlan((), (request,), base_id)


class LadderMixin:
    """What :class:`~airflow_aip.operators.training.SubmitTrainingJobOperator` runs with a ladder."""

    # Provided by the operator.
    if_exists: str
    wait_for_completion: bool
    deferrable: bool
    poll_interval: float
    wait_timeout: float | None
    stream_logs: bool
    cancel_on_kill: bool
    max_log_lines_per_minute: int
    log: Any
    job_api: Any
    _watched: tuple[str, str] | None

    def _cancel(self, name: str, project: str, reason: str) -> None: ...  # the operator's

    # -- the earlier job of a resumed study -------------------------------------------------

    def resumed_plan(self, plan: LadderPlan, resume_from: str) -> LadderPlan:
        """The plan with the earlier tuning job found, ended, and its trials counted."""
        field = "trainingInput.hyperparameters.resumePreviousJobId"
        hook = self._hook_in(plan.requests[0].region)
        previous: JobView | None
        if resume_from.startswith("projects/"):
            previous = hook.read(resume_from)
        else:
            previous = hook.find_job(resume_from, TUNING_KIND)
        if previous is None:
            raise ValidationError(
                field, f"no Vertex AI tuning job {resume_from!r} in {plan.requests[0].region}"
            )
        if not JobState.parse(previous.get("state")).is_terminal:
            raise ValidationError(
                field, f"{resume_from} is {previous.get('state')}; resume a job that has ended"
            )
        earlier = ((RESUMED, previous),)
        if plan.rungs:
            return replace(plan, earlier=earlier)
        views = [previous]
        resumed = replace(plan.requests[0], body=continue_study(plan.requests[0].body, views, "resumed"))
        return replace(plan, requests=(resumed,), earlier=earlier)

    # -- hooks of any region ----------------------------------------------------------------

    def _hook_in(self, region: str | None, **retry: Any) -> JobClient:
        """The job hook of ``region`` (the task's own when None), built once per region."""
        hooks: dict[tuple[str | None, tuple[Any, ...]], JobClient] = self.__dict__.setdefault(
            "_ladder_hooks", {}
        )
        key = (region, tuple(sorted(retry.items())))
        if key not in hooks:
            api = self.job_api if not region else replace(self.job_api, region=region)
            hooks[key] = api.job_hook(**retry)
        return hooks[key]

    # -- running ----------------------------------------------------------------------------

    def run_ladder(self, context: Context, plan: LadderPlan) -> dict[str, Any]:
        """Climb, wait, and climb again on capacity, until a rung's job ends for another reason."""
        while True:
            position = self._climb(plan)
            job, rung, request = self._reached(plan, position)
            self._announce(context, job, rung)
            if not self.wait_for_completion:
                self._watched = None
                return self._with_ladder(summarize_job(job), plan, position)
            end_time = time.time() + self.wait_timeout if self.wait_timeout else None
            if self.deferrable and not JobState.parse(job.get("state")).is_terminal:
                self._defer_rung(job, rung, request, end_time)
            event = SyncWait(
                self._hook_in(request.region, retry_attempts=1),
                self.job_api.logs_hook() if self.stream_logs else None,
                str(job["job_id"]),
                str(job["project_id"]),
                job_name=str(job["name"]),
                poll_interval=self.poll_interval,
                deadline=end_time,
                log=self.log,
                stream_for=self._log_stream if self.stream_logs else None,
                queued_limit=rung.queued_limit if plan.rungs else None,
            ).run(job)
            if not self._climbs(event, rung, request.region, plan):
                return self.finish_ladder(event, plan, position)

    def ladder_complete(self, event: dict[str, Any], context: Context, plan: LadderPlan) -> dict[str, Any]:
        """Resumed from the trigger: climb on a capacity ending, else finish with the ladder's summary."""
        name = str(event.get("job_name") or "")
        region = self.job_api.addressing(name).region if name else None
        if self._climbs(event, None, region, plan):
            return self.run_ladder(context, plan)
        return self.finish_ladder(event, plan, self._climb(plan, create=False))

    def finish_ladder(self, event: dict[str, Any], plan: LadderPlan, position: Position) -> dict[str, Any]:
        """The summary with the ladder; giving up (``wait_timeout``) cancels the rung's job, as ever."""
        if event.get("status") == "timeout" and self.cancel_on_kill and event.get("job_name"):
            name = str(event["job_name"])
            self._cancel(name, str(event.get("project_id")), reason=str(event.get("status")))
        self._watched = None
        record_ending(event, self.log)
        return self._with_ladder(finished(event, self.log), plan, position)

    # -- helpers ----------------------------------------------------------------------------

    def _log_stream(self, seen: Mapping[str, Any]) -> LogStream:
        """Each rung's job's log lines in the task log, as without a ladder (within the budget)."""
        return LogStream.for_job(
            str(seen["log_id"]), seen.get("create_time"), lines_per_minute=self.max_log_lines_per_minute
        )

    def _climb(self, plan: LadderPlan, *, create: bool = True) -> Position:
        if not plan.rungs:  # a resumed study without a ladder: one job, created as any job is
            request = plan.requests[0]
            hook = self._hook_in(request.region)
            job: JobView | None
            if create:
                job = submit_job(
                    hook, request, lambda n: with_attempt(plan.base_id, n), self.if_exists, self.log
                )
            else:
                job = hook.find_job(plan.base_id, request.kind)
            return Position(0, job, earlier=list(plan.earlier))
        return climb(
            self._hook_in,
            plan.requests,
            plan.rungs,
            plan.base_id,
            if_exists=self.if_exists,
            log=self.log,
            create=create,
            earlier=plan.earlier,
        )

    def _reached(self, plan: LadderPlan, position: Position) -> tuple[dict[str, Any], Rung, JobRequest]:
        if position.job is None:
            raise CapacityExhaustedError(position.records)
        rungs = plan.rungs or (Rung(label="job"),)
        return position.job, rungs[position.index], plan.requests[position.index]

    def _announce(self, context: Context, job: dict[str, Any], rung: Rung) -> None:
        summary = summarize_job(job)
        context["ti"].xcom_push(key=JOB_ID_XCOM_KEY, value=summary["job_id"])
        name = str(job["name"])  # each rung's job, in its own region: the UI's live tab reads it
        api = self.job_api.for_job(name, job["project_id"])
        context["ti"].xcom_push(key=JOB_API_XCOM_KEY, value=api)
        context["ti"].xcom_push(key=CONSOLE_URL_XCOM_KEY, value=summary["console_url"])
        self._watched = (str(job["name"]), str(job["project_id"]))
        self.log.info(
            "Training job %s on rung %s: %s", summary["job_id"], rung.describe(), summary["console_url"]
        )

    def _defer_rung(
        self, job: dict[str, Any], rung: Rung, request: JobRequest, end_time: float | None
    ) -> None:
        cast(Any, self).defer(  # BaseOperator's
            trigger=TrainingJobTrigger.for_task(
                self,
                job_id=str(job["job_id"]),
                job_name=str(job["name"]),
                project_id=str(job["project_id"]),
                poll_interval=self.poll_interval,
                end_time=end_time,
                masked_values=masked_values_in(request.body),
                region=request.region,
                queued_limit=rung.queued_limit,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.wait_timeout + DEFERRAL_TIMEOUT_MARGIN)
            if self.wait_timeout
            else None,
        )

    def _climbs(self, event: dict[str, Any], rung: Rung | None, region: str | None, plan: LadderPlan) -> bool:
        """Whether the wait ended for capacity (the ladder's next rung), cancelling a job QUEUED too long.

        ``rung``: the job's, or None to read it off the job's ``aip_rung`` label (after a deferral).
        """
        if not plan.rungs or event.get("status") not in ("queued", "failed", "cancelled"):
            return False
        hook, name = self._hook_in(region), str(event.get("job_name"))
        if event.get("status") == "queued":
            self.log.warning("%s: cancelling it and trying the next rung", event.get("message"))
            hook.cancel(name)
            for _ in range(30):  # until the cancel shows: a rescan must not adopt it still QUEUED
                if JobState.parse(hook.read(name).get("state")) is not JobState.QUEUED:
                    break
                time.sleep(min(self.poll_interval, 2.0))
            return True
        job = hook.read(name)
        if rung is None:
            label = (job.get("labels") or {}).get(RUNG_LABEL)
            rung = next((each for each in plan.rungs if each.label == label), plan.rungs[0])
        return rung_ending(job, rung, time.time()) is not None

    def _with_ladder(self, summary: dict[str, Any], plan: LadderPlan, position: Position) -> dict[str, Any]:
        rungs = plan.rungs or (Rung(label="job"),)
        records = list(position.records)
        if plan.rungs and position.index < len(rungs):
            records.append(rung_record(position.index, rungs[position.index], summary, None, time.time()))
        label = rungs[min(position.index, len(rungs) - 1)].label if plan.rungs else ""  # no rung: ""
        return with_ladder(summary, records if plan.rungs else [], position.earlier, label)

"""The submit operator's one execution path: a :class:`SubmitPlan`, run by a :class:`SubmitRun`.

Every submit runs a :class:`SubmitPlan`: the job's request alone (a plain job: no rungs), or one
per rung of a capacity ladder (``placement=[...]``), or a tuning job resuming an earlier one
(``resumePreviousJobId``). Each pass: create the job once (a plain job as any job is, a ladder's
by climbing, :mod:`.climbing`: find the rung reached, create its job once), announce the job and
wait on it in the worker or deferred (:class:`~.watching.TaskWatch`; the trigger carries the
rung's region and ``queued_limit``), then, on a ladder, decide on what ended the wait:

- QUEUED past the rung's ``queued_limit``: give the rung up (cancel its job and wait until the
  cancel shows, :meth:`~.watching.TaskWatch.cancel_and_wait`) and climb;
- FAILED for capacity (:func:`airflow_aip.jobs.vertex.capacity.rung_ending`): climb;
- anything else ends the task as it would without a ladder: a trainer's failure fails it.

With a ladder, the summary in XCom gains ``ladder`` (each rung: job, outcome, why it ended,
waited and ran seconds) and, for a study over several jobs, every trial with the job and rung
that ran it, and the best over all of them. A plain job's summary is the job's, as it is.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from airflow_aip.exceptions import CapacityExhaustedError, ValidationError
from airflow_aip.jobs import JobState, Tries, check_if_exists, summarize_job
from airflow_aip.jobs.cost import Estimate, total
from airflow_aip.jobs.ids import with_attempt
from airflow_aip.jobs.pricing import PriceTable
from airflow_aip.jobs.request import JobRequest
from airflow_aip.jobs.vertex.capacity import rung_ending
from airflow_aip.jobs.vertex.ladder import RUNG_LABEL, Rung
from airflow_aip.jobs.vertex.ladder_trials import (
    Earlier,
    continue_study,
    every_rung,
    rung_record,
    with_ladder,
)
from airflow_aip.jobs.vertex.view import TUNING_KIND
from airflow_aip.jobs.view import JobView
from airflow_aip.links import LADDER_XCOM_KEY
from airflow_aip.masking import masked_values_in
from airflow_aip.operators.climbing import Afford, HookFor, Position, climb
from airflow_aip.operators.spending import check_before_submit, run_jobs, spent, unaffordable
from airflow_aip.operators.submission import submit_job

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_aip.operators.watching import TaskWatch, WaitPolicy

RESUMED = "previous"  # what ran an earlier job's trials, in the summary: not one of this task's rungs


@dataclass(frozen=True)
class SubmitPlan:
    """Everything a submit runs, validated before any side effect.

    ``rungs``: a capacity ladder's (empty for a plain job); ``requests``: each rung's request, or
    the job's alone; ``base_id``: attempt 1's job ID; ``earlier``: jobs before this task whose
    trials count (a resumed study). Adoption, when the job ID is taken: ``if_exists`` (checked
    here), and ``tries``, this try in Airflow's record (a retry adopts, a clear trains anew:
    :class:`~airflow_aip.jobs.adoption.Tries`), None to adopt as a retry always.
    """

    rungs: tuple[Rung, ...]
    requests: tuple[JobRequest, ...]
    base_id: str
    earlier: tuple[Earlier, ...] = ()
    tries: Tries | None = None
    if_exists: str = "adopt"

    def __post_init__(self) -> None:
        check_if_exists(self.if_exists)

    @property
    def plain(self) -> bool:
        """One job, resuming nothing: its summary is the job's own."""
        return not self.rungs and not self.earlier

    def rung(self, index: int) -> Rung | None:
        """The ladder's rung ``index``; None for a plain job, which has no ladder."""
        return self.rungs[index] if self.rungs else None


class SubmitRun:
    """Runs a plan: ``hook_for`` builds the job hook of a region, ``policy`` says how to wait,
    ``watch`` announces, defers, waits and ends each job's wait."""

    def __init__(self, plan: SubmitPlan, hook_for: HookFor, policy: WaitPolicy, watch: TaskWatch) -> None:
        self.plan = plan
        self.hook_for = hook_for
        self.policy = policy
        self.watch = watch
        self.log = watch.log
        self.told: set[str] = set()  # the rungs passed whose climb this task has logged
        self.table = PriceTable.load()

    # -- the earlier job of a resumed study -------------------------------------------------

    def resume(self) -> None:
        """Find the earlier tuning job the plan's study resumes, check it ended, count its trials."""
        plan, resume_from = self.plan, self.plan.requests[0].resume_from
        if not resume_from:
            return
        field = "trainingInput.hyperparameters.resumePreviousJobId"
        hook = self.hook_for(plan.requests[0].region)
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
            self.plan = replace(plan, earlier=earlier)
            return
        resumed = replace(plan.requests[0], body=continue_study(plan.requests[0].body, [previous], "resumed"))
        self.plan = replace(plan, requests=(resumed,), earlier=earlier)

    # -- running ----------------------------------------------------------------------------

    def run(self, context: Context) -> dict[str, Any]:
        """Climb, wait, and climb again on capacity, until a rung's job ends for another reason."""
        while True:
            position = self._climb()
            if position.job is None:
                raise CapacityExhaustedError(position.records)
            job, index = position.job, position.index
            rung, request = self.plan.rung(index), self.plan.requests[index]
            self._announce(context, job, rung, position)
            if not self.policy.wait_for_completion:
                self.watch.watched = None
                return self._summary(summarize_job(job), position)
            event = self._wait(job, rung, request)
            if not self._rung_given_up(event, rung, request.region):
                return self._summary(self.watch.finish(event), position)

    def _wait(self, job: JobView, rung: Rung | None, request: JobRequest) -> dict[str, Any]:
        """Wait on a rung's job: here, or deferred (raises TaskDeferred) if it still runs after
        ``defer_after`` seconds waited here first.

        A job that ends sooner (a short job, a stockout, a trainer crashing at import) ends here,
        through the same steps as ``execute_complete``, and never waits out the trigger's
        ``[aip] deferral_hold``.
        """
        queued_limit = rung.queued_limit if rung is not None else None
        job_id, name, project = str(job["job_id"]), str(job["name"]), str(job["project_id"])
        spent_before = self._spent_before(name)
        hook = self.hook_for(request.region, retry_attempts=1)
        wait = partial(
            self.watch.wait,
            hook,
            job_id,
            name,
            project,
            deadline=self.watch.deadline(),
            queued_limit=queued_limit,
            spent_before=spent_before,
        )
        if not self.policy.deferrable:
            return wait().run(job)
        # Its log lines only if it ends here: the trigger reads them from the start, within its quota.
        ended = wait(follow_while_running=False).run_for(self.policy.defer_after)
        if ended is not None:
            return ended
        if self.policy.defer_after:
            self.log.info(
                "Job %s still runs after defer_after (%g s): deferring.", job_id, self.policy.defer_after
            )
        self.watch.defer(
            job_id=job_id,
            job_name=name,
            project_id=project,
            masked_values=masked_values_in(request.body),
            region=request.region,
            queued_limit=queued_limit,
            spent_before=spent_before,
        )

    def complete(self, event: dict[str, Any], context: Context) -> dict[str, Any]:
        """Resumed from the trigger: climb on a capacity ending, else end the wait as it ended."""
        if self.plan.rungs:
            name = str(event.get("job_name") or "")
            region = self.watch.api.addressing(name).region if name else None
            if self._rung_given_up(event, None, region):
                return self.run(context)
        position = Position(0, None) if self.plan.plain else self._climb(create=False)
        return self._summary(self.watch.finish(event), position)

    # -- helpers ----------------------------------------------------------------------------

    def _run_jobs(self) -> list[JobView]:
        plan = self.plan
        return run_jobs(self.hook_for, plan.requests, plan.rungs, plan.base_id)

    def _spent_before(self, name: str) -> float:
        """What this run's other jobs (earlier tries, passed rungs) spent: it counts against the budget."""
        if self.policy.budget is None:
            return 0.0
        return spent(self._run_jobs(), self.table, self.log, but=name)

    def _budget_checks(self, create: bool) -> Afford | None:
        """Before a create: the worst case against what is left (logged, or refused with
        ``refuse_over_budget``); for a ladder, the rungs it cannot afford (None: no budget)."""
        budget, plan = self.policy.budget, self.plan
        if budget is None:
            return None
        jobs = self._run_jobs()
        refuse = self.policy.refuse_over_budget
        if create and (not plan.rungs or not jobs):
            what = "ladder's first rung" if plan.rungs else "job"
            check_before_submit(
                plan.requests[0], jobs, budget, self.table, self.log, refuse=refuse, what=what
            )
        left = budget.amount - spent(jobs, self.table, self.log)
        return lambda index, request: unaffordable(request, left, self.table)

    def _climb(self, *, create: bool = True) -> Position:
        plan = self.plan
        afford = self._budget_checks(create)
        if not plan.rungs:  # one job, created as any job is
            request = plan.requests[0]
            hook = self.hook_for(request.region)
            job: JobView | None
            if create:
                ids = lambda n: with_attempt(plan.base_id, n)  # noqa: E731
                job = submit_job(hook, request, ids, plan.if_exists, self.log, plan.tries)
            else:
                job = hook.find_job(plan.base_id, request.kind)
            return Position(0, job, earlier=list(plan.earlier))
        return climb(
            self.hook_for,
            plan.requests,
            plan.rungs,
            plan.base_id,
            if_exists=plan.if_exists,
            log=self.log,
            told=self.told,
            create=create,
            earlier=plan.earlier,
            tries=plan.tries,
            afford=afford,
        )

    def _announce(self, context: Context, job: JobView, rung: Rung | None, position: Position) -> None:
        """Push the job's address and, on a ladder, every rung's part so far: the UI shows the rung a
        running job is on ("rung 1 of 2 · SPOT") before the task has a summary."""
        summary = summarize_job(job)
        name, project = str(job["name"]), str(job["project_id"])
        self.watch.announce(context, str(summary["job_id"]), name, project, summary["console_url"])
        if rung is not None:
            current = rung_record(position.index, rung, summary, None, time.time())
            ladder = every_rung(self.plan.rungs, position.records, current, ended=False)
            context["ti"].xcom_push(key=LADDER_XCOM_KEY, value=ladder)
        where = f"on rung {rung.describe()}" if rung is not None else f"({name})"
        self.log.info("Training job %s %s: %s", summary["job_id"], where, summary["console_url"])

    def _rung_given_up(self, event: dict[str, Any], rung: Rung | None, region: str | None) -> bool:
        """Whether the wait ended the ladder's rung, so the run climbs to the next: a job QUEUED past
        the rung's limit (given up here: cancelled, and waited for until the cancel shows, so the
        rescan of the next climb does not adopt it still QUEUED), or one that FAILED for capacity.

        ``rung``: the job's, or None to read it off the job's ``aip_rung`` label (after a deferral).
        """
        rungs = self.plan.rungs
        if not rungs or event.get("status") not in ("queued", "failed", "cancelled"):
            return False
        name = str(event.get("job_name"))
        if event.get("status") == "queued":
            self.log.info("%s: cancelling it", event.get("message"))  # the climb's WARNING follows
            job_id, project = str(event.get("job_id")), str(event.get("project_id"))
            self.watch.cancel_and_wait(job_id, name, project, region=region)
            return True
        job = self.hook_for(region).read(name)
        if rung is None:
            label = (job.get("labels") or {}).get(RUNG_LABEL)
            rung = next((each for each in rungs if each.label == label), rungs[0])
        return rung_ending(job, rung, time.time()) is not None

    def _summary(self, summary: dict[str, Any], position: Position) -> dict[str, Any]:
        """The summary with the ladder's records and the trials of earlier jobs; a plain job's as it is."""
        plan = self.plan
        if plan.plain:
            return summary
        records: list[dict[str, Any]] = []
        if plan.rungs:
            current = None  # every rung passed for capacity: none was reached
            if position.index < len(plan.rungs):
                current = rung_record(position.index, plan.rungs[position.index], summary, None, time.time())
            records = every_rung(plan.rungs, position.records, current, ended=True)
        label = plan.rungs[min(position.index, len(plan.rungs) - 1)].label if plan.rungs else ""
        out = with_ladder(summary, records, position.earlier, label)
        if records:
            climb = total((Estimate.from_json(r["cost"]) for r in records if r.get("cost")), self.table)
            out["ladder_cost"] = climb.to_json()
            if self.log is not None:  # a unit test's run may have no task log
                self.log.info("Capacity ladder: all its rungs' jobs cost %s", climb.text())
        return out

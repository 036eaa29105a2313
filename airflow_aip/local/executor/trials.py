"""A hyperparameter tuning job: trials as separate processes, the search deciding what each tries.

Up to ``maxParallelTrials`` trials run at once and ``maxTrials`` in all (fewer if a grid has
fewer points). A trial gets its hyperparameters as ``--name=value`` arguments; its final
metric is the last value it reported for the job's metric tag (the best one when the spec says
``measurementSelection: BEST``, Vertex's BEST_MEASUREMENT), and every report is kept in
``allMetrics``. A Vertex tuning job's ``trialJobSpec.scheduling.timeout`` is each trial's own
limit (hyperparameter_tuning_job.proto: the spec "applies to the CustomJobs created in all the
trials"): a trial over it is stopped and fails, the job goes on. With
``enableTrialEarlyStopping`` each new intermediate report goes to the pruner, and a trial it
stops ends SUCCEEDED with ``isTrialStoppedEarly``. ``maxFailedTrials`` failed trials fail the
job. When it is unset (0) the service decides, as Google's does (AI Platform's "Handling failed
trials": "If the first trial of your job fails, AI Platform Training ends the job immediately";
after a first success, thresholds "subject to change"): the job fails as soon as trial 1 fails
while no trial has succeeded, and otherwise only if no trial succeeds. [U] unverified: that
Vertex AI keeps AI Platform's first-trial rule (hyperparameter_tuning_job.proto: "If set to 0,
Vertex AI decides how many Trials must fail before the whole job fails"). ``trainingOutput`` is
republished on every change, so a GET on a running job shows the trials so far.

The region's capacity (``gate``, :mod:`.provisioning`) meets each trial as it meets a CustomJob:
a stockout when a trial is about to start, or a SPOT trial reclaimed past the restart limit,
fails the job with the capacity failure (code 8) once the trials still running have ended; no
trial starts after it, and the ended trials stay as they are.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from airflow_aip.jobs import JobState, duration_seconds
from airflow_aip.jobs.trials import Goal
from airflow_aip.local.clock import rfc3339
from airflow_aip.local.executor.provisioning import Failure, Provisioning, SpotWatch
from airflow_aip.local.executor.runner import Attempt
from airflow_aip.local.executor.tuning import HyperparameterSearch, MetricReport, read_metric_reports
from airflow_aip.local.log_entries import JobLog

StartAttempt = Callable[[str, dict[str, str]], Attempt]


@dataclass
class _Running:
    trial: dict[str, Any]
    attempt: Attempt
    last: MetricReport | None = None
    best: MetricReport | None = None
    started: float = 0.0  # time.monotonic() at launch
    spot: SpotWatch | None = None


def _stamp(report: MetricReport) -> dict[str, str]:
    """When the trainer reported it (Vertex's ``Measurement.elapsedDuration`` counts to this)."""
    if not math.isfinite(report.timestamp):
        return {}
    return {"reportTime": rfc3339(datetime.fromtimestamp(report.timestamp, timezone.utc))}


def without_report_times(output: Mapping[str, Any]) -> dict[str, Any]:
    """``trainingOutput`` as AI Platform answered it: its HyperparameterMetric has no report time."""

    def metric(point: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in point.items() if k != "reportTime"}

    trials = []
    for trial in output.get("trials") or []:
        shown = dict(trial)
        if "finalMetric" in shown:
            shown["finalMetric"] = metric(shown["finalMetric"])
        if "allMetrics" in shown:
            shown["allMetrics"] = [metric(p) for p in shown["allMetrics"]]
        trials.append(shown)
    return dict(output, trials=trials) if trials else dict(output)


class TuningRun:
    """Drives one tuning job's trials to the end; ``run`` returns the job's final state."""

    def __init__(
        self,
        spec: Mapping[str, Any],
        tag: str,
        seed_text: str,
        start: StartAttempt,
        publish: Callable[[dict[str, Any]], None],
        track: Callable[[list[dict[str, int]]], None],
        log: JobLog,
        trial_limit: str | None = None,
        gate: Provisioning | None = None,
    ) -> None:
        self.search = HyperparameterSearch(spec, seed_text)
        self.trial_limit = trial_limit
        self.trial_seconds = float(duration_seconds(trial_limit)) if trial_limit else math.inf
        self.tag = tag
        # Vertex studies may name more metrics: the first is optimized, the others are recorded.
        self.other_tags: list[str] = list(spec.get("otherMetricTags") or [])
        self.parallel = int(spec.get("maxParallelTrials", 1))
        self.max_failed = int(spec.get("maxFailedTrials", 0))
        # Vertex's measurementSelectionType: the final measurement is the last report or the best.
        self.pick_best = spec.get("measurementSelection") == "BEST"
        self.goal = Goal.parse(spec.get("goal"))
        self._start, self._publish, self._track, self.log = start, publish, track, log
        self.trials: list[dict[str, Any]] = []
        self.running: dict[str, _Running] = {}
        self.failed = 0
        self.last_failure = ""
        self.gate = gate
        self.capacity_failure: Failure | None = None  # no trial starts once set
        self.error_fields: dict[str, Any] = {}  # the failed job's errorCode, for a capacity failure

    def output(self) -> dict[str, Any]:
        done = sum(1 for t in self.trials if t["state"] == JobState.SUCCEEDED.value)
        return {
            "isHyperparameterTuningJob": True,
            "hyperparameterMetricTag": self.tag,
            "completedTrialCount": str(done),
            "trials": [dict(t) for t in self.trials],
        }

    def _changed(self) -> None:
        self._publish(self.output())
        self._track([ref for r in self.running.values() for ref in r.attempt.refs()])

    def run(self, should_stop: Callable[[], bool], poll_interval: float) -> tuple[JobState, str]:
        self._changed()
        while True:
            if should_stop():
                self._stop_running("cancelled with the job")
                return JobState.CANCELLED, ""
            if (failed := self._too_many_failed()) is not None:
                self._stop_running("stopped: the job failed")
                return JobState.FAILED, failed
            while self._room():
                self._launch()
            if not self.running:
                break
            for trial_id, running in list(self.running.items()):
                self._check(trial_id, running)
            if self.running:
                time.sleep(poll_interval)
        if self.capacity_failure is not None:
            self.error_fields = self.capacity_failure[1]
            return JobState.FAILED, self.capacity_failure[0]
        if not any(t["state"] == JobState.SUCCEEDED.value for t in self.trials):
            return (
                JobState.FAILED,
                f"All {len(self.trials)} trial(s) failed. Last failure: {self.last_failure}",
            )
        return JobState.SUCCEEDED, ""

    def _too_many_failed(self) -> str | None:
        """Why the failed trials so far fail the job, or None while it goes on.

        A capacity failure wins: the job ends for it (code 8) once its running trials stop.
        """
        if self.capacity_failure is not None:
            return None
        if self.max_failed:
            if self.failed < self.max_failed:
                return None
            return (
                f"{self.failed} trial(s) failed, reaching maxFailedTrials ({self.max_failed}). "
                f"Last failure: {self.last_failure}"
            )
        # Unset: Google's first-trial rule. Trial 1 failed before any trial succeeded.
        if not self.trials or self.trials[0]["state"] != JobState.FAILED.value:
            return None
        if any(t["state"] == JobState.SUCCEEDED.value for t in self.trials):
            return None
        return (
            "The first trial failed, so the service ended the job (maxFailedTrials is unset: the service "
            f"decides). Last failure: {self.last_failure}"
        )

    def _room(self) -> bool:
        """Whether another trial may start now."""
        return (
            self.capacity_failure is None
            and len(self.running) < self.parallel
            and len(self.trials) < self.search.max_trials
        )

    def _launch(self) -> None:
        trial_id = str(len(self.trials) + 1)
        if self.gate is not None and (failure := self.gate.before_trial(trial_id)) is not None:
            self._capacity_lost(trial_id, failure, "not started")
            return
        hyperparameters = self.search.ask(trial_id)
        trial = {
            "trialId": trial_id,
            "hyperparameters": hyperparameters,
            "state": JobState.RUNNING.value,
            "startTime": rfc3339(),
            "isTrialStoppedEarly": False,
        }
        self.trials.append(trial)
        args = " ".join(f"--{k}={v}" for k, v in hyperparameters.items())
        self.log.service(f"Trial {trial_id} starting with {args}", trial=trial_id)
        try:
            attempt = self._start(trial_id, hyperparameters)
        except OSError as exc:
            self._end(trial, JobState.FAILED, None)
            self._fail(trial_id, f"could not start: {exc}")
            return
        spot = self.gate.spot_watch(self.log.job_id, trial_id) if self.gate is not None else None
        self.running[trial_id] = _Running(trial, attempt, started=time.monotonic(), spot=spot)
        self._changed()

    def _capacity_lost(self, trial_id: str, failure: Failure, what: str) -> None:
        self.capacity_failure = failure
        waiting = f"; the job fails once {len(self.running)} running trial(s) end" if self.running else ""
        self.log.service(f"Trial {trial_id} {what}: {failure[0]}{waiting}", "ERROR", trial_id)

    def _reclaimed(self, trial_id: str, running: _Running, spot: SpotWatch) -> None:
        """The trial's Spot VMs were reclaimed: it starts again, or fails the job past the limit."""
        running.attempt.stop()
        failure = spot.preempted(running.attempt.primary, len(running.attempt.processes))
        if failure is not None:
            self._stopped_failed(trial_id, running)
            return self._capacity_lost(trial_id, failure, "failed")
        try:
            running.attempt = self._start(trial_id, running.trial["hyperparameters"])
        except OSError as exc:
            self._stopped_failed(trial_id, running)
            return self._fail(trial_id, f"could not restart: {exc}")
        self._changed()

    def _new_reports(self, running: _Running) -> list[MetricReport]:
        reports = read_metric_reports(running.attempt.master_metric_file, self.tag)
        seen = running.last.timestamp if running.last else -math.inf
        return [r for r in reports if r.timestamp > seen]

    def _seen(self, running: _Running, report: MetricReport) -> None:
        """A new report: kept in ``allMetrics`` (Vertex's ``measurements``), the last and the best."""
        point = {"trainingStep": str(report.global_step), "objectiveValue": report.value, **_stamp(report)}
        running.trial.setdefault("allMetrics", []).append(point)
        running.last = report
        if running.best is None or self.goal.better(report.value, running.best.value):
            running.best = report

    def _final(self, running: _Running) -> MetricReport | None:
        return running.best if self.pick_best else running.last

    def _check(self, trial_id: str, running: _Running) -> None:
        reports = self._new_reports(running)
        for report in reports:
            self._seen(running, report)
            if self.search.report(trial_id, report.value):
                running.attempt.stop()
                del self.running[trial_id]
                self.log.service(
                    f"Trial {trial_id} stopped early at objective {report.value}", trial=trial_id
                )
                self._end(running.trial, JobState.SUCCEEDED, report, stopped_early=True)
                self.search.tell(trial_id, report.value, stopped_early=True)
                return
        if reports:  # a GET shows the trial's measurements as they come
            self._changed()
        if running.spot is not None and running.spot.due():
            return self._reclaimed(trial_id, running, running.spot)
        outcome = running.attempt.poll()
        if outcome is None:
            if time.monotonic() - running.started >= self.trial_seconds:
                self._time_out(trial_id, running)
            return
        del self.running[trial_id]
        self._say(trial_id, outcome.notes)
        for report in self._new_reports(running):
            self._seen(running, report)
        final = self._final(running)
        self._record_other_metrics(running)
        if not outcome.succeeded:
            self._end(running.trial, JobState.FAILED, final)
            self.search.tell(trial_id, None)
            self._fail(trial_id, outcome.error_message())
            return
        self._end(running.trial, JobState.SUCCEEDED, final)
        if final is None:
            self.log.service(f"Trial {trial_id} reported no metric tagged {self.tag!r}", "WARNING", trial_id)
            self.search.tell(trial_id, None)
        else:
            self.log.service(f"Trial {trial_id} finished with objective {final.value}", trial=trial_id)
            self.search.tell(trial_id, final.value)

    def _say(self, trial_id: str, notes: tuple[str, ...]) -> None:
        """The trial's ended replicas' lines (each one's peak memory against its machine's)."""
        for note in notes:
            self.log.service(note, trial=trial_id)

    def _stopped_failed(self, trial_id: str, running: _Running) -> None:
        """A trial the service stopped ends FAILED with what it reported so far."""
        running.attempt.stop()
        del self.running[trial_id]
        self._record_other_metrics(running)
        self._end(running.trial, JobState.FAILED, self._final(running))
        self.search.tell(trial_id, None)

    def _time_out(self, trial_id: str, running: _Running) -> None:
        self._stopped_failed(trial_id, running)
        self._fail(
            trial_id,
            f"its CustomJob ran longer than trialJobSpec.scheduling.timeout ({self.trial_limit}) "
            "and was stopped by the service.",
        )

    def _record_other_metrics(self, running: _Running) -> None:
        others = {}
        for tag in self.other_tags:
            reports = read_metric_reports(running.attempt.master_metric_file, tag)
            if reports:
                others[tag] = reports[-1].value
        if others:
            running.trial["otherMetrics"] = others

    def _end(
        self, trial: dict[str, Any], state: JobState, last: MetricReport | None, stopped_early: bool = False
    ) -> None:
        trial.update(state=state.value, endTime=rfc3339(), isTrialStoppedEarly=stopped_early)
        if last is not None:
            trial["finalMetric"] = {
                "trainingStep": str(last.global_step),
                "objectiveValue": last.value,
                **_stamp(last),
            }
        self._changed()

    def _fail(self, trial_id: str, message: str) -> None:
        self.failed += 1
        self.last_failure = f"trial {trial_id}: {message}"
        self.log.service(f"Trial {trial_id} failed: {message}", "ERROR", trial_id)

    def _stop_running(self, why: str) -> None:
        for trial_id, running in list(self.running.items()):
            running.attempt.stop()
            self.log.service(f"Trial {trial_id} {why}", "WARNING", trial_id)
            self._end(running.trial, JobState.CANCELLED, running.last)
        self.running.clear()
        self._changed()

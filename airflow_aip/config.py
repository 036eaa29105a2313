"""The ``[aip]`` options: each defined once, read by one typed getter.

The provider info that Airflow shows (:func:`airflow_aip.get_provider_info`) and every operator's
and sensor's signature default come from :data:`OPTIONS`, so a default cannot say one thing in
``airflow config list`` and do another in a task. The getters only read Airflow's configuration
(no I/O beyond it), so signatures may call them at DAG parse; this module imports nothing at
module level, as the providers manager imports it on every process start.

The region rule, the same everywhere: an argument wins; the submit operator then takes
``trainingInput.region`` from the job's config file; else ``[aip] region``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Option:
    """One ``[aip]`` option as the provider info declares it."""

    default: str
    type: str
    version_added: str
    description: str

    def described(self) -> dict[str, Any]:
        return {
            "description": self.description,
            "version_added": self.version_added,
            "type": self.type,
            "example": self.default,
            "default": self.default,
        }


# Airflow's executor-event race that ``deferral_hold`` works around: the triggers and the UI name it.
DEFERRAL_RACE = "apache/airflow#67287"

OPTIONS: dict[str, Option] = {
    "backend": Option(
        "vertex",
        "string",
        "0.2.0",
        "The job API the operators use: vertex (Vertex AI custom training) or ai_platform (the ml v1 "
        "API, which Google shut down on 2025-01-31; for the local service or a compatible endpoint).",
    ),
    "region": Option(
        "us-central1",
        "string",
        "0.2.0",
        "The Vertex AI location of every operator and sensor that is given none: the submit operator "
        "first takes its config file's trainingInput.region; a resource name carries its own.",
    ),
    "poll_interval": Option("30", "integer", "0.1.0", "Seconds between job state polls while waiting."),
    "max_log_lines_per_minute": Option(
        "1000",
        "integer",
        "0.1.0",
        "Training-job log lines copied into the task log per minute while waiting (stream_logs); "
        "beyond it, one line says how many were dropped.",
    ),
    "log_reads_per_minute": Option(
        "30",  # half the quota: workers, other triggerers and people's tools read too
        "integer",
        "0.3.0",
        "Cloud Logging entries.list calls a triggerer makes per minute and per project, for every "
        "deferred wait's log lines together (one shared read per round). Cloud Logging allows 60 a "
        "minute per project: the default leaves half for workers, other triggerers and people's own "
        "tools.",
    ),
    "deferral_hold": Option(
        "12",
        "integer",
        "0.3.0",
        "Seconds after a task defers before its trigger may fire. A trigger that fires sooner can meet "
        "Airflow's executor-event race (apache/airflow#67287: the worker's late SUCCESS for the deferring "
        "try fails the task, with no log line of ours). A job that ends later than this costs nothing; "
        "one that ends sooner reports its end this many seconds after the deferral. 0 turns the hold off. "
        "Tasks run in-process (dag.test) never hold: there is no executor.",
    ),
    "defer_after": Option(
        "12",
        "integer",
        "0.4.0",
        "Seconds a deferrable submit first waits for its job in the worker (reading it 1, 2, 4, 8 s... "
        "after the create), before it defers. A job that ends sooner ends its task there: no deferral, so "
        "no deferral_hold either. The default matches deferral_hold: a job ending within it would report "
        "no sooner deferred. 0 defers at once.",
    ),
}


def _get(option: str) -> str:
    from airflow.configuration import conf

    return str(conf.get("aip", option, fallback=OPTIONS[option].default))


def _get_int(option: str) -> int:
    from airflow.configuration import conf

    return conf.getint("aip", option, fallback=int(OPTIONS[option].default))


def backend() -> str:
    """``[aip] backend``: ``vertex`` or ``ai_platform``."""
    return _get("backend")


def region() -> str:
    """``[aip] region``: the Vertex AI location used when a task names none."""
    return _get("region")


def poll_interval() -> int:
    """``[aip] poll_interval``: seconds between job state polls."""
    return _get_int("poll_interval")


def max_log_lines_per_minute() -> int:
    """``[aip] max_log_lines_per_minute``: job log lines relayed per minute while waiting."""
    return _get_int("max_log_lines_per_minute")


def log_reads_per_minute() -> int:
    """``[aip] log_reads_per_minute``: per triggerer process and per project, at least 1."""
    return max(1, _get_int("log_reads_per_minute"))


def deferral_hold() -> float:
    """``[aip] deferral_hold``: seconds a trigger holds an early event after its deferral, at least 0."""
    return float(max(0, _get_int("deferral_hold")))


def defer_after() -> float:
    """``[aip] defer_after``: seconds a deferrable submit waits in the worker before deferring, at least 0."""
    return float(max(0, _get_int("defer_after")))


def default_deferrable() -> bool:
    """Airflow's own ``[operators] default_deferrable``, which our operators and sensors follow."""
    from airflow.configuration import conf

    return conf.getboolean("operators", "default_deferrable", fallback=False)

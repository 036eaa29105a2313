"""The neutral job states (ml v1's names, plus Vertex AI's PAUSED and EXPIRED), and which end a job.

Waiting code decides with these properties only: a string comparison scattered over
operators, sensors and triggers lets a FAILED job be reported as success. Each backend maps
its wire states here explicitly (Vertex: :mod:`airflow_aip.jobs.vertex.view`). PAUSED and
EXPIRED end a wait and are not success: Google's SDK and Airflow's Vertex triggers count PAUSED as complete,
and the Google provider reports it as success; we do not (a paused job trained nothing yet).
"""

from __future__ import annotations

from enum import Enum


class JobState(str, Enum):
    """``Job.state`` of the ml v1 API (also used for hyperparameter trials)."""

    STATE_UNSPECIFIED = "STATE_UNSPECIFIED"
    QUEUED = "QUEUED"
    PREPARING = "PREPARING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLING = "CANCELLING"
    CANCELLED = "CANCELLED"
    PAUSED = "PAUSED"  # Vertex AI: "stopped, and can be resumed"
    EXPIRED = "EXPIRED"  # Vertex AI

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, value: object) -> JobState:
        """The state named by an API answer; absent or unknown states read as STATE_UNSPECIFIED.

        An unknown state keeps a waiter waiting rather than crashing it: the API may grow states.
        """
        if isinstance(value, JobState):
            return value
        try:
            return cls(str(value)) if value is not None else cls.STATE_UNSPECIFIED
        except ValueError:
            return cls.STATE_UNSPECIFIED

    @property
    def is_terminal(self) -> bool:
        """The job will never change state again (CANCELLING is not terminal)."""
        return self in TERMINAL_STATES

    @property
    def is_success(self) -> bool:
        """Only SUCCEEDED is success."""
        return self is JobState.SUCCEEDED

    @property
    def is_failure(self) -> bool:
        """Ended without success: FAILED, CANCELLED, PAUSED or EXPIRED."""
        return self in TERMINAL_STATES and self is not JobState.SUCCEEDED


TERMINAL_STATES: frozenset[JobState] = frozenset(
    {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.PAUSED, JobState.EXPIRED}
)

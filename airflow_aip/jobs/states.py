"""Job states as the ml v1 API spells them, and which of them end a job.

Waiting code decides with these properties only: a string comparison scattered over
operators, sensors and triggers is how FAILED jobs once got reported as success.
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
        """Ended without success: FAILED or CANCELLED."""
        return self in (JobState.FAILED, JobState.CANCELLED)


TERMINAL_STATES: frozenset[JobState] = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})

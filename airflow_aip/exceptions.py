"""One hierarchy of typed errors.

Every error a user can cause names the field it is about and the rule it broke, so a
failing task log says what to fix without reading our code.
"""

from __future__ import annotations


class AipError(Exception):
    """Base of every airflow_aip error."""


class ValidationError(AipError, ValueError):
    """Bad input, raised before any side effect (nothing staged, nothing created)."""

    def __init__(self, field: str, rule: str) -> None:
        self.field = field
        self.rule = rule
        super().__init__(f"{field}: {rule}")


class PackagingError(AipError):
    """The trainer package could not be built."""


class StagingError(AipError):
    """A package could not be staged to Cloud Storage, or what landed is not what was sent."""


class ApiError(AipError):
    """The ml v1 API (or the local service) answered with an error."""

    def __init__(self, status: int, message: str, *, method: str = "") -> None:
        self.status = status
        self.message = message
        self.method = method
        where = f"{method}: " if method else ""
        super().__init__(f"{where}HTTP {status}: {message}")


class JobNotFoundError(ApiError):
    """404: no job with that id."""


class JobAlreadyExistsError(ApiError):
    """409: a job with that id exists already.

    ``first_sent`` is set (a UNIX time) when the 409 answered a re-send of a create whose first
    send went out at that time: the existing job may then be this very call's, applied by an
    attempt whose answer was lost. It is None when the first send already met the 409. Whether
    the job is ours is the model's decision (``airflow_aip.jobs.adoption``), not the hook's.
    """

    def __init__(
        self, status: int, message: str, *, method: str = "", first_sent: float | None = None
    ) -> None:
        super().__init__(status, message, method=method)
        self.first_sent = first_sent


class CapacityRefusedError(ApiError):
    """429 at create for a resource quota (not the request rate): nothing was created.

    ``metrics`` is what Google named. Retrying soon would meet the same quota; a capacity
    ladder tries its next rung instead.
    """

    def __init__(self, status: int, message: str, *, method: str = "", metrics: str = "") -> None:
        super().__init__(status, message, method=method)
        self.metrics = metrics


class PermissionRefusedError(ApiError):
    """Google refused for want of a grant or an enabled API (a 403, or the service agent's precondition).

    ``advice`` is the one line that says what to grant (``airflow_aip.jobs.permissions``); it is the
    error's text, and Google's own answer stays in ``message``. Never retried: nothing changes
    until someone grants something.
    """

    def __init__(self, status: int, message: str, *, method: str = "", advice: str) -> None:
        super().__init__(status, message, method=method)
        self.advice = advice
        self.args = (advice,)

    def __str__(self) -> str:
        return self.advice


class CapacityExhaustedError(AipError):
    """Every rung of a capacity ladder ended for capacity; ``rungs`` is what each one met."""

    def __init__(self, rungs: list[dict[str, object]]) -> None:
        self.rungs = rungs
        met = "; ".join(f"{r.get('label')}: {r.get('ended_because') or r.get('state')}" for r in rungs)
        super().__init__(f"No rung of the capacity ladder got machines ({met})")


class JobFailedError(AipError):
    """A training job ended FAILED or CANCELLED; the message is the job's errorMessage."""

    def __init__(self, job_id: str, state: str, error_message: str) -> None:
        self.job_id = job_id
        self.state = state
        self.error_message = error_message
        super().__init__(f"Training job {job_id} ended {state}: {error_message or '(no errorMessage)'}")


class BudgetExceededError(AipError):
    """A task's job (or ladder) passed its budget, or would have: the line says the estimate,
    the budget and the price table's date."""


class JobSpecMismatchError(AipError):
    """An existing job of this task instance, with the requested id, has another spec (input or labels)."""

    def __init__(self, job_id: str, differing_fields: list[str]) -> None:
        self.job_id = job_id
        self.differing_fields = differing_fields
        super().__init__(
            f"Job {job_id} already exists with a different spec; differing fields: "
            + ", ".join(differing_fields)
        )


class StorageError(AipError):
    """A Cloud Storage request failed; the message has the URI, HTTP status and reason, never credentials."""


class PreconditionFailedError(StorageError):
    """A Cloud Storage write's generation precondition failed: another writer changed the object first."""

    def __init__(self, uri: str, message: str = "") -> None:
        self.uri = uri
        super().__init__(f"{uri}: generation precondition failed{': ' + message if message else ''}")


class JobWaitTimeoutError(AipError):
    """Waiting for a training job passed its deadline while the job was still not finished."""

    def __init__(self, job_id: str, state: str, waited_seconds: float | None = None) -> None:
        self.job_id = job_id
        self.state = state
        self.waited_seconds = waited_seconds
        waited = f" after {waited_seconds:.0f}s" if waited_seconds is not None else ""
        super().__init__(f"Stopped waiting for training job {job_id}{waited}; it was still {state}")


class ImageBuildError(AipError):
    """A trainer image could not be built or pushed: the engine's own words, its last lines, follow."""

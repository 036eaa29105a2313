"""Is an existing job with our ID ours to wait on? The one rule, pure.

Every try of a task instance asks for the same job ID (:mod:`.ids`), so a create meets a 409
whenever an earlier try got that far, and also when this very create was applied but its
answer was lost and the hook sent it again. Who made the existing job decides:

- **this call**: the 409 answered a re-send (``first_sent`` is set), the job has our spec and
  labels, and it was created no earlier than the first send, less :data:`CLOCK_SKEW` (how far
  the API's clock may run behind ours). It is the job this call made: always adopted.
- **an earlier try** of this task instance: its owner labels (dag id, task id, run id, map
  index) are ours.
- **a try before a clear**: an earlier try's job whose try label is older than the first try
  since the task instance was last cleared (:class:`Tries`). A retry resumes a run; a clear
  asks for a new one. So such a job is adopted while it runs (the clear meets it still
  training), and once it has ended, SUCCEEDED included, the clear trains anew under the next
  attempt ID. ``if_exists="always_adopt"`` treats it as any earlier try's.
- **someone else**: another run's job (or another task's, or one no Airflow task labelled).
  IDs carry a hash of the run, so this happens when ``job_id`` is pinned or templated without
  the run. Never adopted: waiting on it would report another run's training as this run's.
  Under ``adopt`` the next attempt ID is tried rather than failing, because this run's own
  training has not happened yet and a fresh job is what it needs.

The decision, for each ``if_exists``:

====================================================  ==========  ============  ========  ========
existing job                                          adopt       always_adopt  new       fail
====================================================  ==========  ============  ========  ========
this call's create                                    ADOPT       ADOPT         ADOPT     ADOPT
someone else's                                        NEXT        NEXT          NEXT      EXISTS
a try's before a clear, ended (SUCCEEDED too)         NEXT        as below      NEXT      EXISTS
earlier try's, FAILED, CANCELLED or CANCELLING        NEXT        NEXT          NEXT      EXISTS
earlier try's, other spec (trainingInput or labels)   MISMATCH    MISMATCH      NEXT      EXISTS
earlier try's, same spec, live or SUCCEEDED           ADOPT       ADOPT         NEXT      EXISTS
====================================================  ==========  ============  ========  ========

NEXT: try the next attempt ID (``_r2``...). EXISTS: JobAlreadyExistsError. MISMATCH:
JobSpecMismatchError naming the differing fields: the task changed between tries, and a second
job for one task instance would train twice; a fix after a failure is fine (the failed job is
skipped first). A CANCELLING job can only end CANCELLED, so it counts as failed. A live job
made before a clear counts as an earlier try's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.backends import backend_of
from airflow_aip.jobs.labels import OWNER_LABELS, TRY_LABEL
from airflow_aip.jobs.logs import normalize_timestamp
from airflow_aip.jobs.states import JobState

IF_EXISTS = ("adopt", "always_adopt", "fail", "new")
CLOCK_SKEW = 60.0  # seconds the API's clock may run behind ours when dating this call's create
_WILL_NOT_SUCCEED = frozenset(
    {JobState.FAILED, JobState.CANCELLED, JobState.CANCELLING, JobState.PAUSED, JobState.EXPIRED}
)


class Owner(str, Enum):
    """Who made an existing job with our ID."""

    THIS_CALL = "this very create (its answer was lost)"
    EARLIER_TRY = "an earlier try of this task instance"
    BEFORE_CLEAR = "a try before this task instance was cleared"
    SOMEONE_ELSE = "another run or task"


class Action(str, Enum):
    """What the submit path does with it."""

    ADOPT = "adopt"  # wait on the existing job
    NEXT_ATTEMPT = "next attempt"  # create under the next attempt ID
    FAIL_EXISTS = "fail: exists"  # raise JobAlreadyExistsError
    FAIL_MISMATCH = "fail: mismatch"  # raise JobSpecMismatchError(differing)


@dataclass(frozen=True)
class Adoption:
    """The decision, who made the job, and (for a mismatch) the fields that differ."""

    action: Action
    owner: Owner
    differing: tuple[str, ...] = ()

    def describe(self, job_id: str, state: str) -> str:
        """One sentence for the task log."""
        fields = f"; differing fields: {', '.join(self.differing)}" if self.differing else ""
        made_by = f"made by {self.owner.value}{fields}"
        return f"Training job {job_id} ({state}) exists, {made_by}: {self.action.value}"


@dataclass(frozen=True)
class Tries:
    """This try in Airflow's record of its task instance: its number, and the first try since a clear.

    A clear gives the task instance ``retries`` more tries: it sets ``max_tries`` to the last
    try's number plus ``retries``, and the next try is the next number. So the first try since
    the last clear (or ever) is ``max_tries - retries + 1``, as Airflow's own task runner
    computes it (``get_first_reschedule_date``). A clear of a running task (which Airflow
    restarts without touching ``max_tries``) reads as a retry: its job, still live, is adopted.
    """

    number: int
    first: int

    @classmethod
    def of(cls, try_number: int, max_tries: int, retries: int) -> Tries:
        number = max(1, int(try_number))
        return cls(number, min(number, max(1, int(max_tries) - int(retries) + 1)))

    @property
    def cleared(self) -> bool:
        """This is the first try after a clear (not a retry, nor the task instance's first try)."""
        return self.number == self.first > 1

    def before_clear(self, job: Mapping[str, Any]) -> bool:
        """Whether ``job`` was made by a try before the last clear (False without a try label)."""
        made_by = str((job.get("labels") or {}).get(TRY_LABEL) or "")
        return made_by.isdigit() and int(made_by) < self.first

    def not_this_runs(self, job: Mapping[str, Any]) -> bool:
        """Made before the last clear and ended: a past run's job, which a clear trains anew after."""
        return self.before_clear(job) and JobState.parse(job.get("state")).is_terminal


def check_if_exists(value: object) -> str:
    """``if_exists`` is one of IF_EXISTS; else a ValidationError naming it."""
    if value not in IF_EXISTS:
        raise ValidationError("if_exists", f"must be one of {', '.join(IF_EXISTS)}, got {value!r}")
    return str(value)


def spec_differences(requested: Mapping[str, Any], existing: Mapping[str, Any]) -> list[str]:
    """The spec fields, then the ``labels.<key>``, in which two jobs differ.

    Both are neutral (``spec`` and ``labels``, see :mod:`.view`); the spec compares in its
    backend's vocabulary: ml v1's trainingInput with its defaults, or the Vertex AI body we
    sent against what the server holds (fields only the server sets are not differences).
    """
    ours_spec, theirs_spec = requested.get("spec") or {}, existing.get("spec") or {}
    differing = backend_of(requested).spec_differences(ours_spec, theirs_spec)
    ours, theirs = dict(requested.get("labels") or {}), dict(existing.get("labels") or {})
    keys = sorted((set(ours) | set(theirs)) - {TRY_LABEL})
    return differing + [f"labels.{key}" for key in keys if ours.get(key) != theirs.get(key)]


def _created_since(existing: Mapping[str, Any], first_sent: float) -> bool:
    """Created no earlier than ``first_sent`` less CLOCK_SKEW; True when createTime is unreadable.

    Without a readable createTime the spec and labels are all there is to go by.
    """
    created = normalize_timestamp(existing.get("create_time"))
    if created is None:
        return True
    since = normalize_timestamp(datetime.fromtimestamp(first_sent - CLOCK_SKEW, timezone.utc).isoformat())
    return since is not None and created >= since


def owner_of(requested: Mapping[str, Any], existing: Mapping[str, Any], first_sent: float | None) -> Owner:
    """Who made ``existing``, given what we asked to create and when we first sent it (if re-sent)."""
    ours, theirs = requested.get("labels") or {}, existing.get("labels") or {}
    if any(ours.get(key) != theirs.get(key) for key in OWNER_LABELS):
        return Owner.SOMEONE_ELSE
    if first_sent is None or spec_differences(requested, existing):
        return Owner.EARLIER_TRY
    if _created_since(existing, first_sent):
        return Owner.THIS_CALL
    return Owner.EARLIER_TRY


def _earlier_try(requested: Mapping[str, Any], existing: Mapping[str, Any]) -> Adoption:
    """Under ``adopt``: an earlier try's job is waited on unless it failed or its spec changed."""
    if JobState.parse(existing.get("state")) in _WILL_NOT_SUCCEED:
        return Adoption(Action.NEXT_ATTEMPT, Owner.EARLIER_TRY)
    differing = spec_differences(requested, existing)
    if differing:
        return Adoption(Action.FAIL_MISMATCH, Owner.EARLIER_TRY, tuple(differing))
    return Adoption(Action.ADOPT, Owner.EARLIER_TRY)


def decide_adoption(
    requested: Mapping[str, Any],
    existing: Mapping[str, Any],
    *,
    if_exists: str,
    first_sent: float | None,
    tries: Tries | None = None,
) -> Adoption:
    """What to do with ``existing``, the job that holds the ID a create of ``requested`` asked for.

    ``first_sent`` is the UNIX time of the create's first send when the 409 answered a re-send
    (:class:`~airflow_aip.exceptions.JobAlreadyExistsError`), else None. ``tries``: this try's
    place in Airflow's record (None: unknown, every earlier try's job counts as a retry's). See
    the module's table.
    """
    check_if_exists(if_exists)
    owner = owner_of(requested, existing, first_sent)
    if owner is Owner.THIS_CALL:
        return Adoption(Action.ADOPT, owner)
    if if_exists == "fail":
        return Adoption(Action.FAIL_EXISTS, owner)
    if if_exists == "new" or owner is Owner.SOMEONE_ELSE:
        return Adoption(Action.NEXT_ATTEMPT, owner)
    if if_exists == "adopt" and tries is not None and tries.not_this_runs(existing):
        return Adoption(Action.NEXT_ATTEMPT, Owner.BEFORE_CLEAR)
    return _earlier_try(requested, existing)

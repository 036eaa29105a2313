"""A Model Registry upload's operation waits as a training job does: one step, two runners, one event.

The worker (``RegisterModelOperator`` not deferrable: ``SyncWait``) and the triggerer
(``ModelOperationTrigger``: ``TriggerWait`` on the shared poller) read the operation as
``{name, state, operation}`` and end with the same event for the same story: done, failed,
past the deadline, unreadable. An outage is ridden out with the step's backoff and logged once
when it starts and once when it ends.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from airflow_aip.exceptions import AipError, ApiError
from airflow_aip.hooks.registry import operation_view
from airflow_aip.jobs import waiting
from airflow_aip.jobs.watch import Listed, WatchBatch
from airflow_aip.operators import RegisterModelOperator
from airflow_aip.triggers.model_operation import ModelOperationTrigger
from tests.fixtures.logging_api import RecordingLog

NAME = "projects/proj/locations/us-central1/models/m/operations/7"
RUNNING: dict[str, Any] = {"name": NAME}
DONE: dict[str, Any] = {"name": NAME, "done": True, "response": {"modelVersionId": "3"}}
BROKEN: dict[str, Any] = {"name": NAME, "done": True, "error": {"code": 3, "message": "no model.joblib"}}
UNAVAILABLE = ApiError(503, "unavailable", method="models.operations.get")
DENIED = ApiError(403, "denied", method="models.operations.get")
Script = Sequence[Mapping[str, Any] | BaseException]


class FakeOperations:
    """Answers reads of the operation in turn (the last one for ever), sync and async."""

    def __init__(self, script: Script) -> None:
        self.script = list(script)
        self.reads = 0

    def _next(self, name: str) -> dict[str, Any]:
        assert name == NAME
        self.reads += 1
        answer = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(answer, BaseException):
            raise answer
        return operation_view(name, answer)

    def read(self, name: str) -> dict[str, Any]:
        return self._next(name)

    async def aread(self, name: str) -> dict[str, Any]:
        return self._next(name)

    def watch_batches(self, watched: Sequence[tuple[str, str]]) -> list[WatchBatch]:
        return []

    async def alist_batch(self, batch: WatchBatch) -> dict[str, Listed]:  # pragma: no cover
        return {}


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """An outage's first reads come back within milliseconds (the step's backoff, scaled down)."""
    monkeypatch.setattr(waiting, "BACKOFF_INITIAL", 0.01)


def register(**kwargs: Any) -> RegisterModelOperator:
    arguments = {"manifest_uri": "gs://b/m.json", "model": "m", "project_id": "proj", "region": "us-central1"}
    return RegisterModelOperator(task_id="register", **{**arguments, **kwargs})


def in_worker(
    script: Script, timeout: float = 30.0, log: RecordingLog | None = None
) -> tuple[dict[str, Any], FakeOperations]:
    """The worker's wait; the first of ``script`` is the upload's own answer, not a read."""
    operator = register(deferrable=False, poll_interval=0.01, upload_timeout=timeout)
    first = script[0]
    assert not isinstance(first, BaseException)
    operations = FakeOperations(script[1:] or script)
    operator.__dict__["wait_registry"] = operations
    operator._cached_logger = log or RecordingLog()  # type: ignore[assignment]  # what .log returns
    return operator._wait(first), operations


async def in_triggerer(
    script: Script, timeout: float = 30.0, log: RecordingLog | None = None
) -> tuple[dict[str, Any], FakeOperations]:
    trigger = ModelOperationTrigger(
        operation_name=NAME,
        region="us-central1",
        project_id="proj",
        api_endpoint="http://127.0.0.1:1/",
        poll_interval=0.01,
        end_time=time.time() + timeout,
    )
    operations = FakeOperations(script)
    trigger.__dict__["registry"] = operations
    trigger.__dict__["_log"] = log or RecordingLog()
    events = [event.payload async for event in trigger.run()]
    assert len(events) == 1
    return events[0], operations


async def both(script: Script, timeout: float = 30.0) -> dict[str, Any]:
    """The event of each runner for the same story: they must be the same."""
    worker, _ = in_worker(script, timeout)
    triggerer, _ = await in_triggerer(script, timeout)
    assert worker == triggerer
    return worker


def expected(status: str, message: str, operation: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"status": status, "message": message, "operation_name": NAME, "operation": operation}


async def test_a_done_operation_succeeds_with_the_operation() -> None:
    assert await both([RUNNING, RUNNING, DONE]) == expected("success", f"{NAME} is done", DONE)


async def test_an_operation_done_with_an_error_fails_with_it() -> None:
    event = await both([RUNNING, BROKEN])
    assert (event["status"], event["operation"]) == ("failed", BROKEN)
    assert event["message"] == "the upload failed: code 3: no model.joblib"


async def test_an_operation_still_running_at_the_deadline_times_out() -> None:
    event = await both([RUNNING], timeout=0.2)
    assert event == expected("timeout", f"{NAME} was not done by its deadline")


async def test_an_unreadable_operation_that_is_not_an_outage_ends_the_wait_with_an_error() -> None:
    event = await both([RUNNING, DENIED])
    assert event["status"] == "error"
    assert event["message"] == f"cannot read {NAME}: ApiError: models.operations.get: HTTP 403: denied"


@pytest.mark.parametrize("runner", ["worker", "triggerer"])
async def test_an_outage_is_ridden_out_and_logged_once_when_it_starts_and_once_when_it_ends(
    runner: str,
) -> None:
    script: Script = [RUNNING, UNAVAILABLE, UNAVAILABLE, UNAVAILABLE, RUNNING, DONE]
    log = RecordingLog()
    if runner == "worker":
        event, operations = in_worker(script, log=log)
    else:
        event, operations = await in_triggerer(script, log=log)
    assert event["status"] == "success"
    assert operations.script == [DONE]  # every read was made, none twice
    lines = [text for _, text in log.records]
    assert lines[0] == f"Model upload {NAME} is RUNNING"
    outage = [line for line in lines if "outage" in line]
    assert len(outage) == 2
    assert outage[0].startswith(f"Cannot read model upload {NAME} (ApiError: models.operations.get: HTTP 503")
    assert outage[0].endswith("the upload is left alone")
    assert outage[1].startswith(f"Model upload {NAME} can be read again: the API outage lasted")
    assert "(3 failed reads); the upload was left alone" in outage[1]
    assert lines[-1] == f"Model upload {NAME} is SUCCEEDED"


@pytest.mark.parametrize("status", ["failed", "timeout", "error"])
def test_the_operator_fails_with_the_reason_of_every_event_but_success(
    status: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    operator = register()
    model = operator.model_ref()
    monkeypatch.setattr(operator, "_checked", lambda context: (model, None))
    event = {"status": status, "message": "the reason", "operation_name": NAME, "operation": None}
    with pytest.raises(AipError, match=f"^Model upload to {model.name}: the reason$"):
        operator.execute_complete({}, event)  # the context is not read

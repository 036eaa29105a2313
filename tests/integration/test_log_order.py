"""A relayed job log reads in order, with one timestamp a line, against the real local service.

Before: each relayed line carried the job entry's timestamp and severity inside the task log's
own, and "Training job ... is RUNNING" (what a read found) came before the job's replayed
"Job state: PREPARING" line (what happened before that read).
"""

from __future__ import annotations

import re

import pytest
from structlog.testing import capture_logs

from tests.fixtures.local_service import LocalService, StagedTrainer
from tests.fixtures.log_streaming import CHATTY_ARGS, context, job_lines, operator

pytestmark = pytest.mark.integration


def test_relayed_lines_have_one_timestamp_and_the_states_come_in_order(
    local_env: LocalService, staged_trainer: StagedTrainer
) -> None:
    op = operator(staged_trainer, "chatty", CHATTY_ARGS, deferrable=False)
    with capture_logs() as captured:
        summary = op.execute(context())
    assert summary["state"] == "SUCCEEDED"
    lines = job_lines(captured)
    assert len(lines) > 30
    assert not any(re.search(r"\d{4}-\d{2}-\d{2}T\d{2}:", line) for line in lines)  # the logger's only
    assert not any(re.match(r"^\S+ (INFO|ERROR|DEFAULT) ", line) for line in lines)  # the logger's level only
    events = [str(e["event"]) for e in captured]
    reads = [i for i, event in enumerate(events) if re.match(r"^Training job \S+ is [A-Z_]+$", event)]
    # In the service's words (Vertex AI says JOB_STATE_PENDING where it writes PREPARING).
    found = [events[i].rsplit(" ", 1)[1].removeprefix("JOB_STATE_") for i in reads]
    states = [{"PENDING": "PREPARING"}.get(state, state) for state in found]
    assert "SUCCEEDED" in states, events
    for index, state in zip(reads, states, strict=True):  # each state found follows the job's own line
        if state == "QUEUED":  # the create's answer: the job has written no state line yet
            continue
        relayed = [i for i, event in enumerate(events) if event.endswith(f"Job state: {state}")]
        assert relayed, (state, events)
        assert relayed[0] < index, (state, events)

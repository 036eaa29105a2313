"""The shared log poller against the real local service: two running jobs' logs, one read a round.

The service runs with ``--fault-admin`` (no fault is injected) for its request counts
(``GET /_stats``): every ``entries.list`` the poller made reached it, and none other did.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from airflow_aip.hooks.logs import JobLogsHook
from airflow_aip.jobs.logs import Line, LogStream, format_entry
from airflow_aip.triggers.log_polling import LogFollow, log_poller
from tests.fixtures.local_service import (
    TERMINAL,
    LocalService,
    StagedTrainer,
    log_entries,
    own_service,
    wait_for_state,
)

pytestmark = pytest.mark.integration
PROJECT = "log-poller-project"
CHATTY_ARGS = ["--lines", "20", "--seconds", "2", "--last-burst", "10"]


# ``--fault-admin`` for its request counts: no fault is injected.
counted_service = own_service("counted_service", ["--fault-admin"])


def entries_list_calls(service: LocalService) -> int:
    return int(service.admin("_stats")["requests"].get("entries.list", 0))


async def test_two_jobs_logs_come_once_and_in_order_through_one_read_a_round(
    counted_service: LocalService, staged_trainer: StagedTrainer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW__AIP__LOG_READS_PER_MINUTE", "600")  # the test's own service
    ids = [f"poller_{uuid.uuid4().hex[:10]}" for _ in range(2)]
    for job_id in ids:
        body = {"jobId": job_id, "trainingInput": staged_trainer.training_input("chatty", CHATTY_ARGS)}
        counted_service.ml().projects().jobs().create(parent=f"projects/{PROJECT}", body=body).execute()
    hook = JobLogsHook("aip_missing_conn", project_id=PROJECT, api_endpoint=counted_service.url)
    real_list = hook.alist_entries
    reads: list[tuple[str, set[str]]] = []  # each read's filter, and the jobs still running then

    async def recorded(body: dict[str, Any]) -> dict[str, Any]:
        reads.append((body["filter"], {f.job_id for f in poller.follows if f.drain is None}))
        return await real_list(body)

    hook.alist_entries = recorded  # type: ignore[method-assign]
    before = await asyncio.to_thread(entries_list_calls, counted_service)
    poller = log_poller(hook, PROJECT)
    relayed: dict[str, list[Line]] = {job_id: [] for job_id in ids}
    follows = {job_id: poller.follow(LogStream(job_id), relayed[job_id].extend, interval=1) for job_id in ids}

    async def wait(job_id: str, follow: LogFollow) -> None:
        ml = counted_service.ml()  # a client per thread: httplib2 is not thread-safe
        await asyncio.to_thread(wait_for_state, ml, f"projects/{PROJECT}/jobs/{job_id}", TERMINAL)
        follow.end()
        await follow.drained()
        follow.close()

    try:
        await asyncio.gather(*(wait(job_id, follow) for job_id, follow in follows.items()))
    finally:
        for follow in follows.values():
            follow.close()
    assert poller.task is not None
    await poller.task
    after = await asyncio.to_thread(entries_list_calls, counted_service)
    assert after - before == poller.reads == len(reads)
    both = [text for text, followed in reads if followed == set(ids)]
    assert both  # while both jobs ran, each read was one for the two of them
    assert all(all(f'job_id="{job_id}"' in text for job_id in ids) for text in both)
    for job_id in ids:
        everything = [format_entry(entry) for entry in log_entries(counted_service.url, PROJECT, job_id)]
        assert [message for _level, message in relayed[job_id]] == everything
        assert sum("chatty line" in line for line in everything) == 30

"""Log reads at a poller's scale: per-job indexes grown by what was appended, bisected and merged."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from airflow_aip.local.log_entries import JobLog, list_entries, to_log_entry
from airflow_aip.local.logs import index as log_index
from airflow_aip.local.logs.filters import parse_filter
from airflow_aip.local.store import LOG_FILE, JobStore


def _store_with_logs(path: Path, jobs: int, seed: int = 3) -> tuple[JobStore, list[str]]:
    """Jobs with 0-9 lines each, written interleaved as replicas write them (stamps never go back)."""
    store = JobStore(path)
    ids = [f"job_{i:03d}" for i in range(jobs)]
    for job_id in ids:
        store.create("proj", {"jobId": job_id, "state": "RUNNING"})
    rnd = random.Random(seed)
    for turn in range(9 * jobs // 2):
        job_id = rnd.choice(ids)
        log = JobLog(store, "proj", job_id)
        if rnd.random() < 0.3:
            log.replica("master-replica-0", None, "stderr", f"oops {turn}")
        else:
            log.service(f"turn {turn}")
    return store, ids


def _all_entries(store: JobStore, filter_text: str, descending: bool = False) -> list[dict[str, Any]]:
    """The answer as a full scan gives it: every line of every job, filtered, sorted."""
    node = parse_filter(filter_text)
    every = [
        to_log_entry("proj", view.job_id, index, stored)
        for view in store.job_views(["proj"])
        for index, stored in enumerate(store.read_log("proj", view.job_id))
    ]
    found = [entry for entry in every if node is None or node.matches(entry)]
    return sorted(found, key=lambda e: (e["timestamp"] or "", e["insertId"]), reverse=descending)


def _read_all(store: JobStore, request: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """Every page of an ``entries.list``, and how many pages it took."""
    entries, pages, token = [], 0, None
    while True:
        page = list_entries(store, dict(request, pageToken=token) if token else request)
        entries += page.get("entries", [])
        pages += 1
        token = page.get("nextPageToken")
        if not token:
            return entries, pages


def _poller_filter(store: JobStore, ids: list[str]) -> str:
    """One branch per job; every other job with a cursor at its third line's timestamp."""
    branches = []
    for n, job_id in enumerate(ids):
        lines = store.read_log("proj", job_id)
        if n % 2 and len(lines) > 2:
            branches.append(f'(resource.labels.job_id="{job_id}" AND timestamp>="{lines[2]["time"]}")')
        else:
            branches.append(f'(resource.labels.job_id="{job_id}")')
    return 'resource.type="ml_job" AND (' + " OR ".join(branches) + ")"


@pytest.mark.parametrize("order", ["timestamp asc", "timestamp desc"])
def test_a_250_branch_or_filter_with_cursors_pages_exactly_the_scans_answer(
    tmp_path: Path, order: str
) -> None:
    store, ids = _store_with_logs(tmp_path, 300)
    text = _poller_filter(store, ids[10:260])
    expected = _all_entries(store, text, descending=order.endswith("desc"))

    entries, pages = _read_all(
        store, {"resourceNames": ["projects/proj"], "filter": text, "orderBy": order, "pageSize": 97}
    )

    assert entries == expected
    assert pages == len(expected) // 97 + 1
    assert {e["resource"]["labels"]["job_id"] for e in entries} <= set(ids[10:260])
    assert len(expected) > 500


@pytest.mark.parametrize(
    "text",
    [
        "severity=ERROR",
        "resource.labels.job_id:job_01* AND severity=ERROR",
        'NOT resource.labels.job_id="job_003"',
        'resource.labels.job_id="job_004" OR textPayload:"turn 1*"',
        "",
    ],
)
def test_filters_that_name_no_jobs_still_scan(tmp_path: Path, text: str) -> None:
    store, _ = _store_with_logs(tmp_path, 30)
    entries, _ = _read_all(store, {"resourceNames": ["projects/proj"], "filter": text, "pageSize": 40})
    assert entries == _all_entries(store, text)


def test_a_growing_log_answers_only_the_new_lines_after_a_cursor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = JobStore(tmp_path)
    store.create("proj", {"jobId": "a", "state": "RUNNING"})
    log = JobLog(store, "proj", "a")
    for n in range(3):
        log.service(f"first {n}")
    request = {"resourceNames": ["projects/proj"], "filter": 'resource.labels.job_id="a"'}
    first = list_entries(store, request)["entries"]
    parsed: list[bytes] = []
    real_parse = log_index.parse_line

    def counted(line: bytes) -> dict[str, Any] | None:
        parsed.append(line)
        return real_parse(line)

    monkeypatch.setattr(log_index, "parse_line", counted)

    for n in range(2):
        log.service(f"second {n}")
    cursor = dict(request, filter=f'{request["filter"]} AND timestamp>"{first[-1]["timestamp"]}"')
    second = list_entries(store, cursor)["entries"]

    assert [e["textPayload"] for e in second] == ["second 0", "second 1"]
    assert [e["insertId"] for e in second] == ["a-00000003", "a-00000004"]
    assert len([line for line in parsed if b"second" in line]) == 4  # indexed once, read back once
    assert not [line for line in parsed if b"first" in line]  # the old lines were not parsed again


def test_a_torn_last_line_is_read_once_it_is_complete(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    store.create("proj", {"jobId": "a", "state": "RUNNING"})
    JobLog(store, "proj", "a").service("whole")
    line = json.dumps(
        {"message": "late", "severity": "INFO", "task": "service", "time": "2099-01-01T00:00:00.000000Z"}
    )
    path = store.job_dir("proj", "a") / LOG_FILE
    request = {"resourceNames": ["projects/proj"], "filter": 'resource.labels.job_id="a"'}

    with path.open("a") as handle:
        handle.write(line[:20])
    torn = list_entries(store, request)["entries"]
    with path.open("a") as handle:
        handle.write(line[20:] + "\n")
    completed = list_entries(store, request)["entries"]

    assert [e["textPayload"] for e in torn] == ["whole"]
    assert [e["textPayload"] for e in completed] == ["whole", "late"]
    assert completed[1]["insertId"] == "a-00000001"


def test_a_new_store_on_the_same_dir_reads_the_logs_again(tmp_path: Path) -> None:
    store, ids = _store_with_logs(tmp_path, 20)
    text = _poller_filter(store, ids)
    before = _read_all(store, {"resourceNames": ["projects/proj"], "filter": text})

    again = JobStore(tmp_path)
    JobLog(again, "proj", ids[0]).service("after the restart")

    after = _read_all(again, {"resourceNames": ["projects/proj"], "filter": text})
    assert after[0][:-1] == before[0]
    assert after[0][-1]["textPayload"] == "after the restart"


def test_a_log_whose_stamps_go_back_is_still_answered_in_order(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    store.create("proj", {"jobId": "a", "state": "RUNNING"})
    store.create("proj", {"jobId": "b", "state": "RUNNING"})
    times = ["2026-01-01T00:00:03.000000Z", "2026-01-01T00:00:01.000000Z", "2026-01-01T00:00:05.000000Z"]
    store.append_log("proj", "a", [{"message": f"a{n}", "time": t} for n, t in enumerate(times)])
    store.append_log(
        "proj", "b", [{"message": "b0", "time": "2026-01-01T00:00:02.000000Z"}, {"message": "no time"}]
    )
    text = 'timestamp>="2026-01-01T00:00:02Z" OR resource.labels.job_id="b"'

    entries = list_entries(store, {"resourceNames": ["projects/proj"], "filter": text})["entries"]

    assert not store.log_view("proj", "a").ordered
    assert [e["textPayload"] for e in entries] == ["no time", "b0", "a0", "a2"]
    assert entries == _all_entries(store, text)


def test_a_deleted_job_forgets_its_log_index(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    store.create("proj", {"jobId": "a", "state": "SUCCEEDED"})
    JobLog(store, "proj", "a").service("one")
    assert store.log_view("proj", "a").count == 1

    store.delete("proj", "a")
    store.create("proj", {"jobId": "a", "state": "QUEUED"})  # the same id, a new job

    assert store.log_view("proj", "a").count == 0
    assert list_entries(store, {"resourceNames": ["projects/proj"]}) == {}

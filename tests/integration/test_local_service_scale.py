"""A poller's list calls against a real ``aip-local serve``: jobs by ID, and only the new log lines.

The data dir is written before the service starts (finished jobs, so nothing runs), and log
lines are appended to the files while it serves, as its runner threads append them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from airflow_aip.local.log_entries import JobLog
from airflow_aip.local.service import ServiceConfig, TrainingService
from airflow_aip.local.store import LOG_FILE
from airflow_aip.local.vertex.render import CUSTOM_JOBS
from airflow_aip.local.vertex.service import VertexJobs
from tests.fixtures.local_service import LocalService
from tests.fixtures.vertex import WORKER_POOL as POOL

pytestmark = pytest.mark.integration
UNUSED_STORAGE = "http://127.0.0.1:9"  # no job runs here, so nothing reads Cloud Storage


def _prepare(data_dir: Path) -> tuple[list[str], list[str]]:
    """120 finished ml v1 jobs with three log lines each, and 30 finished Vertex custom jobs."""
    service = TrainingService(ServiceConfig(data_dir, storage_url=None))
    try:
        ids = [f"job_{i:03d}" for i in range(120)]
        for job_id in ids:
            service.store.create("proj", {"jobId": job_id, "state": "SUCCEEDED"})
            for n in range(3):
                JobLog(service.store, "proj", job_id).service(f"{job_id} line {n}")
        vertex = VertexJobs(service)
        names = []
        for i in range(30):
            body = {
                "displayName": f"v{i}",
                "labels": {"aip_job_id": f"v_{i}"},
                "jobSpec": {"workerPoolSpecs": [POOL]},
            }
            created = vertex.create(CUSTOM_JOBS, "proj", "us-central1", body)
            number, job_id = created["name"].split("/")[1], created["name"].rsplit("/", 1)[1]
            service.cancel_job(number, job_id)  # off the queue: a restart must not run it
            names.append(created["name"])
        return ids, names
    finally:
        service.stop()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[LocalService, list[str], list[str]]]:
    ids, names = _prepare(tmp_path / "data")
    service = LocalService(tmp_path / "data", UNUSED_STORAGE).start()
    try:
        yield service, ids, names
    finally:
        service.stop()


def _entries(url: str, text: str) -> list[dict[str, Any]]:
    body = {"resourceNames": ["projects/proj"], "orderBy": "timestamp asc", "pageSize": 1000, "filter": text}
    page = httpx.post(url + "v2/entries:list", json=body, timeout=30).raise_for_status().json()
    assert "nextPageToken" not in page
    return list(page.get("entries", []))


def test_lists_by_id_and_reads_only_new_lines(served: tuple[LocalService, list[str], list[str]]) -> None:
    service, ids, names = served
    url = service.url
    wanted = ids[::2][:50]
    jobs_filter = " OR ".join(f'jobId="{job_id}"' for job_id in wanted)
    labels = " OR ".join(f'labels.aip_job_id="v_{i}"' for i in range(0, 30, 4))

    jobs = httpx.get(
        f"{url}v1/projects/proj/jobs", params={"pageSize": 100, "filter": jobs_filter}, timeout=30
    )
    custom = httpx.get(
        f"{url}v1/projects/proj/locations/us-central1/customJobs",
        params={"pageSize": 100, "filter": labels},
        timeout=30,
    )
    first = _entries(url, " OR ".join(f'resource.labels.job_id="{job_id}"' for job_id in wanted))
    last_seen = {
        job_id: [e for e in first if e["resource"]["labels"]["job_id"] == job_id][-1] for job_id in wanted
    }
    for job_id in wanted[:5]:  # five jobs print again, as replicas would
        line = {
            "message": f"{job_id} new",
            "severity": "INFO",
            "task": "master-replica-0",
            "time": "2999-01-01T00:00:00.000000Z",
        }
        with (service.data_dir / "projects" / "proj" / "jobs" / job_id / LOG_FILE).open("a") as handle:
            handle.write(json.dumps(line) + "\n")
    branches = [
        f'(resource.labels.job_id="{job_id}" AND timestamp>"{last_seen[job_id]["timestamp"]}")'
        for job_id in wanted
    ]
    again = _entries(url, 'resource.type="ml_job" AND (' + " OR ".join(branches) + ")")

    assert [job["jobId"] for job in jobs.raise_for_status().json()["jobs"]] == sorted(wanted, reverse=True)
    assert [job["name"] for job in custom.raise_for_status().json()[CUSTOM_JOBS]] == names[::4][::-1]
    assert len(first) == 3 * len(wanted)
    assert [e["textPayload"] for e in again] == [f"{job_id} new" for job_id in wanted[:5]]
    assert [e["insertId"] for e in again] == [f"{job_id}-00000003" for job_id in wanted[:5]]

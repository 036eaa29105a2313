"""The live Training job tab: how many job reads 20 open pages on one running job cost.

The real ``aip-local serve`` (``--fault-admin``, for its request counters) runs a CustomJob that
sleeps; 20 threads stand for 20 open pages, each asking for the job every 0.25 s (twenty times
more often than the tab's 5 s refresh) for 4 s, through the tab's :class:`~airflow_aip.ui.live.LiveReads`
with a 1 s interval. The baseline is the same pages each reading the job through its own hook at
every refresh, as a page without the shared cache would. The figure is the ``customJobs.get``
requests the service counted per refresh interval: the goal is at most one.
"""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from airflow_aip.local.storage.gcs import FakeGcsServer
from airflow_aip.ui.live import LiveReads, build_hook
from bench.bench_local import VERTEX_PARENT, _vertex_pool
from bench.common import Figure, Series
from tests.fixtures.local_service import LocalService, stage_trainer

PAGES = 20
POLL = 0.25
DURATION = 4.0
INTERVAL = 1.0


def _gets(url: str) -> int:
    stats = httpx.get(f"{url}_stats", timeout=30).raise_for_status().json()
    return int(stats["requests"].get("customJobs.get", 0))


def _pages(read: Any) -> None:
    """PAGES threads calling ``read()`` every POLL seconds for DURATION seconds."""
    stop = time.monotonic() + DURATION

    def page() -> None:
        while time.monotonic() < stop:
            read()
            time.sleep(POLL)

    threads = [threading.Thread(target=page) for _ in range(PAGES)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _reads_per_interval(url: str, api: dict[str, Any], shared: bool) -> float:
    before = _gets(url)
    if shared:
        reads = LiveReads(ttl=INTERVAL)
        _pages(lambda: reads.read(api))
    else:
        local = threading.local()

        def own() -> None:
            if not hasattr(local, "hook"):
                local.hook = build_hook(api)
            local.hook.read(api["name"])

        _pages(own)
    return (_gets(url) - before) / (DURATION / INTERVAL)


def run(repeats: int) -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="aip-bench-ui-") as tmp:
        root = Path(tmp)
        with FakeGcsServer(root / "gcs") as gcs:
            service = LocalService(root / "data", gcs.url, extra_args=["--fault-admin"]).start()
            try:
                staged = stage_trainer(gcs.url, root / "sdists")
                body = {
                    "displayName": "bench_ui_live",
                    "jobSpec": {"workerPoolSpecs": [_vertex_pool(staged, "sleep", ["--seconds=600"])]},
                }
                job = httpx.post(f"{service.url}{VERTEX_PARENT}/customJobs", json=body, timeout=30)
                name = job.raise_for_status().json()["name"]
                api = {
                    "name": name,
                    "backend": "vertex",
                    "gcp_conn_id": "google_cloud_default",
                    "api_endpoint": service.url,
                    "impersonation_chain": None,
                    "project_id": "bench-project",
                    "region": "us-central1",
                }
                ours = [_reads_per_interval(service.url, api, shared=True) for _ in range(repeats)]
                baseline = [_reads_per_interval(service.url, api, shared=False) for _ in range(repeats)]
                httpx.post(f"{service.url}v1/{name}:cancel", json={}, timeout=30)
            finally:
                service.stop()
    return [
        Figure(
            "Live Training job tab",
            f"job reads per {INTERVAL:g} s interval, {PAGES} pages polling every {POLL} s",
            "reads",
            Series("shared LiveReads", ours),
            Series("a read per page per refresh", baseline),
            goal="at most 1 read per interval",
            goal_met=max(ours) <= 1.0,
        )
    ]

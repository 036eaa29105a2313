"""The local service at a poller's scale: 5,000 jobs a project, job lists by 100 IDs, logs of 250 jobs.

The shared poller lists ~100 watched jobs in one call (``jobId="a" OR ...`` on ml v1,
``labels.aip_job_id="a" OR ...`` on Vertex) and reads the new lines of ~250 jobs in one
``entries.list`` (one ``resource.labels.job_id="A" AND timestamp>="cursor"`` branch a job).
Records are written straight through the store (nothing runs; ml v1 and Vertex jobs RUNNING,
5,000 of each, in a RAM-backed data dir so 10,000 fsyncs do not dominate the set-up), and every
ml v1 job gets ``LINES`` log lines. Each round first appends ``GROWTH`` lines to 10 watched and
10 unwatched jobs (untimed), then times one call; the cursors follow what was read.

Baselines, from the same run and data, each checked to give the same answer:

- job lists: a copy of the old path (deep-copy every job of the project, render, match each);
- ``entries.list``: a full scan (every job's whole log re-read, parsed, rendered, the cursors
  applied by dictionary lookup, everything kept sorted): a lower bound of the old path, which
  also matched every line against the 250-branch filter (estimated in a note, too slow to run).

    python -m bench.local_scale    # these figures only, printed (AIP_BENCH_LOCAL_SCALE=0.1: 500 jobs)
"""

from __future__ import annotations

import copy
import json
import os
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from airflow_aip.jobs.labels import JOB_ID_LABEL
from airflow_aip.jobs.vertex.body import CUSTOM_JOB_SCHEMA, validate_custom_job
from airflow_aip.local.clock import rfc3339
from airflow_aip.local.log_entries import list_entries, to_log_entry
from airflow_aip.local.logs.filters import ML_JOB_FILTER_FIELDS, VERTEX_JOB_FILTER_FIELDS, parse_filter
from airflow_aip.local.service import ServiceConfig, TrainingService
from airflow_aip.local.store import LOG_FILE, JobStore, project_number
from airflow_aip.local.vertex.render import CUSTOM_JOBS, apply_read_mask, render
from airflow_aip.local.vertex.service import VertexJobs
from bench.common import Figure, Series, sample

TOPIC = "local training service"
PROJECT = "bench-scale"
REGION = "us-central1"
JOBS = max(500, round(5000 * float(os.environ.get("AIP_BENCH_LOCAL_SCALE", "1"))))  # below 1: a quick check
LINES, GROWTH = 200, 50
LISTED, WATCHED, GROWING = 100, 250, 10
START = datetime(2026, 11, 24, tzinfo=timezone.utc)
POOL = {
    "machineSpec": {"machineType": "n1-standard-4"},
    "replicaCount": "1",
    "pythonPackageSpec": {
        "executorImageUri": "us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-0:latest",
        "packageUris": ["gs://bench-bucket/trainer-0.1.tar.gz"],
        "pythonModule": "trainer.task",
        "args": ["--epochs", "10"],
    },
}


class _Stamps:
    """One microsecond a line, never back: as the service stamps them."""

    def __init__(self) -> None:
        self.count = 0

    def next(self) -> str:
        self.count += 1
        return rfc3339(START + timedelta(microseconds=self.count))


def _ml_job(job_id: str) -> dict[str, Any]:
    training_input = {
        "region": REGION,
        "scaleTier": "BASIC",
        "packageUris": ["gs://bench-bucket/trainer-0.1.tar.gz"],
        "pythonModule": "trainer.task",
        "args": ["--epochs", "10", "--job-dir", f"gs://bench-bucket/out/{job_id}"],
    }
    labels = {"airflow-dag-id": "bench", "airflow-task-id": "train", JOB_ID_LABEL: job_id}
    when = rfc3339(START)
    job = {"jobId": job_id, "state": "RUNNING", "createTime": when, "startTime": when}
    return dict(job, trainingInput=training_input, labels=labels)


def _fill(service: TrainingService, stamps: _Stamps) -> list[str]:
    """5,000 ml v1 jobs with LINES lines each, and 5,000 Vertex custom jobs; the ml v1 IDs."""
    store, number = service.store, project_number(PROJECT)
    ids = [f"j{i:05d}" for i in range(JOBS)]
    for job_id in ids:
        store.create(PROJECT, _ml_job(job_id))
    template = validate_custom_job({"displayName": "x", "jobSpec": {"workerPoolSpecs": [POOL]}})
    for i, label in enumerate(ids):
        job_id = str(10**18 + i)
        resource = copy.deepcopy(template)
        name = f"projects/{number}/locations/{REGION}/{CUSTOM_JOBS}/{job_id}"
        resource.update(name=name, displayName=f"train-{label}", labels={JOB_ID_LABEL: label})
        resource["createTime"] = when = rfc3339(START)
        record = {"jobId": job_id, "kind": CUSTOM_JOBS, "location": REGION, "resource": resource}
        record.update(
            projectNumber=number, projectId=PROJECT, state="RUNNING", createTime=when, runningSince=when
        )
        store.create(number, record)
    _append(store, ids, LINES, stamps)
    return ids


def _append(store: JobStore, ids: list[str], lines: int, stamps: _Stamps) -> None:
    """``lines`` lines to each job, stamped interleaved across the jobs, as replicas print."""
    times = [[stamps.next() for _ in ids] for _ in range(lines)]
    for column, job_id in enumerate(ids):
        entries = []
        for k in range(lines):
            message = f"step {k}: loss=0.{k:04d} accuracy=0.98{k:02d} learning_rate=0.001 examples/s=1234.5"
            entry = {"message": message, "severity": "INFO", "task": "master-replica-0", "trial": None}
            entries.append(dict(entry, time=times[k][column]))
        store.append_log(PROJECT, job_id, entries)


# -- the old paths, as they were ------------------------------------------------------------------


def _old_ml_list(store: JobStore, text: str, size: int) -> list[dict[str, Any]]:
    node = parse_filter(text, ML_JOB_FILTER_FIELDS)
    matching = []
    for _, job in store.list_jobs(PROJECT):  # every job deep-copied; RUNNING jobs need no position
        if node is None or node.matches(job):
            matching.append(job)
            if len(matching) > size:
                break
    return matching[:size]


def _old_vertex_list(store: JobStore, text: str, size: int) -> list[dict[str, Any]]:
    node = parse_filter(text, VERTEX_JOB_FILTER_FIELDS)
    matching = []
    for _, job in store.list_jobs(project_number(PROJECT)):
        if job.get("kind") != CUSTOM_JOBS or job.get("location") != REGION:
            continue
        shown = render(job, with_trials=False)
        if node is None or node.matches(shown):
            matching.append(apply_read_mask(shown, None, CUSTOM_JOB_SCHEMA))
            if len(matching) > size:
                break
    return matching[:size]


def _full_scan_entries(store: JobStore, cursors: Mapping[str, str], size: int) -> list[dict[str, Any]]:
    """Every line of every job re-read and rendered; the cursors by lookup instead of the filter."""
    found = []
    for record in store.records():
        path = store.job_dir(record.project, record.job_id) / LOG_FILE
        if record.project != PROJECT or not path.exists():
            continue
        with path.open(encoding="utf-8") as handle:
            stored = [json.loads(line) for line in handle]
        for index, line in enumerate(stored):
            entry = to_log_entry(PROJECT, record.job_id, index, line)
            cursor = cursors.get(record.job_id)
            if cursor is not None and entry["timestamp"] >= cursor:
                found.append(entry)
    found.sort(key=lambda e: (e["timestamp"], e["insertId"]))
    return found[:size]


# -- the measurements -----------------------------------------------------------------------------


def _entries_request(cursors: Mapping[str, str]) -> dict[str, Any]:
    branches = " OR ".join(f'(resource.labels.job_id="{j}" AND timestamp>="{t}")' for j, t in cursors.items())
    text = f'resource.type="ml_job" AND ({branches})'
    return {
        "resourceNames": [f"projects/{PROJECT}"],
        "orderBy": "timestamp asc",
        "pageSize": 1000,
        "filter": text,
    }


def _same(ours: Any, baseline: Any, what: str) -> None:
    if ours != baseline:
        raise RuntimeError(f"{what}: the indexed answer differs from the old path's")


def _job_lists(service: TrainingService, ids: list[str], repeats: int) -> list[Figure]:
    store, vertex = service.store, VertexJobs(service)
    wanted = ids[7 :: JOBS // LISTED][:LISTED]
    ml_text = " OR ".join(f'jobId="{j}"' for j in wanted)
    label_text = " OR ".join(f'labels.{JOB_ID_LABEL}="{j}"' for j in wanted)

    def ours_ml() -> Any:
        return service.list_jobs(PROJECT, ml_text, LISTED, None)["jobs"]

    def ours_vertex() -> Any:
        return vertex.list(CUSTOM_JOBS, PROJECT, REGION, label_text, LISTED, None, None)[CUSTOM_JOBS]

    _same(ours_ml(), _old_ml_list(store, ml_text, LISTED), "ml v1 jobs.list")
    _same(ours_vertex(), _old_vertex_list(store, label_text, LISTED), "Vertex customJobs.list")
    figures = []
    for name, ours, old in [
        (
            "ml v1 jobs.list, 100-ID OR filter, 5,000 jobs",
            ours_ml,
            lambda: _old_ml_list(store, ml_text, LISTED),
        ),
        (
            "Vertex customJobs.list, 100-label OR filter, 5,000 jobs",
            ours_vertex,
            lambda: _old_vertex_list(store, label_text, LISTED),
        ),
    ]:
        figure = Figure(TOPIC, name, "s", Series("indexed", sample(ours, repeats)))
        figure.baseline = Series("old path: copy, render and match every job", sample(old, repeats))
        figure.goal = "at most 0.05x of the old path"
        figure.goal_met = figure.ratio is not None and figure.ratio <= 0.05
        figures.append(figure)
    return figures


def _log_reads(service: TrainingService, ids: list[str], stamps: _Stamps, repeats: int) -> list[Figure]:
    store = service.store
    watched = ids[3 :: JOBS // WATCHED][:WATCHED]
    # The poller has caught up: each cursor is the job's last line read (">=": it is read again).
    cursors = {job_id: str(store.read_log(PROJECT, job_id)[-1]["time"]) for job_id in watched}
    unwatched = [j for j in ids if j not in cursors][:GROWING]
    warm, cold, scans = [], [], []
    for round_ in range(repeats):
        growing = watched[round_ * GROWING : (round_ + 1) * GROWING] + unwatched
        _append(store, growing, GROWTH, stamps)
        request = _entries_request(cursors)
        restarted = JobStore(store.data_dir)  # a restarted service: no log index yet
        cold.append(_timed(list_entries, restarted, request))
        warm.append(_timed(list_entries, store, request))
        started = time.perf_counter()
        scanned = _full_scan_entries(store, cursors, 1000)
        scans.append(time.perf_counter() - started)
        page = list_entries(store, request).get("entries", [])
        _same(page, scanned, "entries.list")
        for entry in page:
            cursors[entry["resource"]["labels"]["job_id"]] = entry["timestamp"]
    request = _entries_request(cursors)
    warm_figure = Figure(
        TOPIC,
        "entries.list, 250-job OR filter with cursors, 5,000 jobs x 200+ lines (index warm)",
        "s",
        Series("indexed, bisect and merge", warm),
        Series("full scan: re-read every log, sort", scans),
        goal="at most 0.05x of the full scan",
    )
    warm_figure.goal_met = warm_figure.ratio is not None and warm_figure.ratio <= 0.05
    cold_figure = Figure(
        TOPIC,
        "entries.list, the same, first read after a restart (250 indexes built)",
        "s",
        Series("indexed, index built on the read", cold),
        Series("full scan: re-read every log, sort", scans),
    )
    warm_figure.notes.append(
        f"Each round appends {GROWTH} lines to {GROWING} watched and {GROWING} unwatched jobs before the "
        f"timed call; the filter is {len(request['filter']):,} characters. "
        + _old_filter_estimate(store, request, len(ids))
    )
    return [warm_figure, cold_figure]


def _timed(call: Callable[..., object], *args: Any) -> float:
    started = time.perf_counter()
    call(*args)
    return time.perf_counter() - started


def _old_filter_estimate(store: JobStore, request: Mapping[str, Any], jobs: int) -> str:
    """What the old path also paid: the 250-branch filter matched against every line of every job."""
    node = parse_filter(request["filter"])
    assert node is not None
    lines = [to_log_entry(PROJECT, "j99999", i, s) for i, s in enumerate(store.read_log(PROJECT, "j00000"))]
    started = time.perf_counter()
    for entry in lines:
        node.matches(entry)
    each = (time.perf_counter() - started) / len(lines)
    return (
        f"The old path also matched that filter against every line ({each * 1e6:.0f} us a line here, "
        f"~{each * jobs * LINES:.0f} s for {jobs * LINES:,} lines): not run."
    )


def _index_memory(data_dir: Path, ids: list[str]) -> Figure:
    """Bytes the log indexes of all 5,000 jobs hold, traced while they are built."""
    store = JobStore(data_dir)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    views = [store.log_view(PROJECT, job_id) for job_id in ids]
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    entries = sum(view.count for view in views)
    megabytes = (after - before) / 1e6
    figure = Figure(TOPIC, "log index memory, 5,000 jobs", "MB", Series("indexes", [megabytes]))
    figure.goal = "under 100 MB"
    figure.goal_met = megabytes < 100
    figure.notes.append(
        f"{entries:,} entries indexed: {(after - before) / entries:.1f} bytes an entry, all in."
    )
    return figure


def run(repeats: int) -> list[Figure]:
    ram = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(prefix="aip-bench-scale-", dir=ram) as tmp:
        service = TrainingService(ServiceConfig(Path(tmp), storage_url=None))  # runner threads not started
        try:
            stamps = _Stamps()
            ids = _fill(service, stamps)
            figures = _job_lists(service, ids, repeats)
            figures += _log_reads(service, ids, stamps, repeats)
            figures.append(_index_memory(Path(tmp), ids))
            return figures
        finally:
            service.stop()


if __name__ == "__main__":
    for fig in run(int(os.environ.get("AIP_BENCH_REPEATS", "5"))):
        ratio = f" ratio {fig.ratio:.3g}" if fig.ratio else ""
        base = f" (baseline {fig.baseline.cell(fig.unit)})" if fig.baseline else ""
        print(f"{fig.name}: {fig.ours.cell(fig.unit)}{base}{ratio} {fig.goal} {fig.goal_met}")
        for note in fig.notes:
            print(f"  - {note}")

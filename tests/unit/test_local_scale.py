"""Job lists at a poller's scale: OR filters answered from indexes, exactly as a full scan answers them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from airflow_aip.local.logs.filter_pruning import FilterPlan, at_or_after, candidate_values, timestamp_floor
from airflow_aip.local.logs.filters import Comparison, Negation, parse_filter
from airflow_aip.local.service import TrainingService
from airflow_aip.local.store import VERTEX_DISPLAY_NAME_FIELD, VERTEX_JOB_ID_LABEL_FIELD, JobStore
from airflow_aip.local.vertex.render import CUSTOM_JOBS, TUNING_JOBS, render
from airflow_aip.local.vertex.service import VertexJobs
from tests.fixtures.vertex import WORKER_POOL as POOL

JOB_ID = ("resource", "labels", "job_id")


def _pages(fetch: Callable[[str | None], dict[str, Any]], key: str) -> list[list[str]]:
    """Every page of a list call, as the ids (or names) on each page."""
    out, token = [], None
    while True:
        page = fetch(token)
        out.append([job.get("jobId") or job["name"] for job in page.get(key, [])])
        token = page.get("nextPageToken")
        if not token:
            return out


# -- what a filter pins down ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('jobId="a"', {"a"}),
        ('jobId="a" OR jobId="b" OR jobId="c"', {"a", "b", "c"}),
        ('(jobId="a" OR jobId="b") AND (jobId="b" OR jobId="c")', {"b"}),
        ('jobId="a" AND state=FAILED', {"a"}),
        ('jobId="a" AND jobId="b"', set()),
        ('jobId="a" OR state=FAILED', None),
        ("jobId:a", None),
        ('jobId="a*"', None),
        ('NOT jobId="a"', None),
        ("state=FAILED", None),
        (None, None),
    ],
)
def test_candidate_values_union_or_intersect_and(text: str | None, expected: set[str] | None) -> None:
    found = candidate_values(parse_filter(text), ("jobId",))
    assert found == (None if expected is None else frozenset(expected))


def test_a_residual_is_one_jobs_branch_of_the_pollers_filter() -> None:
    text = (
        'resource.type="ml_job" AND ((resource.labels.job_id="A"'
        ' AND timestamp>="2026-11-24T00:00:01.000000000Z") OR (resource.labels.job_id="B"))'
    )
    plan = FilterPlan(parse_filter(text), JOB_ID)

    for_a, for_b, for_c = plan.residual("A"), plan.residual("B"), plan.residual("C")

    assert plan.candidates == frozenset({"A", "B"})
    assert for_c is False
    assert for_b == Comparison(("resource", "type"), "=", "ml_job")
    assert timestamp_floor(for_b) == float("-inf")
    assert timestamp_floor(for_a) == 1795478401000000  # 2026-11-24T00:00:01Z in microseconds
    entry = {"resource": {"type": "ml_job", "labels": {"job_id": "A"}}, "timestamp": "2026-11-24T00:00:02Z"}
    assert not isinstance(for_a, bool)
    assert for_a.matches(entry)
    assert not for_a.matches(dict(entry, timestamp="2026-11-24T00:00:00Z"))


def test_what_every_line_of_a_job_shares_and_its_cursor_leave_nothing_to_match_per_line() -> None:
    cursor = "2026-11-24T00:00:01Z"
    plan = FilterPlan(
        parse_filter(f'resource.type="ml_job" AND resource.labels.job_id="A" AND timestamp>="{cursor}"'),
        JOB_ID,
    )

    residual = plan.residual("A", {("resource", "type"): "ml_job"})
    other_type = plan.residual("A", {("resource", "type"): "gce_instance"})
    floor = timestamp_floor(residual)

    assert residual == Comparison(("timestamp",), ">=", cursor)
    assert other_type is False
    assert at_or_after(residual, floor) is True  # every line from the bisect on is at or after it
    assert at_or_after(residual, floor - 1) == residual
    assert at_or_after(Negation(Comparison(("timestamp",), ">", cursor)), floor + 1) is False


def test_timestamp_floor_takes_the_highest_of_and_and_the_lowest_of_or() -> None:
    def floor(text: str) -> float:
        node = parse_filter(text)
        assert node is not None
        return timestamp_floor(node)

    early, late = "2026-01-01T00:00:00Z", "2026-06-01T00:00:00Z"
    assert floor(f'timestamp>="{early}" AND timestamp>"{late}"') == floor(f'timestamp>="{late}"') + 0.5
    assert floor(f'timestamp>="{early}" OR timestamp>"{late}"') == floor(f'timestamp>="{early}"')
    assert floor(f'timestamp>="{early}" OR severity=ERROR') == float("-inf")
    assert floor(f'NOT timestamp<"{early}"') == float("-inf")
    assert floor('timestamp>="not a time"') == float("-inf")


# -- ml v1 jobs.list ---------------------------------------------------------------------------


def _ml_jobs(store: JobStore, count: int) -> list[str]:
    ids = [f"job_{i:04d}" for i in range(count)]
    for i, job_id in enumerate(ids):
        state = ["SUCCEEDED", "FAILED", "RUNNING"][i % 3]
        store.create(
            "proj", {"jobId": job_id, "state": state, "createTime": f"2026-01-01T00:{i // 60:02d}:00Z"}
        )
    return ids


@pytest.mark.parametrize("page_size", [7, 100])
def test_ml_list_with_a_100_id_or_filter_pages_exactly_the_named_jobs(
    service: TrainingService, page_size: int
) -> None:
    ids = _ml_jobs(service.store, 300)
    wanted = [*ids[5::3][:99], "never_created"]
    text = " OR ".join(f'jobId="{job_id}"' for job_id in wanted)

    pages = _pages(lambda token: service.list_jobs("proj", text, page_size, token), "jobs")

    listed = [job_id for page in pages for job_id in page]
    assert listed == sorted(wanted[:-1], reverse=True)  # newest first, each once, the missing one absent
    assert all(len(page) == page_size for page in pages[:-1])


@pytest.mark.parametrize(
    "text",
    [
        'jobId="job_0003" OR state=FAILED',
        "jobId:job_001*",
        'NOT jobId="job_0001" AND state!=RUNNING',
        'state=SUCCEEDED AND (jobId="job_0003" OR jobId="job_0004" OR jobId="job_0006")',
        "",
    ],
)
def test_ml_filters_that_are_not_or_of_ids_still_scan(service: TrainingService, text: str) -> None:
    _ml_jobs(service.store, 40)
    node = parse_filter(text)
    expected = [j["jobId"] for _, j in service.store.list_jobs("proj") if node is None or node.matches(j)]

    pages = _pages(lambda token: service.list_jobs("proj", text, 6, token), "jobs")

    assert [job_id for page in pages for job_id in page] == expected


def test_ml_list_answers_copies_with_queue_positions(service: TrainingService) -> None:
    body = {
        "trainingInput": {
            "region": "us-central1",
            "packageUris": ["gs://bucket/trainer-0.1.tar.gz"],
            "pythonModule": "trainer.task",
        }
    }
    for job_id in ("q1", "q2", "q3"):
        service.create_job("proj", dict(body, jobId=job_id))

    listed = service.list_jobs("proj", 'jobId="q1" OR jobId="q3"', None, None)["jobs"]
    listed[0]["state"] = "HACKED"

    assert [(j["jobId"], j["jobPosition"]) for j in listed] == [("q3", "3"), ("q1", "1")]
    assert service.store.get("proj", "q3")["state"] == "QUEUED"


# -- Vertex customJobs.list / hyperparameterTuningJobs.list -------------------------------------


def _custom(vertex: VertexJobs, label: str, display_name: str) -> str:
    body = {
        "displayName": display_name,
        "labels": {"aip_job_id": label},
        "jobSpec": {"workerPoolSpecs": [POOL]},
    }
    return str(vertex.create(CUSTOM_JOBS, "proj", "us-central1", body)["name"])


def test_vertex_label_and_display_name_filters_page_exactly_the_named_jobs(service: TrainingService) -> None:
    vertex = VertexJobs(service)
    names = [_custom(vertex, f"job_{i:03d}", f"run-{i % 10}") for i in range(120)]
    labels = " OR ".join(f'labels.aip_job_id="job_{i:03d}"' for i in range(0, 120, 7))
    shown = " OR ".join(f'display_name="run-{i}"' for i in (2, 5))

    def listed(text: str) -> list[str]:
        pages = _pages(
            lambda t: vertex.list(CUSTOM_JOBS, "proj", "us-central1", text, 4, t, None), CUSTOM_JOBS
        )
        return [name for page in pages for name in page]

    assert listed(labels) == [names[i] for i in reversed(range(0, 120, 7))]
    assert listed(shown) == [names[i] for i in reversed(range(120)) if i % 10 in (2, 5)]
    assert listed('labels.aip_job_id="job_007" AND display_name="run-7"') == [names[7]]
    assert listed('labels.aip_job_id="job_007" AND display_name="run-8"') == []
    assert vertex.list(TUNING_JOBS, "proj", "us-central1", labels, None, None, None) == {}
    slow = 'labels.aip_job_id="job_001" OR display_name="run-3"'  # two fields: a scan, same answer
    assert listed(slow) == [names[i] for i in reversed(range(120)) if i == 1 or i % 10 == 3]


def test_vertex_indexes_follow_create_update_delete_and_a_restart(
    service: TrainingService, tmp_path: Path
) -> None:
    vertex = VertexJobs(service)
    first = _custom(vertex, "mine", "shown")
    second = _custom(vertex, "mine", "other")
    number = vertex.parent("proj", "us-central1")[0]
    store = service.store

    def found(field: tuple[str, ...], value: str, on: JobStore = store) -> list[str]:
        return [view.job["resource"]["name"] for view in on.job_views([number], field, [value])]

    assert found(VERTEX_JOB_ID_LABEL_FIELD, "mine") == [first, second]
    vertex.cancel(CUSTOM_JOBS, "proj", "us-central1", first.rsplit("/", 1)[1])
    vertex.delete(CUSTOM_JOBS, "proj", "us-central1", first.rsplit("/", 1)[1])
    assert found(VERTEX_JOB_ID_LABEL_FIELD, "mine") == [second]
    assert found(VERTEX_DISPLAY_NAME_FIELD, "shown") == []
    store.update(number, second.rsplit("/", 1)[1], lambda job: job["resource"].update(displayName="renamed"))
    assert found(VERTEX_DISPLAY_NAME_FIELD, "other") == []
    assert found(VERTEX_DISPLAY_NAME_FIELD, "renamed") == [second]

    service.stop()
    again = JobStore(tmp_path / "data")
    assert found(VERTEX_JOB_ID_LABEL_FIELD, "mine", again) == [second]
    assert found(VERTEX_DISPLAY_NAME_FIELD, "renamed", again) == [second]
    assert [view.job_id for view in again.job_views([number])] == [second.rsplit("/", 1)[1]]


def test_vertex_lists_answer_copies_rendered_as_a_get(service: TrainingService) -> None:
    vertex = VertexJobs(service)
    name = _custom(vertex, "copy", "copy")
    job_id = name.rsplit("/", 1)[1]

    listed = vertex.list(CUSTOM_JOBS, "proj", "us-central1", 'labels.aip_job_id="copy"', None, None, None)
    listed[CUSTOM_JOBS][0]["labels"]["aip_job_id"] = "hacked"

    number = vertex.parent("proj", "us-central1")[0]
    assert render(service.store.get(number, job_id), with_trials=False)["labels"] == {"aip_job_id": "copy"}
    assert listed[CUSTOM_JOBS][0]["name"] == name


# -- the store's lookups -------------------------------------------------------------------------


def test_job_views_find_by_id_in_creation_order_across_projects(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    for project, job_id in [("p", "b"), ("q", "a"), ("p", "a"), ("p", "c")]:
        store.create(project, {"jobId": job_id})

    assert [(v.project, v.job_id) for v in store.job_views(["p", "q"], ("jobId",), ["a", "c", "zz"])] == [
        ("q", "a"),
        ("p", "a"),
        ("p", "c"),
    ]
    assert [v.job_id for v in store.job_views(["p"])] == ["b", "a", "c"]
    assert store.job_views(["p"], ("jobId",), []) == []
    store.delete("p", "a")
    assert [v.job_id for v in store.job_views(["p"], ("jobId",), ["a", "b"])] == ["b"]

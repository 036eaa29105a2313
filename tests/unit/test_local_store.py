"""Job records and logs on disk: atomic, reloadable, and never outside the data dir."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_aip.exceptions import JobAlreadyExistsError, JobNotFoundError, ValidationError
from airflow_aip.local.store import LOG_FILE, JobStore, safe_child, validate_project


def _job(job_id: str) -> dict[str, object]:
    return {"jobId": job_id, "state": "QUEUED", "trainingInput": {"region": "us-central1"}}


def test_records_survive_a_new_store_on_the_same_dir(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    store.create("proj", _job("a"))
    store.create("proj", _job("b"))
    store.update("proj", "a", lambda job: job.update(state="RUNNING"))
    store.set_processes("proj", "a", [{"pid": 42, "ticks": 7}])

    again = JobStore(tmp_path)

    assert again.get("proj", "a")["state"] == "RUNNING"
    assert [job["jobId"] for _, job in again.list_jobs("proj")] == ["b", "a"]
    assert [r.processes for r in again.records() if r.job_id == "a"] == [[{"pid": 42, "ticks": 7}]]
    seq, _ = again.create("proj", _job("c"))
    assert seq == 3
    assert not list(tmp_path.rglob(".job.json.*")), "no temporary files left behind"


def test_duplicate_and_missing_jobs(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    store.create("proj", _job("a"))
    with pytest.raises(JobAlreadyExistsError) as duplicate:
        store.create("proj", _job("a"))
    with pytest.raises(JobNotFoundError) as missing:
        store.get("proj", "zzz")
    store.create("other", _job("a"))  # ids are per project
    assert duplicate.value.status == 409
    assert missing.value.status == 404


def test_returned_jobs_are_copies(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    _, created = store.create("proj", _job("a"))
    created["state"] = "HACKED"
    store.get("proj", "a")["state"] = "HACKED"
    assert store.get("proj", "a")["state"] == "QUEUED"


def test_unreadable_record_is_skipped_not_fatal(tmp_path: Path) -> None:
    JobStore(tmp_path).create("proj", _job("a"))
    broken = tmp_path / "projects" / "proj" / "jobs" / "b"
    broken.mkdir(parents=True)
    (broken / "job.json").write_text("{not json")
    assert [r.job_id for r in JobStore(tmp_path).records()] == ["a"]


def test_logs_append_in_order_and_skip_a_torn_line(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    store.create("proj", _job("a"))
    store.append_log("proj", "a", [{"message": "one"}, {"message": "two"}])
    with (store.job_dir("proj", "a") / LOG_FILE).open("a") as handle:
        handle.write('{"message": "torn')
    assert [e["message"] for e in store.read_log("proj", "a")] == ["one", "two"]
    assert store.read_log("proj", "never_ran") == []


@pytest.mark.parametrize("name", ["..", ".", "", "a/b", "/etc/passwd", "a\0b", "..\\x"])
def test_safe_child_refuses_names_that_could_escape(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValidationError):
        safe_child(tmp_path, name)


def test_safe_child_accepts_a_plain_file_name(tmp_path: Path) -> None:
    assert safe_child(tmp_path, "trainer-0.1.tar.gz") == tmp_path / "trainer-0.1.tar.gz"


@pytest.mark.parametrize("project", ["my-project", "example.com:proj", "p1"])
def test_valid_projects(project: str) -> None:
    assert validate_project(project) == project


@pytest.mark.parametrize("project", ["..", "a..b", "-x", "a/b", "a b", "", "x" * 200])
def test_invalid_projects(project: str) -> None:
    with pytest.raises(ValidationError) as error:
        validate_project(project)
    assert error.value.field == "parent"

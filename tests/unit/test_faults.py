"""Fault injection: the decisions (pure) and the middleware in front of the real API app.

Requests go through the real ASGI app with FastAPI's TestClient and a service whose runner
threads are not started, so "applied" means the job record exists in the store.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_aip.exceptions import ValidationError
from airflow_aip.local.faults import (
    ConnectionDropped,
    Fault,
    FaultPlan,
    api_method,
    parse_rule,
)
from airflow_aip.local.service import TrainingService
from tests.fixtures.faults import fault_client

JOBS = "/v1/projects/proj/jobs"


def _body(job_id: str) -> dict[str, Any]:
    return {
        "jobId": job_id,
        "trainingInput": {
            "region": "us-central1",
            "packageUris": ["gs://bucket/trainer-0.1.tar.gz"],
            "pythonModule": "trainer.task",
        },
    }


@pytest.mark.parametrize(
    ("verb", "path", "method"),
    [
        ("POST", "/v1/projects/p/jobs", "jobs.create"),
        ("GET", "/v1/projects/p/jobs", "jobs.list"),
        ("GET", "/v1/projects/p/jobs/j1", "jobs.get"),
        ("POST", "/v1/projects/p/jobs/j1:cancel", "jobs.cancel"),
        ("POST", "/v2/entries:list", "entries.list"),
        ("GET", "/", None),
        ("DELETE", "/v1/projects/p/jobs/j1", None),
        ("POST", "/v1/projects/p/locations/us-central1/customJobs", "customJobs.create"),
        ("GET", "/v1/projects/p/locations/us-central1/customJobs", "customJobs.list"),
        ("GET", "/v1/projects/p/locations/us-central1/customJobs/12", "customJobs.get"),
        ("POST", "/v1/projects/p/locations/us-central1/customJobs/12:cancel", "customJobs.cancel"),
        ("DELETE", "/v1/projects/p/locations/us-central1/customJobs/12", "customJobs.delete"),
        ("POST", "/v1/projects/1/locations/eu/hyperparameterTuningJobs", "hyperparameterTuningJobs.create"),
        ("GET", "/v1/projects/1/locations/eu/hyperparameterTuningJobs/9", "hyperparameterTuningJobs.get"),
        (
            "DELETE",
            "/v1/projects/1/locations/eu/hyperparameterTuningJobs/9",
            "hyperparameterTuningJobs.delete",
        ),
    ],
)
def test_requests_map_to_api_methods(verb: str, path: str, method: str | None) -> None:
    assert api_method(verb, path) == method


@pytest.mark.parametrize(
    ("verb", "path", "query", "method"),
    [
        ("POST", "/upload/storage/v1/b/bk/o", "uploadType=multipart", "storage.objects.insert"),
        ("POST", "/upload/storage/v1/b/bk/o", "uploadType=resumable&name=a/b", "storage.objects.insert"),
        ("PUT", "/upload/storage/v1/b/bk/o", "uploadType=resumable&upload_id=u1", "storage.objects.insert"),
        ("GET", "/storage/v1/b/bk/o/a/b/c.txt", "", "storage.objects.get"),
        ("GET", "/storage/v1/b/bk/o/a/b/c.txt", "alt=media", "storage.objects.download"),
        ("GET", "/storage/v1/b/bk/o/a.txt", "generation=3&alt=media", "storage.objects.download"),
        ("GET", "/download/storage/v1/b/bk/o/a/b.txt", "alt=media", "storage.objects.download"),
        ("GET", "/storage/v1/b/bk/o", "prefix=a/", "storage.objects.list"),
        ("POST", "/storage/v1/b/bk/o/a/b/rewriteTo/b/b2/o/c/d", "", "storage.objects.rewrite"),
        ("POST", "/storage/v1/b/bk/o/a/copyTo/b/b2/o/c", "", "storage.objects.copy"),
        ("DELETE", "/storage/v1/b/bk/o/a/b", "ifGenerationMatch=5", "storage.objects.delete"),
        ("PATCH", "/storage/v1/b/bk/o/a", "", "storage.objects.patch"),
        ("GET", "/storage/v1/b/bk", "", "storage.buckets.get"),
        ("POST", "/storage/v1/b", "project=p", "storage.buckets.insert"),
        ("GET", "/storage/v1/b", "project=p", "storage.buckets.list"),
        ("PUT", "/storage/v1/b/bk/o/a", "", None),
    ],
)
def test_storage_requests_map_to_storage_methods(
    verb: str, path: str, query: str, method: str | None
) -> None:
    assert api_method(verb, path, query) == method


def test_a_rule_can_skip_calls_before_it_applies() -> None:
    plan = FaultPlan()
    plan.add([parse_rule({"method": "storage.objects.insert", "when": "after", "kind": 503, "skip": 2})])
    decided = [plan.decide("storage.objects.insert") for _ in range(4)]
    assert decided == [None, None, Fault(503, "after"), None]
    assert plan.decide("jobs.create") is None
    assert plan.rules() == []


@pytest.mark.parametrize(
    ("rule", "field"),
    [
        ({"method": "jobs.delete", "kind": 503}, "rule.method"),
        ({"kind": 503, "when": "during"}, "rule.when"),
        ({"kind": 404}, "rule.kind"),
        ({"kind": True}, "rule.kind"),
        ({"kind": 503, "count": 0}, "rule.count"),
        ({"kind": "delay"}, "rule.seconds"),
        ({"kind": 503, "colour": "red"}, "rule.colour"),
        ({"kind": 503, "skip": -1}, "rule.skip"),
        ({"method": "storage.objects.remove", "kind": 503}, "rule.method"),
        ({"kind": 503, "for_seconds": -1}, "rule.for_seconds"),
        ({"kind": 503, "for_seconds": 3601}, "rule.for_seconds"),
        ({"kind": 503, "for_seconds": "60"}, "rule.for_seconds"),
        ({"kind": 503, "for_seconds": True}, "rule.for_seconds"),
        ({"kind": 503, "for_seconds": 60, "count": 5}, "rule.count"),
        ([], "rule"),
    ],
)
def test_bad_rules_name_the_field(rule: Any, field: str) -> None:
    with pytest.raises(ValidationError) as err:
        parse_rule(rule)
    assert err.value.field == field


def test_a_timed_rule_fails_every_call_for_its_seconds_then_is_gone() -> None:
    now = [100.0]
    plan = FaultPlan(clock=lambda: now[0])
    plan.add([parse_rule({"method": "jobs.get", "kind": 503, "for_seconds": 60})])
    assert plan.rules() == [
        {
            "method": "jobs.get",
            "when": "before",
            "kind": 503,
            "count": 1,
            "seconds": 0.0,
            "skip": 0,
            "for_seconds": 60.0,
        }
    ]
    decided = [plan.decide("jobs.get") for _ in range(50)]  # no count: every call in the window
    assert decided == [Fault(503, "before")] * 50
    assert plan.decide("jobs.create") is None
    now[0] = 159.9
    assert plan.decide("jobs.get") == Fault(503, "before")
    now[0] = 160.0
    assert plan.decide("jobs.get") is None
    assert plan.rules() == []
    assert plan.stats()["faults"] == {"jobs.get": {"before:503": 51}}


def test_targeted_rules_apply_in_order_then_run_out() -> None:
    plan = FaultPlan()
    plan.add([parse_rule({"method": "jobs.create", "when": "after", "kind": "drop", "count": 2})])
    plan.add([parse_rule({"kind": "429"})])
    assert plan.decide("jobs.get") == Fault(429, "before")
    assert plan.decide("jobs.create") == Fault("drop", "after")
    assert plan.decide("jobs.create") == Fault("drop", "after")
    assert plan.decide("jobs.create") is None
    assert plan.rules() == []
    stats = plan.stats()
    assert stats["requests"] == {"jobs.get": 1, "jobs.create": 3}
    assert stats["faults"] == {"jobs.get": {"before:429": 1}, "jobs.create": {"after:drop": 2}}
    assert stats["faults_injected"] == 3


def test_random_faults_follow_the_rate_and_the_seed() -> None:
    never, always = FaultPlan(0.0, seed=1), FaultPlan(1.0, seed=1)
    assert [never.decide("jobs.get") for _ in range(50)] == [None] * 50
    drawn = [always.decide("jobs.get") for _ in range(200)]
    assert all(fault is not None for fault in drawn)
    assert {f.kind for f in drawn if f} == {429, 500, 503, "drop", "reset"}
    assert {f.when for f in drawn if f} == {"before", "after"}
    first, again = FaultPlan(0.2, seed=7), FaultPlan(0.2, seed=7)
    assert [first.decide("jobs.get") for _ in range(50)] == [again.decide("jobs.get") for _ in range(50)]
    plan = FaultPlan(0.2, seed=11)
    hits = sum(plan.decide("jobs.get") is not None for _ in range(2000))
    assert 300 < hits < 500  # binomial(2000, 0.2): mean 400, sd 18


def test_rate_outside_zero_one_is_refused() -> None:
    with pytest.raises(ValidationError) as err:
        FaultPlan(1.5)
    assert err.value.field == "fault_rate"


def test_fault_before_never_reaches_the_service(service: TrainingService) -> None:
    plan = FaultPlan()
    plan.add([parse_rule({"method": "jobs.create", "when": "before", "kind": 503})])
    client = fault_client(service, plan)
    answer = client.post(JOBS, json=_body("j_before"))
    assert answer.status_code == 503
    assert answer.json()["error"]["status"] == "UNAVAILABLE"
    assert client.get(f"{JOBS}/j_before").status_code == 404
    assert client.get("/_stats").json()["created"] == 0


@pytest.mark.parametrize("kind", [429, 500, 503])
def test_fault_after_applies_the_create_but_answers_an_error(service: TrainingService, kind: int) -> None:
    plan = FaultPlan()
    plan.add([parse_rule({"method": "jobs.create", "when": "after", "kind": kind})])
    client = fault_client(service, plan)
    answer = client.post(JOBS, json=_body("j_after"))
    assert answer.status_code == kind
    assert client.get(f"{JOBS}/j_after").json()["state"] == "QUEUED"
    retry = client.post(JOBS, json=_body("j_after"))
    assert retry.status_code == 409
    stats = client.get("/_stats").json()
    assert stats["created"] == 1
    assert stats["answers"]["jobs.create"] == {"200": 1, "409": 1}


def test_drop_without_a_server_transport_raises(service: TrainingService) -> None:
    plan = FaultPlan()
    plan.add([parse_rule({"method": "jobs.create", "when": "after", "kind": "drop"})])
    client = fault_client(service, plan)
    with pytest.raises(ConnectionDropped):
        client.post(JOBS, json=_body("j_drop"))
    assert client.get(f"{JOBS}/j_drop").status_code == 200


def test_delay_after_still_answers(service: TrainingService) -> None:
    plan = FaultPlan()
    plan.add([parse_rule({"method": "jobs.get", "when": "after", "kind": "delay", "seconds": 0.01})])
    client = fault_client(service, plan)
    assert client.post(JOBS, json=_body("j_delay")).status_code == 200
    assert client.get(f"{JOBS}/j_delay").json()["jobId"] == "j_delay"


def test_admin_routes(service: TrainingService) -> None:
    closed = fault_client(service, FaultPlan(), admin=False)
    assert closed.post("/_faults", json={"kind": 503}).status_code == 403
    assert closed.get("/_faults").json() == {"rules": []}
    assert closed.get("/_stats").status_code == 200

    client = fault_client(service, FaultPlan())
    listed = client.post("/_faults", json={"rules": [{"kind": 503}, {"kind": "reset", "when": "after"}]})
    assert [r["kind"] for r in listed.json()["rules"]] == [503, "reset"]
    bad = client.post("/_faults", json={"kind": 404})
    assert bad.status_code == 400
    assert "rule.kind" in bad.json()["error"]["message"]
    assert client.delete("/_faults").json() == {"rules": []}
    assert client.put("/_faults").status_code == 405
    # Paths outside the API (the health check) never fail.
    always = fault_client(service, FaultPlan(1.0))
    assert always.get("/").status_code == 200


# The client side (is a job behind a lost create answer ours?) is the model's adoption rule:
# tests/unit/test_jobs_adoption.py, and over the hook tests/unit/test_submission.py.


def test_serve_flags_and_their_variables(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from airflow_aip.local.cli import build_parser, main

    args = build_parser().parse_args(["serve", "--fault-rate", "0.2", "--fault-seed", "3"])
    assert (args.fault_rate, args.fault_seed, args.fault_admin) == (0.2, 3, False)
    assert build_parser().parse_args(["serve"]).fault_rate == 0.0  # off unless asked for
    monkeypatch.setenv("AIP_LOCAL_FAULT_RATE", "0.5")
    monkeypatch.setenv("AIP_LOCAL_FAULT_ADMIN", "1")
    from_env = build_parser().parse_args(["serve"])
    assert (from_env.fault_rate, from_env.fault_admin) == (0.5, True)
    assert main(["serve", "--fault-rate", "1.5"]) == 2
    assert "--fault-rate" in capsys.readouterr().err

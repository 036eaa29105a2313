"""``GET /_stats?project=P`` counts P's requests alone, so a test that shares the service with
other tests (the e2e tier's one stack) can count its own calls."""

from __future__ import annotations

from airflow_aip.local.faults import FaultPlan
from airflow_aip.local.service import TrainingService
from airflow_aip.local.store import project_number
from tests.fixtures.faults import fault_client


def test_requests_are_counted_per_project_from_the_path_and_the_logging_body(
    service: TrainingService,
) -> None:
    client = fault_client(service, FaultPlan())
    for project in ("mine", project_number("mine"), "theirs"):  # Vertex AI names it by its number
        client.get(f"/v1/projects/{project}/locations/us-central1/customJobs")
    client.get("/v1/projects/mine/jobs")
    client.post("/v2/entries:list", json={"resourceNames": ["projects/mine"], "filter": ""})
    client.post("/v2/entries:list", json={"resourceNames": ["projects/theirs"]})

    mine = client.get("/_stats", params={"project": "mine"}).json()
    theirs = client.get("/_stats", params={"project": "theirs"}).json()
    everyone = client.get("/_stats").json()

    assert mine == {"project": "mine", "requests": {"customJobs.list": 2, "jobs.list": 1, "entries.list": 1}}
    assert theirs["requests"] == {"customJobs.list": 1, "entries.list": 1}
    assert everyone["requests"] == {"customJobs.list": 3, "jobs.list": 1, "entries.list": 2}

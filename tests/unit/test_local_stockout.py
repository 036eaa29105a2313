"""A rung out of capacity on purpose: a strategy's stockout, who may ask for it, the refusal on Google."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from airflow_aip.exceptions import ValidationError
from airflow_aip.hooks.local_capacity import set_local_stockouts
from airflow_aip.local.api import create_app
from airflow_aip.local.capacity import CapacitySettings, RegionCapacity
from airflow_aip.local.capacity_admin import parse_stockout
from airflow_aip.local.capacity_needs import needs_of
from airflow_aip.local.service import ServiceConfig, TrainingService
from tests.fixtures.capacity import job_record, machine_pool


def test_a_strategy_stockout_stops_that_strategys_jobs_only() -> None:
    """us-central1:SPOT: no Spot VMs to give; a STANDARD job (or one naming none) still runs."""
    assert parse_stockout("us-central1:SPOT") == ("us-central1", "SPOT")
    capacity = RegionCapacity(CapacitySettings(stockouts=(("us-central1", "SPOT"),)))
    assert capacity.stocked_out(needs_of(job_record(machine_pool(), strategy="SPOT"))) == "SPOT"
    assert capacity.stocked_out(needs_of(job_record(machine_pool(), strategy="STANDARD"))) is None
    assert capacity.stocked_out(needs_of(job_record(machine_pool()))) is None
    standard = RegionCapacity(CapacitySettings(stockouts=(("us-central1", "STANDARD"),)))
    assert (
        standard.stocked_out(needs_of(job_record(machine_pool()))) == "STANDARD"
    )  # Vertex AI's default strategy
    with pytest.raises(ValidationError, match="no machine or accelerator type"):
        parse_stockout("us-central1:SPOTS")


def _service(tmp_path: Path, *, loopback_admin: bool = False) -> TrainingService:
    config = ServiceConfig(tmp_path / "data", storage_url=None, capacity_admin_loopback=loopback_admin)
    return TrainingService(config)


@pytest.fixture
def loopback_admin(tmp_path: Path) -> Iterator[TrainingService]:
    service = _service(tmp_path, loopback_admin=True)
    yield service
    service.stop()


@pytest.mark.parametrize(
    ("client", "status"),
    [(("127.0.0.1", 5000), 200), (("::1", 5000), 200), (("10.0.0.7", 5000), 403), (("testclient", 1), 403)],
)
def test_capacity_admin_takes_changes_from_this_machine_only(
    loopback_admin: TrainingService, client: tuple[str, int], status: int
) -> None:
    """--capacity-admin (make ui, make demo): a task on this machine may change the region; no one else."""
    http = TestClient(create_app(loopback_admin), client=client)
    answer = http.post("/_capacity", json={"stockouts": ["us-central1:SPOT"]})
    assert answer.status_code == status
    expected = ["us-central1:SPOT"] if status == 200 else []
    assert loopback_admin.capacity.snapshot()["stockouts"] == expected
    assert http.get("/_capacity").status_code == 200  # reading is never refused


def test_without_an_admin_flag_every_change_is_refused_even_from_loopback(tmp_path: Path) -> None:
    service = _service(tmp_path)
    try:
        http = TestClient(create_app(service), client=("127.0.0.1", 5000))
        refused = http.post("/_capacity", json={"stockouts": ["us-central1:SPOT"]})
        assert refused.status_code == 403
        assert "--capacity-admin" in refused.json()["error"]["message"]
        assert http.delete("/_capacity").status_code == 403
        assert service.capacity.snapshot()["stockouts"] == []
    finally:
        service.stop()


def test_on_google_a_stockout_is_refused_naming_the_param_and_nothing_is_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM", raising=False)
    monkeypatch.setenv("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", '{"conn_type": "google_cloud_platform"}')
    sent: list[Any] = []
    monkeypatch.setattr("airflow_aip.hooks.vertex.VertexJobHook.request", lambda *a, **k: sent.append(a))
    with pytest.raises(ValidationError) as refused:
        set_local_stockouts(["SPOT"], project_id="my-project", region="us-central1")
    assert refused.value.field == "local_stockout"
    assert "on Google Cloud" in refused.value.rule
    assert set_local_stockouts([], project_id="my-project", region="us-central1") == []  # nothing to undo
    with pytest.raises(ValidationError, match="among STANDARD, SPOT, FLEX_START"):
        set_local_stockouts(["spot"], project_id="my-project", region="us-central1")
    assert sent == []


def test_a_change_of_one_regions_stockouts_keeps_what_others_set_meanwhile(
    loopback_admin: TrainingService,
) -> None:
    """Runs in two regions at once (and a test's own A100 stockout) each keep theirs: a change is
    one step on the service, never a read and then a whole set written back."""
    http = TestClient(create_app(loopback_admin), client=("127.0.0.1", 5000))
    http.post("/_capacity", json={"stockouts": ["us-central1:NVIDIA_TESLA_A100"]}).raise_for_status()
    change = {"stockoutsAdded": ["us-west1:SPOT"], "stockoutsRemoved": ["us-west1:STANDARD"]}
    assert http.post("/_capacity", json=change).json()["stockouts"] == [
        "us-central1:NVIDIA_TESLA_A100",
        "us-west1:SPOT",
    ]
    refused = http.post("/_capacity", json={"stockoutsRemoved": ["us-west1:SPOT"], "stockoutsAdded": ["x"]})
    assert refused.status_code == 400
    assert "stockouts_added" in refused.json()["error"]["message"]  # Google's words name fields so
    assert http.post("/_capacity", json={"stockoutsRemoved": ["us-west1:SPOT"]}).json()["stockouts"] == [
        "us-central1:NVIDIA_TESLA_A100"
    ]

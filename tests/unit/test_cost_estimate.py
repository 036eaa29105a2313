"""The price table's rate rules, the one estimate, and three jobs checked by hand against Google's page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_aip.jobs.cost import estimate, total, worst_case
from airflow_aip.jobs.pricing import PriceTable
from airflow_aip.jobs.vertex.view import view_from_vertex

SNAPSHOT = PriceTable.load()

# Published figures, written here apart from the table so a wrong row fails (the table's `sources`
# say where each was seen): us-central1, USD per hour.
# - n1-standard-4 on demand: Vertex AI's pricing page, custom-trained models ($0.21849885).
# - A bill of a3-highgpu-8g + 8 x H100 80GB + a 2,000 GB pd-ssd boot disk, SKU by SKU: $101.5429684 an
#   hour on demand, $52.0306163 with Flex-Start (Compute Engine's DWS SKUs + Vertex AI's fee).
# - pd-ssd: Vertex AI's own SKU, $0.1955 per GB-month / 730.
PAGE = {"n1-standard-4": 0.21849885}
A3_H100_HOUR = {"STANDARD": 101.5429684, "FLEX_START": 52.0306163}
PD_SSD_PER_GB_HOUR = 0.1955 / 730


def job(
    machine: str,
    gpu: str | None = None,
    count: int = 0,
    *,
    start: str | None = "2026-01-01T00:00:00Z",
    end: str | None = "2026-01-01T01:00:00Z",
    state: str = "JOB_STATE_SUCCEEDED",
    replicas: int = 1,
    strategy: str | None = None,
    region: str = "us-central1",
    disk_gb: int = 100,
    **extra: Any,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"machineType": machine}
    if gpu:
        spec.update(acceleratorType=gpu, acceleratorCount=count)
    pool = {"machineSpec": spec, "replicaCount": str(replicas), "diskSpec": {"bootDiskSizeGb": disk_gb}}
    job_spec: dict[str, Any] = {"workerPoolSpecs": [pool]}
    if strategy:
        job_spec["scheduling"] = {"strategy": strategy, "timeout": "3600s"}
    resource = {
        "name": f"projects/p/locations/{region}/customJobs/1",
        "displayName": "j1",
        "state": state,
        "startTime": start,
        "endTime": end,
        "jobSpec": job_spec,
        **extra,
    }
    return view_from_vertex(
        {k: v for k, v in resource.items() if v is not None}, project_id="p", region=region
    )


def test_n1_standard_4_by_hand_against_the_page() -> None:
    got = estimate(job("n1-standard-4", end="2026-01-01T02:00:00Z"), SNAPSHOT)
    assert got.amount == pytest.approx((PAGE["n1-standard-4"] + 100 * PD_SSD_PER_GB_HOUR) * 2, rel=1e-6)
    assert got.currency == "USD"
    assert got.table_date == SNAPSHOT.date


@pytest.mark.parametrize("strategy", ["STANDARD", "FLEX_START"])
def test_eight_h100s_by_hand_against_a_bill(strategy: str) -> None:
    view = job(
        "a3-highgpu-8g", "NVIDIA_H100_80GB", 8, end="2026-01-01T00:30:00Z", disk_gb=2000, strategy=strategy
    )
    got = estimate(view, SNAPSHOT)
    assert got.amount == pytest.approx(A3_H100_HOUR[strategy] / 2, rel=1e-6)
    if strategy == "FLEX_START":
        assert got.standard == pytest.approx(A3_H100_HOUR["STANDARD"] / 2, rel=1e-6)


def test_every_row_says_how_it_is_known_and_a_sourced_one_where() -> None:
    data = json.loads(Path(SNAPSHOT.path).read_text())
    keys = SNAPSHOT.row_keys()
    assert set(data["provenance"]) == set(keys)  # no row unmarked, no mark without a row
    for key, row in data["provenance"].items():
        assert row["status"] in ("sourced", "derived", "unverified"), key
        if row["status"] != "unverified":
            source = data["sources"][row["source"]]
            assert source["url"].startswith("https://"), key
            assert source["seen"], key
    assert SNAPSHOT.provenance("us-central1/machines/n1-standard-4") == "sourced"
    assert SNAPSHOT.provenance("us-central1/accelerators/NVIDIA_TESLA_T4") == "unverified"
    assert SNAPSHOT.provenance("europe-west4/machines/n1-standard-4") == "unverified"  # no such row
    assert all(price > 0 for price in _prices(data["regions"]))


def _prices(node: Any) -> list[float]:
    if isinstance(node, dict):
        return [price for child in node.values() for price in _prices(child)]
    return [float(node)]


def test_the_snapshot_says_its_source_date_and_that_it_was_not_fetched() -> None:
    data = json.loads(Path(SNAPSHOT.path).read_text())
    assert data["source"]["page"].startswith("https://cloud.google.com/vertex-ai/pricing")
    assert "NOT fetched from the Billing Catalog API" in data["source"]["how"]
    assert SNAPSHOT.increment == 30


def test_replicas_multiply_and_time_is_billed_in_increments() -> None:
    two = estimate(job("n1-standard-4", replicas=2, end="2026-01-01T00:01:01Z"), SNAPSHOT)
    one_rate = PAGE["n1-standard-4"] + 100 * PD_SSD_PER_GB_HOUR
    assert two.seconds == 90  # 61 s billed as three 30-second increments
    assert two.amount == pytest.approx(2 * one_rate * 90 / 3600)


@pytest.mark.parametrize(
    ("view", "named"),
    [
        (job("n9-imaginary-4"), "machine n9-imaginary-4 in us-central1"),
        (job("n1-standard-4", "NVIDIA_B300", 1), "accelerator NVIDIA_B300 in us-central1"),
        (job("n1-standard-4", region="me-central2"), "machine n1-standard-4 in me-central2"),
        (job("n1-standard-4", strategy="SPOT"), "spot machine n1-standard-4 in us-central1"),
        (job("n1-standard-4", strategy="FLEX_START"), "flex-start machine n1-standard-4 in us-central1"),
    ],
)
def test_an_unknown_price_names_its_row_and_gives_no_figure(view: dict[str, Any], named: str) -> None:
    got = estimate(view, SNAPSHOT)
    assert got.amount is None
    assert named in got.unknown
    assert named in got.text()
    assert "no estimate" in got.text()


def _table(tmp_path: Path, **regional: Any) -> PriceTable:
    data = json.loads(Path(SNAPSHOT.path).read_text())
    data["regions"]["us-central1"].update(regional)
    path = tmp_path / "table.json"
    path.write_text(json.dumps(data))
    return PriceTable.load(path)


def test_spot_uses_its_rows_and_shows_the_standard_equivalent(tmp_path: Path) -> None:
    table = _table(tmp_path, spot={"machines": {"n1-standard-4": 0.05}, "accelerators": {}})
    got = estimate(job("n1-standard-4", strategy="SPOT"), table)
    disk = 100 * PD_SSD_PER_GB_HOUR
    assert got.amount == pytest.approx(0.05 + disk)
    assert got.standard == pytest.approx(PAGE["n1-standard-4"] + disk)
    assert "saved" in got.text()


def test_a_reservation_counts_at_the_on_demand_rows() -> None:
    view = job("n1-standard-4", strategy="SPOT")
    view["usage"]["reserved"] = True
    assert estimate(view, SNAPSHOT).amount == pytest.approx(PAGE["n1-standard-4"] + 100 * PD_SSD_PER_GB_HOUR)


def test_a_running_job_is_estimated_to_now_and_a_queued_one_costs_nothing() -> None:
    running = job("n1-standard-4", end=None, state="JOB_STATE_RUNNING")
    now = 1767225600.0 + 1800  # 2026-01-01T00:30:00Z
    assert estimate(running, SNAPSHOT, now).seconds == 1800
    assert estimate(running, SNAPSHOT).amount is None  # no clock: it has not ended
    queued = estimate(job("n1-standard-4", start=None, end=None, state="JOB_STATE_QUEUED"), SNAPSHOT, now)
    assert queued.amount == 0.0


def test_missing_times_give_no_estimate_and_say_why() -> None:
    got = estimate(job("n1-standard-4", end=None), SNAPSHOT, 1767225600.0 + 60)
    assert got.amount is None
    assert "endTime is missing" in got.missing


def _tuning(trials: list[dict[str, Any]], state: str = "JOB_STATE_SUCCEEDED") -> dict[str, Any]:
    resource = {
        "name": "projects/p/locations/us-central1/hyperparameterTuningJobs/7",
        "displayName": "t1",
        "state": state,
        "startTime": "2026-01-01T00:00:00Z",
        "maxTrialCount": 4,
        "parallelTrialCount": 2,
        "studySpec": {"metrics": [{"metricId": "acc", "goal": "MAXIMIZE"}], "parameters": []},
        "trialJobSpec": {
            "workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1}]
        },
        "trials": trials,
    }
    return view_from_vertex(resource, project_id="p", region="us-central1")


def test_a_tuning_job_sums_its_trials_each_by_its_own_times() -> None:
    trials = [
        {
            "id": "1",
            "state": "SUCCEEDED",
            "startTime": "2026-01-01T00:00:00Z",
            "endTime": "2026-01-01T00:30:00Z",
        },
        {
            "id": "2",
            "state": "SUCCEEDED",
            "startTime": "2026-01-01T00:10:00Z",
            "endTime": "2026-01-01T01:10:00Z",
        },
        {"id": "3", "state": "REQUESTED"},  # never started: not billed
    ]
    got = estimate(_tuning(trials), SNAPSHOT)
    assert got.seconds == 5400
    assert got.amount == pytest.approx((PAGE["n1-standard-4"] + 100 * PD_SSD_PER_GB_HOUR) * 1.5)


def test_a_tuning_job_without_trials_yet_has_spent_nothing() -> None:
    assert estimate(_tuning([], "JOB_STATE_RUNNING"), SNAPSHOT, 1.8e9).amount == 0.0


def test_a_ladder_sums_its_rungs_and_a_hole_leaves_no_total() -> None:
    rungs = [estimate(job("n1-standard-4"), SNAPSHOT), estimate(job("n1-standard-8"), SNAPSHOT)]
    assert total(rungs, SNAPSHOT).amount == pytest.approx(sum(r.amount or 0 for r in rungs))
    holed = total([*rungs, estimate(job("n1-standard-4", strategy="SPOT"), SNAPSHOT)], SNAPSHOT)
    assert holed.amount is None
    assert "spot machine" in holed.text()


def test_an_estimate_names_the_rates_no_source_confirms() -> None:
    sourced = estimate(job("n1-standard-4"), SNAPSHOT)  # machine and pd-ssd both sourced
    assert sourced.unverified == ()
    assert "unverified" not in sourced.text()
    guessed = estimate(job("n1-standard-8", "NVIDIA_TESLA_T4", 1), SNAPSHOT)
    assert guessed.unverified == (
        "machine n1-standard-8 in us-central1",
        "accelerator NVIDIA_TESLA_T4 in us-central1",
    )
    rows = "machine n1-standard-8 in us-central1, accelerator NVIDIA_TESLA_T4 in us-central1"
    assert guessed.text().endswith(f"; unverified rates: {rows})")
    assert type(guessed).from_json(guessed.to_json()).unverified == guessed.unverified  # kept in XCom
    ladder = total([sourced, guessed, guessed], SNAPSHOT)
    assert ladder.to_json()["unverified"] == list(guessed.unverified)  # once each, in order
    assert "unverified rates: machine n1-standard-8" in ladder.text()


def test_the_worst_case_is_every_trial_until_the_timeout() -> None:
    usage = _tuning([])["usage"]
    usage["timeout_seconds"] = 7200.0
    got = worst_case(usage, "us-central1", SNAPSHOT)
    assert got.amount == pytest.approx((PAGE["n1-standard-4"] + 100 * PD_SSD_PER_GB_HOUR) * 2 * 4)
    assert worst_case(None, "us-central1", SNAPSHOT).amount is None


def test_a_file_that_is_not_a_table_is_a_validation_error(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{}")
    from airflow_aip.exceptions import ValidationError

    with pytest.raises(ValidationError, match="price_table"):
        PriceTable.load(tmp_path / "bad.json")


@pytest.mark.parametrize("kind", ["customJobs", "hyperparameterTuningJobs"])
def test_a_watch_lists_only_what_the_wait_and_the_guard_read(kind: str) -> None:
    """The poll's readMask (Vertex AI's field names, checked by the local service's rule) keeps the
    view the wait and the estimate read: its state, times, output dir and usage."""
    from airflow_aip.jobs.vertex.view import WATCHED_FIELDS
    from airflow_aip.local.vertex.render import apply_read_mask

    schema = {"customJobs": "GoogleCloudAiplatformV1CustomJob"}.get(
        kind, "GoogleCloudAiplatformV1HyperparameterTuningJob"
    )
    full = job("n1-standard-4", "NVIDIA_TESLA_T4", 1)["spec"]
    if kind != "customJobs":
        full = {**full, "trialJobSpec": full.pop("jobSpec"), "studySpec": {"metrics": []}, "maxTrialCount": 2}
    full["jobSpec" if kind == "customJobs" else "trialJobSpec"]["baseOutputDirectory"] = {
        "outputUriPrefix": "gs://b/o"
    }
    full["encryptionSpec"] = {"kmsKeyName": "k"}
    masked = apply_read_mask(full, WATCHED_FIELDS[kind], schema)
    assert "encryptionSpec" not in masked
    region = "us-central1"
    before = view_from_vertex(full, project_id="p", region=region)
    after = view_from_vertex(masked, project_id="p", region=region)
    for key in ("state", "start_time", "end_time", "usage", "output_dir", "labels", "job_id"):
        assert after[key] == before[key], key

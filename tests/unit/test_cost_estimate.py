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

# Figures as Google's page shows them (https://cloud.google.com/vertex-ai/pricing, custom-trained
# models, us-central1, USD per hour), written here apart from the table so a wrong row fails.
PAGE = {
    "n1-standard-4": 0.218499,
    "n1-standard-8": 0.436998,
    "n1-standard-16": 0.873996,
    "NVIDIA_TESLA_T4": 0.4025,
    "NVIDIA_TESLA_V100": 2.852,
    "NVIDIA_TESLA_P100": 1.679,
}
PD_SSD_PER_GB_HOUR = 0.17 / 730  # Compute Engine's pd-ssd, USD per GB-month / 730 hours


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
    **extra: Any,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"machineType": machine}
    if gpu:
        spec.update(acceleratorType=gpu, acceleratorCount=count)
    job_spec: dict[str, Any] = {"workerPoolSpecs": [{"machineSpec": spec, "replicaCount": str(replicas)}]}
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


@pytest.mark.parametrize(
    ("machine", "gpu", "count", "hours"),
    [
        ("n1-standard-4", "NVIDIA_TESLA_T4", 1, 1.0),
        ("n1-standard-8", "NVIDIA_TESLA_V100", 1, 2.0),
        ("n1-standard-16", "NVIDIA_TESLA_P100", 4, 0.5),
    ],
)
def test_three_jobs_by_hand_against_the_page(machine: str, gpu: str, count: int, hours: float) -> None:
    end = f"2026-01-01T{int(hours):02d}:{int(hours % 1 * 60):02d}:00Z"
    by_hand = (PAGE[machine] + count * PAGE[gpu] + 100 * PD_SSD_PER_GB_HOUR) * hours
    got = estimate(job(machine, gpu, count, end=end), SNAPSHOT)
    assert got.amount == pytest.approx(by_hand, rel=1e-6)
    assert got.currency == "USD"
    assert got.table_date == SNAPSHOT.date


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

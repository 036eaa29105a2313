"""What the console says about a job and a model version (rendered in Chromium: test_console_pages.py)."""

from __future__ import annotations

from airflow_aip.local.console import ConsoleJob, render_job, render_model
from airflow_aip.local.console_facts import display_name, job_facts, labels_html, metric_fact, version_metric
from tests.fixtures.console_records import TUNING_RECORD, VERSIONS


def test_a_vertex_job_says_its_name_strategy_machine_args_and_best_metric() -> None:
    facts = dict(job_facts(TUNING_RECORD))

    assert display_name(TUNING_RECORD) == "aip_training_pipeline-tune-manual__2026-11-23"
    assert (facts["Strategy"], facts["Machine"]) == ("SPOT", "n1-standard-4")
    assert facts["Trainer"].startswith("python -m trainer.task on us-docker.pkg.dev/")
    assert facts["Args"].endswith("train.csv --max-iter=200")
    assert facts["Metric"] == "accuracy 0.9778 (MAXIMIZE), best of trial 2"


def test_an_ml_v1_single_job_says_why_it_has_no_metric() -> None:
    record = {
        "jobId": "iris_train_1",
        "trainingInput": {"scaleTier": "CUSTOM", "masterType": "n1-highmem-8", "args": ["--epochs", "3"]},
    }
    facts = dict(job_facts(record))

    assert (display_name(record), facts["Strategy"], facts["Machine"], facts["Args"]) == (
        "iris_train_1",
        "scale tier CUSTOM",
        "n1-highmem-8",
        "--epochs 3",
    )
    assert metric_fact(record).startswith("— (a single job reports no metric to this service")


def test_the_job_page_names_the_job_first_and_has_no_empty_header_row() -> None:
    name = TUNING_RECORD["resource"]["name"]
    html = render_job(
        ConsoleJob(name, "Vertex AI hyperparameter tuning job", "JOB_STATE_SUCCEEDED", TUNING_RECORD, [])
    )

    assert html.index("<h1>aip_training_pipeline-tune-manual__2026-11-23</h1>") < html.index(
        TUNING_RECORD["jobId"]
    )
    assert "<th></th>" not in html
    assert '<th scope="row">Strategy</th><td>SPOT</td>' in html
    assert "<td>C=34.63, kernel=rbf</td><td>0.9333</td>" in html  # one number format


def test_a_model_version_shows_its_metric_and_compact_labels() -> None:
    assert [version_metric(v) for v in VERSIONS] == ["accuracy 0.91", "accuracy 0.92"]
    assert version_metric({"versionDescription": "Job j: no metric."}) == "—"
    chips = labels_html(VERSIONS[0]["labels"])
    assert f'title="aip_model_src={"f" * 63}"' in chips
    assert f">aip_model_src={'f' * 24}…<" in chips
    html = render_model(VERSIONS)
    assert '<td><span class="nowrap">accuracy 0.92</span></td>' in html
    assert html.count('class="uri"') >= 5  # the model's name, and each version's artifact and image

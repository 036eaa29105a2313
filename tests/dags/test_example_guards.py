"""The example DAGs stop a run that cannot work before it writes anything, in one line naming the field.

A missing bucket and a hand-triggered retraining with nothing to train on used to fail late,
after other tasks had run, in a long traceback; these tests hold them to the first task.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.fixtures.local_service import LocalService, storage_client

pytestmark = pytest.mark.dags

DAGS = Path(__file__).resolve().parents[2] / "dags"


@pytest.fixture
def examples(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(DAGS))
    import aip_examples
    import aip_examples.retraining

    return aip_examples


def test_a_missing_bucket_is_one_line_naming_it(examples: Any, local_env: LocalService) -> None:
    from airflow_aip.compat import AirflowFailException

    name = f"no-such-{uuid.uuid4().hex[:8]}"
    with pytest.raises(AirflowFailException) as raised:
        examples.require_bucket(name, "bucket")
    message = str(raised.value)
    assert message.startswith(f"bucket: bucket {name} does not exist.")
    assert "\n" not in message
    assert storage_client(local_env.gcs_url).lookup_bucket(name) is None  # the check created nothing
    existing = storage_client(local_env.gcs_url).create_bucket(f"aip-guard-{uuid.uuid4().hex[:8]}")
    examples.require_bucket(existing.name)  # no error


def test_pipeline_with_a_missing_bucket_stops_before_staging_or_submitting(
    dags: dict[str, Any], local_env: LocalService, airflow_db: Path
) -> None:
    name = f"no-such-{uuid.uuid4().hex[:8]}"
    jobs_before = _all_jobs(local_env)
    run = dags["aip_training_pipeline"].test(run_conf={"bucket": name, "max_trials": 1})
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert states["prepare_data"] == "failed"
    assert states["stage_trainer"] == "upstream_failed"
    assert states["tune"] == "upstream_failed"
    assert storage_client(local_env.gcs_url).lookup_bucket(name) is None
    assert _all_jobs(local_env) == jobs_before  # no job submitted, on either API


def _all_jobs(service: LocalService) -> list[str]:
    """The names of every job of the example project, ml v1 and Vertex AI alike."""
    import httpx

    vertex = "v1/projects/local-project/locations/us-central1"
    paths = {
        "v1/projects/local-project/jobs": "jobs",
        f"{vertex}/customJobs": "customJobs",
        f"{vertex}/hyperparameterTuningJobs": "hyperparameterTuningJobs",
    }
    names = []
    for path, key in paths.items():
        page = httpx.get(service.url + path, params={"pageSize": 100}, timeout=30).raise_for_status().json()
        names += [job.get("jobId") or job["name"] for job in page.get(key, [])]
    return sorted(names)


def _event(train: str, evaluation: str) -> Any:
    return SimpleNamespace(extra={"train": train, "eval": evaluation, "seed": 1})


def test_retraining_by_hand_uses_the_newest_landed_data(examples: Any) -> None:
    pick = examples.retraining.pick_training_data
    newest = [_event("gs://b/new/train.csv", "gs://b/new/eval.csv")]
    chosen = pick({}, [], lambda: newest)
    assert (chosen["train"], chosen["eval"]) == ("gs://b/new/train.csv", "gs://b/new/eval.csv")
    assert "newest" in chosen["source"]
    triggered = pick({}, [_event("gs://b/t/train.csv", "gs://b/t/eval.csv")], lambda: newest)
    assert triggered["train"] == "gs://b/t/train.csv"
    given = {"train_data": "gs://b/x/train.csv", "eval_data": "gs://b/x/eval.csv"}
    assert pick(given, [], lambda: newest)["eval"] == "gs://b/x/eval.csv"


def test_retraining_with_nothing_to_train_on_says_what_to_do(examples: Any) -> None:
    rules = examples.retraining
    asked: list[bool] = []

    def nothing() -> list[Any]:
        asked.append(True)
        return []

    with pytest.raises(rules.NoTrainingDataError) as raised:
        rules.pick_training_data({"train_data": None, "eval_data": None}, [], nothing)
    assert asked == [True]
    message = str(raised.value)
    assert message.startswith("train_data/eval_data:")
    assert "Trigger aip_prepare_data first" in message
    assert "\n" not in message
    with pytest.raises(rules.NoTrainingDataError, match=r"^eval_data: give both"):
        rules.pick_training_data({"train_data": "gs://b/t.csv"}, [], nothing)


def test_retraining_form_checks_the_data_before_staging(dags: dict[str, Any]) -> None:
    """Staging (the first write) waits for new_data, whose check raises the one-line message."""
    dag = dags["aip_retraining"]
    assert "new_data" in dag.get_task("stage_trainer").upstream_task_ids
    params = dag.params
    for name in ("train_data", "eval_data"):  # optional in the form: the newest data is used
        assert "null" in params.get_param(name).schema["type"]
    for name in ("project_id", "region", "C", "max_iter"):  # required: the form marks them
        assert "null" not in params.get_param(name).schema["type"]


def test_every_example_dag_and_param_explains_itself(dags: dict[str, Any]) -> None:
    examples = {k: v for k, v in dags.items() if k.startswith("aip_")}
    assert set(examples) == {
        "aip_container_pipeline",
        "aip_prepare_data",
        "aip_retraining",
        "aip_rollback_champion",
        "aip_training_pipeline",
    }
    for dag_id, dag in examples.items():
        assert dag.description, dag_id
        assert dag.doc_md, dag_id
        assert "w/ config" not in dag.doc_md
        for name in dag.params:
            param = dag.params.get_param(name)
            assert param.schema.get("title"), (dag_id, name)
            assert param.description, (dag_id, name)


def test_retraining_triggered_by_hand_trains_on_the_newest_landed_data(
    dags: dict[str, Any], example_bucket: Any, airflow_db: Path
) -> None:
    """What a newcomer tries first: Trigger on aip_retraining with an empty form, after data landed."""
    landed = dags["aip_prepare_data"].test()
    assert str(landed.state) == "success"
    newest = landed.get_task_instance("land_new_data").xcom_pull(task_ids="land_new_data")

    run = dags["aip_retraining"].test()  # by hand: no Asset event triggered it, no CSVs in the form
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert states["new_data"] == "success", states
    chosen = run.get_task_instance("new_data").xcom_pull(task_ids="new_data")
    assert (chosen["train"], chosen["eval"]) == (newest["train"], newest["eval"])
    assert states["train"] == "success", states


def test_the_forms_give_the_bucket_rule_and_say_what_each_field_is_on_vertex_ai(dags: dict[str, Any]) -> None:
    """The trigger form is where a newcomer meets these fields, so it must answer their questions.

    The bucket's description gives the naming rule its pattern enforces (the same names pass
    both); region, runtime and Python version say what they become on Vertex AI, the default
    backend, and the container they name is the one the translation picks for them.
    """
    import re

    from airflow_aip.jobs.vertex.machines import executor_image

    bucket = dags["aip_training_pipeline"].params.get_param("bucket")
    rule = bucket.description
    for words in ("3-63 characters", "lowercase letters, digits, '-', '_' and '.'", "starts and ends"):
        assert words in rule, (words, rule)
    names = {"abc": True, "a_b.c-9": True, "a" * 63: True, "ab": False, "a" * 64: False}
    names |= {"Abc": False, "-abc": False, "abc.": False, "a b c": False}
    assert {name: bool(re.fullmatch(bucket.schema["pattern"], name)) for name in names} == names

    for dag_id in ("aip_training_pipeline", "aip_retraining"):
        params = dags[dag_id].params
        region, runtime = params.get_param("region"), params.get_param("runtime_version")
        python = params.get_param("python_version")
        spec = {"runtimeVersion": runtime.value, "pythonVersion": python.value, "region": region.value}
        image = executor_image(spec, "scikit-learn", gpu=False).rsplit("/", 1)[-1].removesuffix(":latest")
        assert "Where the job runs on Vertex AI" in region.description, (dag_id, region.description)
        assert "locations/<region>" in region.description
        for param in (runtime, python):
            assert "pre-built training container" in param.description, (dag_id, param.description)
            assert image in param.description, (dag_id, image, param.description)

"""The submit operator's argument groups: ``training_input`` and ``placement`` as mappings whose
XComArgs Airflow finds, and the removed arguments folded into them for one release."""

from __future__ import annotations

import warnings
from datetime import datetime
from typing import Any

import pytest
from airflow.exceptions import AirflowProviderDeprecationWarning
from airflow.sdk import DAG, task

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs import airflow_labels
from airflow_aip.jobs.backends import build_request
from airflow_aip.jobs.vertex.ladder import ladder_requests, parse_ladder
from airflow_aip.operators import SubmitTrainingJobOperator
from airflow_aip.operators import training_args as training_args_module
from tests.fixtures.operators import RUN_ID
from tests.fixtures.submit import make_context

PACKAGE = "gs://bucket/trainer-0.1.tar.gz"
TENSORBOARD = "projects/proj/locations/us-central1/tensorboards/1"
ACCOUNT = "trainer@proj.iam.gserviceaccount.com"
COMMON: dict[str, Any] = {"task_id": "train", "project_id": "proj", "region": "us-central1"}
# Every removed trainingInput argument, with a value the ml v1 API takes.
OLD_INPUT: dict[str, Any] = {
    "package_uris": [PACKAGE],
    "python_module": "trainer.task",
    "args": ["--epochs", "2"],
    "job_dir": "gs://bucket/out",
    "scale_tier": "CUSTOM",
    "master_type": "n1-standard-8",
    "master_config": {"disk_config": {"boot_disk_size_gb": 200}},  # nested snake_case, as before
    "worker_type": "n1-standard-4",
    "worker_count": 2,
    "worker_config": {"diskConfig": {"bootDiskSizeGb": 100}},
    "parameter_server_type": "n1-standard-4",
    "parameter_server_count": 1,
    "parameter_server_config": {"diskConfig": {"bootDiskSizeGb": 100}},
    "runtime_version": "2.11",
    "python_version": "3.7",
    "scheduling": {"max_running_time": "7200s"},
    "service_account": ACCOUNT,
    "hyperparameters": {
        "goal": "MAXIMIZE",
        "max_trials": 2,
        "params": [{"parameterName": "lr", "type": "DOUBLE", "minValue": 0.01, "maxValue": 1.0}],
    },
    "network": "projects/123/global/networks/default",
}
NEW_INPUT: dict[str, Any] = {
    "packageUris": [PACKAGE],
    "pythonModule": "trainer.task",
    "args": ["--epochs", "2"],
    "jobDir": "gs://bucket/out",
    "scaleTier": "CUSTOM",
    "masterType": "n1-standard-8",
    "masterConfig": {"diskConfig": {"bootDiskSizeGb": 200}},
    "workerType": "n1-standard-4",
    "workerCount": 2,
    "workerConfig": {"diskConfig": {"bootDiskSizeGb": 100}},
    "parameterServerType": "n1-standard-4",
    "parameterServerCount": 1,
    "parameterServerConfig": {"diskConfig": {"bootDiskSizeGb": 100}},
    "runtimeVersion": "2.11",
    "pythonVersion": "3.7",
    "scheduling": {"maxRunningTime": "7200s"},
    "serviceAccount": ACCOUNT,
    "hyperparameters": {
        "goal": "MAXIMIZE",
        "maxTrials": 2,
        "params": [{"parameterName": "lr", "type": "DOUBLE", "minValue": 0.01, "maxValue": 1.0}],
    },
    "network": "projects/123/global/networks/default",
}
VERTEX_INPUT: dict[str, Any] = {
    "packageUris": [PACKAGE],
    "pythonModule": "trainer.task",
    "runtimeVersion": "2.11",
    "serviceAccount": ACCOUNT,
    "scaleTier": "CUSTOM",
    "masterType": "a2-highgpu-1g",
    "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_TESLA_A100", "count": "1"}},
}


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test as a process of its own: no argument name has warned yet."""
    monkeypatch.setattr(training_args_module, "_warned", set())


def built(**kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AirflowProviderDeprecationWarning)
        operator = SubmitTrainingJobOperator(**{**COMMON, **kwargs})
    return operator.build_job(make_context())


def test_the_old_training_input_arguments_build_the_same_request_as_training_input() -> None:
    old = built(backend="ai_platform", **OLD_INPUT)
    new = built(backend="ai_platform", training_input=NEW_INPUT)
    assert old.requests == new.requests
    assert old.requests[0].body["trainingInput"]["masterConfig"] == {"diskConfig": {"bootDiskSizeGb": 200}}


def test_the_old_placement_arguments_build_the_same_request_as_placement() -> None:
    old = built(
        backend="vertex",
        training_input=VERTEX_INPUT,
        scheduling_strategy="FLEX_START",
        max_wait_duration="3600s",
        restart_job_on_worker_restart=True,
        reservation="my-reservation",
        tensorboard=TENSORBOARD,
    )
    new = built(
        backend="vertex",
        training_input=VERTEX_INPUT,
        placement={
            "strategy": "FLEX_START",
            "max_wait_duration": "3600s",
            "restart_job_on_worker_restart": True,
            "reservation": "my-reservation",
            "tensorboard": TENSORBOARD,
        },
    )
    assert old == new
    spec = new.requests[0].body["jobSpec"]
    assert spec["scheduling"] == {
        "strategy": "FLEX_START",
        "maxWaitDuration": "3600s",
        "restartJobOnWorkerRestart": True,
    }
    assert spec["tensorboard"] == TENSORBOARD


def test_an_old_ladder_with_old_placement_arguments_builds_what_it_built_before() -> None:
    ladder = ["SPOT", {"strategy": "FLEX_START", "label": "flex"}, {"reservation": "r1"}]
    old = built(
        backend="vertex",
        training_input=VERTEX_INPUT,
        capacity_ladder=ladder,
        scheduling_strategy="FLEX_START",
        max_wait_duration="3600s",
        tensorboard=TENSORBOARD,
    )
    # What the removed arguments did: the placement on the job, then each rung's choices on top.
    job = build_request(
        "vertex",
        layered_input=VERTEX_INPUT,
        named={"region": "us-central1"},
        labels=airflow_labels("train_dag", "train", RUN_ID, {}, -1, try_number=1),
        first_id=old.base_id,
        placement={
            "scheduling_strategy": "FLEX_START",
            "max_wait_duration": "3600s",
            "tensorboard": TENSORBOARD,
        },
    )
    rungs = parse_ladder(ladder)
    assert [r.label for r in old.rungs] == [r.label for r in rungs] == ["spot", "flex", "reserved"]
    assert [r.body for r in old.requests] == [r.body for r in ladder_requests(job, rungs)]


def test_an_old_ladder_alone_is_the_placement_list() -> None:
    old = built(backend="vertex", training_input=VERTEX_INPUT, capacity_ladder=["SPOT", "STANDARD"])
    new = built(backend="vertex", training_input=VERTEX_INPUT, placement=["SPOT", "STANDARD"])
    assert old == new
    assert [r.label for r in new.rungs] == ["spot", "standard"]


def build_twice() -> None:
    """Two tasks with old spellings, as one DAG file would build them."""
    SubmitTrainingJobOperator(**COMMON, package_uris=[PACKAGE], scheduling_strategy="SPOT")
    SubmitTrainingJobOperator(**COMMON, package_uris=[PACKAGE], capacity_ladder=None)


def test_each_old_argument_warns_once_naming_its_new_spelling() -> None:
    with pytest.warns(AirflowProviderDeprecationWarning) as caught:
        build_twice()
    messages = [str(w.message) for w in caught]
    assert messages == [
        "package_uris= is deprecated: use training_input={'packageUris': ...}",
        "scheduling_strategy= is deprecated: use placement={'strategy': ...}",
        "capacity_ladder= is deprecated: use placement=[...] (a list of rungs)",
    ]
    assert {w.filename for w in caught} == {__file__}  # the DAG's line, not ours or Airflow's


def test_a_field_given_both_ways_names_both() -> None:
    with pytest.raises(ValidationError) as caught:
        SubmitTrainingJobOperator(**COMMON, training_input={"pythonModule": "a.b"}, python_module="c.d")
    assert caught.value.field == "training_input.pythonModule"
    assert "python_module=" in caught.value.rule
    with pytest.raises(ValidationError) as caught:
        SubmitTrainingJobOperator(**COMMON, placement={"strategy": "SPOT"}, reservation="r1")
    assert caught.value.field == "placement"
    assert "reservation=" in caught.value.rule


def test_xcom_args_in_the_groups_make_their_tasks_upstream() -> None:
    with DAG("groups", schedule=None, start_date=datetime(2026, 1, 1)) as dag:

        @task
        def stage() -> list[str]:
            return [PACKAGE]

        @task
        def split() -> dict[str, str]:
            return {"train": "gs://bucket/train.csv"}

        @task
        def ladder() -> list[str]:
            return ["SPOT", "STANDARD"]

        # Task outputs stand in for their values: typed Any, as Airflow's own mypy plugin types them.
        staged: Any = stage()
        data: Any = split()
        rungs: Any = ladder()
        new = SubmitTrainingJobOperator(
            task_id="new",
            training_input={"packageUris": staged, "pythonModule": "t.m", "args": ["--data", data["train"]]},
            placement=rungs,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AirflowProviderDeprecationWarning)
            old = SubmitTrainingJobOperator(
                task_id="old", package_uris=staged, python_module="t.m", args=["--data", data["train"]]
            )
    assert new.upstream_task_ids == {"stage", "split", "ladder"}
    assert old.upstream_task_ids == {"stage", "split"}
    assert dag.get_task("stage").downstream_task_ids == {"new", "old"}

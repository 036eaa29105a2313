"""diff_vertex_spec: the fields we sent that differ from the job the server returned."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from airflow_aip.jobs.training_input import build_training_input
from airflow_aip.jobs.vertex.body import CUSTOM_JOB_SCHEMA, TUNING_JOB_SCHEMA
from airflow_aip.jobs.vertex.diff import diff_vertex_spec
from airflow_aip.jobs.vertex.enums import enums_as_numbers
from airflow_aip.jobs.vertex.translate import to_vertex

LABELS = {"airflow_dag_id": "d", "airflow_task_id": "t", "aip_run_key": "5f2c0c1e"}


def _custom_job() -> dict[str, Any]:
    ti = build_training_input(
        None,
        region="us-central1",
        scaleTier="CUSTOM",
        masterType="n1-standard-8",
        masterConfig={"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "1"}},
        workerType="n1-standard-4",
        workerCount=2,
        packageUris=["gs://bkt-x/pkg/trainer-0.1.tar.gz"],
        pythonModule="trainer.task",
        runtimeVersion="2.11",
        jobDir="gs://bkt-x/out/run1",
        scheduling={"maxRunningTime": "7200s"},
    )
    return to_vertex(ti, display_name="train", labels=LABELS).body


def _tuning_job() -> dict[str, Any]:
    ti = build_training_input(
        None,
        region="us-central1",
        packageUris=["gs://bkt-x/pkg/trainer-0.1.tar.gz"],
        pythonModule="trainer.task",
        runtimeVersion="2.11",
        hyperparameters={
            "maxTrials": 6,
            "maxParallelTrials": 2,
            "algorithm": "ALGORITHM_UNSPECIFIED",
            "enableTrialEarlyStopping": True,
            "params": [
                {"parameterName": "C", "type": "DOUBLE", "minValue": 0.0001, "maxValue": 100.0},
                {"parameterName": "max_iter", "type": "INTEGER", "minValue": 2, "maxValue": 200},
            ],
        },
    )
    return to_vertex(ti, display_name="tune", labels=LABELS).body


def _as_returned(body: dict[str, Any], schema_name: str) -> dict[str, Any]:
    """What the server answers: output-only fields, defaults, its own spellings, extra labels."""
    job: dict[str, Any] = enums_as_numbers(copy.deepcopy(body), schema_name, "aiplatform.v1.json")
    job.update(
        name="projects/123456789012/locations/us-central1/customJobs/3000721679224668160",
        state="JOB_STATE_RUNNING",
        createTime="2026-11-23T21:00:00.123456Z",
        updateTime="2026-11-23T21:01:00Z",
        labels={**job["labels"], "goog-managed": "x"},
    )
    spec = job.get("jobSpec") or job["trialJobSpec"]
    for pool in spec["workerPoolSpecs"]:
        pool["replicaCount"] = int(pool["replicaCount"])  # int64 as a number
        pool["diskSpec"] = {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100}  # a server default
    if "baseOutputDirectory" in spec:
        spec["baseOutputDirectory"]["outputUriPrefix"] += "/"  # "/" appended if missing
    if "scheduling" in spec:
        spec["scheduling"]["timeout"] = "7200.000s"
    else:
        spec["scheduling"] = {"timeout": "604800s"}  # a default scheduling we did not send
    return job


def test_the_job_we_sent_equals_its_canonical_echo() -> None:
    body = _custom_job()
    assert diff_vertex_spec(body, body) == []
    assert diff_vertex_spec(body, _as_returned(body, CUSTOM_JOB_SCHEMA)) == []


def test_a_tuning_job_equals_its_echo_with_trials_and_numbers() -> None:
    body = _tuning_job()
    returned = _as_returned(body, TUNING_JOB_SCHEMA)
    returned["trials"] = [{"id": "1", "state": "ACTIVE"}]
    returned["maxFailedTrialCount"] = 0
    returned["studySpec"]["parameters"][1]["integerValueSpec"] = {"minValue": 2, "maxValue": 200}
    returned["studySpec"].pop("algorithm")  # ALGORITHM_UNSPECIFIED: proto3 JSON leaves it out
    returned["studySpec"]["decayCurveStoppingSpec"] = {}  # useElapsedDuration false: left out
    assert returned["studySpec"]["metrics"][0]["goal"] == 1  # MAXIMIZE as a proto number
    assert diff_vertex_spec(body, returned) == []


@pytest.mark.parametrize(
    ("change", "path"),
    [
        (
            lambda job: job["jobSpec"]["workerPoolSpecs"][0]["machineSpec"].update(
                machineType="n1-standard-16"
            ),
            "jobSpec.workerPoolSpecs[0].machineSpec.machineType",
        ),
        (
            lambda job: job["jobSpec"]["workerPoolSpecs"][1].update(replicaCount=3),
            "jobSpec.workerPoolSpecs[1].replicaCount",
        ),
        (
            lambda job: job["jobSpec"]["workerPoolSpecs"][0]["machineSpec"].pop("acceleratorType"),
            "jobSpec.workerPoolSpecs[0].machineSpec.acceleratorType",
        ),
        (
            lambda job: job["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["args"].append("--x"),
            "jobSpec.workerPoolSpecs[0].pythonPackageSpec.args",
        ),
        (lambda job: job["jobSpec"]["workerPoolSpecs"].pop(), "jobSpec.workerPoolSpecs"),
        (lambda job: job["jobSpec"]["scheduling"].update(timeout="3600s"), "jobSpec.scheduling.timeout"),
        (
            lambda job: job["jobSpec"]["baseOutputDirectory"].update(outputUriPrefix="gs://bkt-x/out/run2/"),
            "jobSpec.baseOutputDirectory.outputUriPrefix",
        ),
        (lambda job: job.update(displayName="other"), "displayName"),
        (lambda job: job["labels"].update(aip_run_key="0000"), "labels.aip_run_key"),
        (lambda job: job["labels"].pop("airflow_task_id"), "labels.airflow_task_id"),
    ],
)
def test_a_real_change_is_reported_by_its_path(change: Any, path: str) -> None:
    body = _custom_job()
    returned = _as_returned(body, CUSTOM_JOB_SCHEMA)
    change(returned)
    assert diff_vertex_spec(body, returned) == [path]


@pytest.mark.parametrize(
    ("change", "path"),
    [
        (lambda job: job.update(maxTrialCount=8), "maxTrialCount"),
        (
            lambda job: job["studySpec"]["parameters"][1]["integerValueSpec"].update(maxValue="300"),
            "studySpec.parameters[1].integerValueSpec.maxValue",
        ),
        (lambda job: job["studySpec"].pop("decayCurveStoppingSpec"), "studySpec.decayCurveStoppingSpec"),
        (lambda job: job["studySpec"]["metrics"][0].update(goal="MINIMIZE"), "studySpec.metrics[0].goal"),
    ],
)
def test_a_tuning_change_is_reported(change: Any, path: str) -> None:
    body = _tuning_job()
    returned = _as_returned(body, TUNING_JOB_SCHEMA)
    change(returned)
    assert diff_vertex_spec(body, returned) == [path]


def test_fields_only_the_server_has_are_not_differences() -> None:
    body = _custom_job()
    returned = _as_returned(body, CUSTOM_JOB_SCHEMA)
    returned["jobSpec"]["enableWebAccess"] = True  # we did not ask; not ours to judge
    returned["webAccessUris"] = {"workerpool0-0": "https://example"}
    returned["error"] = {"code": 1, "message": "cancelled"}
    returned["someFutureField"] = {"x": 1}
    assert diff_vertex_spec(body, returned) == []


def test_a_default_we_sent_equals_an_absent_field() -> None:
    body = _custom_job()
    body["jobSpec"]["enableWebAccess"] = False
    body["jobSpec"]["workerPoolSpecs"][1]["machineSpec"]["acceleratorType"] = "ACCELERATOR_TYPE_UNSPECIFIED"
    assert diff_vertex_spec(body, _as_returned(_custom_job(), CUSTOM_JOB_SCHEMA)) == []

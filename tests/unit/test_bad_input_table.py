"""Every kind of bad input, through the operators a DAG author uses, fails before any side effect.

One table: job IDs and prefixes, each trainingInput rule, hyperparameter specs, URIs and bucket
names, package trees, export destinations, config files that are neither YAML nor JSON, and
Vertex AI's placements and capacity ladders (each refused on ml v1 too), and a field given both
in its old spelling and in its new one.
Each row must raise ValidationError naming the field (PackagingError where a build fails), and
the fakes at the HTTP boundary (the ml v1 API, Cloud Storage) must have seen no request, and no
output directory may have been created.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from airflow_aip.exceptions import PackagingError, ValidationError
from airflow_aip.hooks.storage import StorageHook
from airflow_aip.hooks.training import TrainingJobHook
from airflow_aip.operators import (
    BuildTrainerPackageOperator,
    ExportArtifactsOperator,
    StagePackagesOperator,
    SubmitTrainingJobOperator,
)
from tests.fixtures.operators import FakeTI, task_context
from tests.fixtures.submit import submit_args
from tests.unit.ml_fake import FakeMlApi, serve_hook

WHEN = datetime(2024, 3, 9, 7, 5, 1, tzinfo=timezone.utc)
TI = "trainingInput"
TI_ARG = "training_input"
HP = "trainingInput.hyperparameters"
SUBMIT = submit_args("ai_platform", wait_for_completion=False)
PARAM = {"parameterName": "lr", "type": "DOUBLE", "minValue": 0.01, "maxValue": 1.0}
Case = Callable[[Path], Any]


class NoXComTI(FakeTI):
    def xcom_push(self, key: str, value: Any) -> None:
        raise AssertionError(f"XCom {key} pushed for bad input")


def context() -> Any:
    return task_context(NoXComTI("dag"), WHEN)


def submit(fields: dict[str, Any] | None = None, **overrides: Any) -> Case:
    """Submit SUBMIT's job with ``fields`` over its training_input (None: the field removed)."""
    merged = {**SUBMIT["training_input"], **(fields or {})}
    training_input = {key: value for key, value in merged.items() if value is not None}
    arguments = {**SUBMIT, "training_input": training_input, **overrides}
    return lambda _: SubmitTrainingJobOperator(**arguments).execute(context())


def tuned(**spec: Any) -> Case:
    return submit({"hyperparameters": {"goal": "MAXIMIZE", "params": [PARAM], **spec}})


def vertex(fields: dict[str, Any] | None = None, **overrides: Any) -> Case:
    """Submit on Vertex AI: a request would reach no server (and not be a ValidationError)."""
    return submit({"runtimeVersion": "2.11", **(fields or {})}, backend="vertex", **overrides)


def config_file(name: str, content: bytes) -> Case:
    def run(tmp: Path) -> Any:
        (tmp / name).write_bytes(content)
        return submit(config=str(tmp / name))(tmp)

    return run


def stage(packages: Any, staging_uri: str = "gs://bucket/staging") -> Case:
    def run(tmp: Path) -> Any:
        resolved = [p.format(tmp=tmp) if isinstance(p, str) else p for p in packages]
        (tmp / "pkg-1.0.tar.gz").write_bytes(b"sdist")
        (tmp / "sub").mkdir(exist_ok=True)
        (tmp / "sub" / "pkg-1.0.tar.gz").write_bytes(b"other sdist")
        (tmp / "pkg.zip").write_bytes(b"zip")
        return StagePackagesOperator(task_id="s", packages=resolved, staging_uri=staging_uri).execute(
            context()
        )

    return run


def build(tree: dict[str, str], package: str = "trainer", symlink: tuple[str, str] | None = None) -> Case:
    """Write ``tree`` (relative path -> text) under tmp/src and build ``src/<package>``."""

    def run(tmp: Path) -> Any:
        for relative, text in tree.items():
            path = tmp / "src" / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        if symlink:
            (tmp / "src" / symlink[0]).symlink_to(symlink[1])
        operator = BuildTrainerPackageOperator(
            task_id="b", package_path=str(tmp / "src" / package), output_dir=str(tmp / "out")
        )
        return operator.execute(context())

    return run


def export(**overrides: Any) -> Case:
    arguments = {
        "task_id": "e",
        "backend": "ai_platform",
        "job_id": "job_1",
        "destination_uri": "gs://bucket/models",
        **overrides,
    }
    arguments.setdefault("project_id", "proj")
    return lambda _: ExportArtifactsOperator(**arguments).execute(context())


def connection(extra: dict[str, Any], **overrides: Any) -> Case:
    """Submit through a connection with these extras (an https endpoint: credentials are loaded)."""

    def run(tmp: Path) -> Any:
        filled = {k: v.replace("{tmp}", str(tmp)) if isinstance(v, str) else v for k, v in extra.items()}
        conn = json.dumps({"conn_type": "google_cloud_platform", "extra": filled})
        with mock.patch.dict(os.environ, {"AIRFLOW_CONN_AIP_BAD_CREDENTIALS": conn}):
            arguments = {"gcp_conn_id": "aip_bad_credentials", "api_endpoint": "https://ml.example.com/"}
            return submit(**{**arguments, **overrides})(tmp)

    return run


KEY = '{"type": "service_account", "client_email": "a@p.iam.gserviceaccount.com"}'
A100 = {  # one A100 on its machine: what FLEX_START takes
    "scaleTier": "CUSTOM",
    "masterType": "a2-highgpu-1g",
    "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_TESLA_A100", "count": "1"}},
}
TENSORBOARD = "projects/proj/locations/us-central1/tensorboards/1"
LADDER = "placement"
# A job's placement, each key with a value Vertex AI would take, and a capacity ladder.
PLACEMENT: dict[str, Any] = {
    "strategy": "SPOT",
    "max_wait_duration": "3600s",
    "restart_job_on_worker_restart": False,
    "reservation": "my-reservation",
    "persistent_resource_id": "my-resource",
    "tensorboard": TENSORBOARD,
}

TABLE = [
    # -- job IDs and prefixes -------------------------------------------------------------
    pytest.param(submit(job_id="1st_job"), "job_id", id="job id starts with a digit"),
    pytest.param(submit(job_id="my-job"), "job_id", id="job id with a hyphen"),
    pytest.param(submit(job_id="j" * 129), "job_id", id="job id over 128 characters"),
    pytest.param(submit(job_id=42), "job_id", id="job id not a string"),
    pytest.param(submit(job_id="model_r3"), "job_id", id="job id ending in an attempt suffix"),
    pytest.param(submit(job_id_prefix=["a"]), "job_id_prefix", id="prefix not a string"),
    pytest.param(submit(if_exists="replace"), "if_exists", id="if_exists unknown"),
    pytest.param(submit(poll_interval=0), "poll_interval", id="poll interval zero"),
    pytest.param(submit(deferrable=True, defer_after=-1), "defer_after", id="defer after negative"),
    pytest.param(submit(wait_timeout=-5), "wait_timeout", id="negative wait timeout"),
    # -- trainingInput rules --------------------------------------------------------------
    pytest.param(submit(region=None), f"{TI}.region", id="region missing"),
    pytest.param(submit({"packageUris": None}), f"{TI}.packageUris", id="no package"),
    pytest.param(submit({"pythonModule": None}), f"{TI}.pythonModule", id="no module"),
    pytest.param(submit({"pythonModule": "trainer-task"}), f"{TI}.pythonModule", id="module not dotted name"),
    pytest.param(
        submit({"packageUris": [f"gs://bucket/p{i}.tar.gz" for i in range(101)]}),
        f"{TI}.packageUris",
        id="over 100 packages",
    ),
    pytest.param(submit({"scaleTier": "HUGE"}), f"{TI}.scaleTier", id="unknown scale tier"),
    pytest.param(submit({"scaleTier": "CUSTOM"}), f"{TI}.masterType", id="CUSTOM without masterType"),
    pytest.param(
        submit({"workerCount": 2, "workerType": "n1-standard-4"}),
        f"{TI}.workerCount",
        id="workers outside CUSTOM",
    ),
    pytest.param(
        submit({"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "workerCount": 2}),
        f"{TI}.workerType",
        id="workers without a type",
    ),
    pytest.param(submit(labels=["team", "ml"]), "labels", id="labels not a mapping"),
    pytest.param(
        submit({"scaleTier": "CUSTOM", "masterType": "m", "workerCount": -1}),
        f"{TI}.workerCount",
        id="negative count",
    ),
    pytest.param(
        submit({"scheduling": {"maxWaitTime": "60s"}}),
        f"{TI}.scheduling.maxWaitTime",
        id="maxWaitTime under 1800s",
    ),
    pytest.param(
        submit({"scheduling": {"maxWaitTime": "1h"}}),
        f"{TI}.scheduling.maxWaitTime",
        id="duration not in seconds",
    ),
    pytest.param(
        submit({"scheduling": {"maxRunningTime": "3600.0000000001s"}}),
        f"{TI}.scheduling.maxRunningTime",
        id="duration finer than nanoseconds",
    ),
    pytest.param(
        submit({"scheduling": {"maxRunningTime": "0s"}}),
        f"{TI}.scheduling.maxRunningTime",
        id="maxRunningTime 0",
    ),
    pytest.param(
        submit({"scheduling": {"priority": 1001}}), f"{TI}.scheduling.priority", id="priority over 1000"
    ),
    pytest.param(
        submit({"masterConfig": {"imageUri": "gcr.io/p/image"}}),
        f"{TI}.packageUris",
        id="container and package",
    ),
    pytest.param(
        submit({"masterConfig": {"containerArgs": ["--x"]}}),
        f"{TI}.masterConfig.containerArgs",
        id="container args without image",
    ),
    pytest.param(
        submit({"masterConfig": {"acceleratorConfig": {"count": "0", "type": "NVIDIA_TESLA_T4"}}}),
        f"{TI}.masterConfig.acceleratorConfig.count",
        id="zero accelerators",
    ),
    pytest.param(
        submit({"serviceAccount": "trainer"}), f"{TI}.serviceAccount", id="service account not email"
    ),
    pytest.param(submit({"epochs": 3}), f"{TI}.epochs", id="unknown field"),
    pytest.param(submit({"runtimeVersion": 2.1}), f"{TI}.runtimeVersion", id="runtime version as a float"),
    pytest.param(submit({"args": "--epochs 2"}), f"{TI}.args", id="args not a list"),
    pytest.param(submit(labels={f"k{i}": "v" for i in range(65)}), "labels", id="over 64 labels"),
    # -- hyperparameter specs -------------------------------------------------------------
    pytest.param(
        submit({"hyperparameters": {"goal": "MAXIMIZE", "params": []}}), f"{HP}.params", id="no params"
    ),
    pytest.param(
        tuned(params=[{**PARAM, "minValue": 2.0}]), f"{HP}.params[0].minValue", id="min not below max"
    ),
    pytest.param(
        tuned(params=[{**PARAM, "type": "INTEGER", "minValue": 0.5}]),
        f"{HP}.params[0].minValue",
        id="INTEGER bound not whole",
    ),
    pytest.param(
        tuned(params=[{**PARAM, "minValue": 0, "scaleType": "UNIT_LOG_SCALE"}]),
        f"{HP}.params[0].minValue",
        id="log scale from zero",
    ),
    pytest.param(
        tuned(params=[{"parameterName": "d", "type": "DISCRETE", "discreteValues": [1, 3, 2]}]),
        f"{HP}.params[0].discreteValues[2]",
        id="discrete values not increasing",
    ),
    pytest.param(
        tuned(params=[{"parameterName": "c", "type": "CATEGORICAL", "categoricalValues": ["a", "a"]}]),
        f"{HP}.params[0].categoricalValues[1]",
        id="duplicate category",
    ),
    pytest.param(tuned(params=[PARAM, PARAM]), f"{HP}.params[1].parameterName", id="duplicate parameter"),
    pytest.param(
        tuned(params=[{"parameterName": "lr", "minValue": 0, "maxValue": 1}]),
        f"{HP}.params[0].type",
        id="parameter without type",
    ),
    pytest.param(
        tuned(maxTrials=2, maxParallelTrials=3), f"{HP}.maxParallelTrials", id="parallel over max trials"
    ),
    pytest.param(tuned(maxTrials=0), f"{HP}.maxTrials", id="zero trials"),
    pytest.param(tuned(algorithm="GRID_SEARCH"), f"{HP}.params[0].type", id="grid search over DOUBLE"),
    pytest.param(tuned(hyperparameterMetricTag=""), f"{HP}.hyperparameterMetricTag", id="empty metric tag"),
    pytest.param(tuned(goal="BIGGER"), f"{HP}.goal", id="unknown goal"),
    # -- URIs and bucket names ------------------------------------------------------------
    pytest.param(submit({"jobDir": "/local/out"}), f"{TI}.jobDir", id="job dir not gs"),
    pytest.param(
        submit({"jobDir": "gs://my-google-bucket/out"}), f"{TI}.jobDir", id="bucket contains google"
    ),
    pytest.param(
        submit({"packageUris": ["gs://bucket"]}), f"{TI}.packageUris[0]", id="package URI is a bucket"
    ),
    pytest.param(stage(["{tmp}/pkg-1.0.tar.gz"], "s3://bucket/x"), "staging_uri", id="staging not gs"),
    pytest.param(stage(["{tmp}/pkg-1.0.tar.gz"], "gs://ab/x"), "staging_uri", id="bucket too short"),
    pytest.param(stage(["{tmp}/pkg-1.0.tar.gz"], "gs://Bucket/x"), "staging_uri", id="bucket uppercase"),
    pytest.param(stage(["{tmp}/pkg-1.0.tar.gz"], "gs://goog-ml/x"), "staging_uri", id="bucket starts goog"),
    pytest.param(stage(["{tmp}/pkg-1.0.tar.gz"], "gs://10.0.0.1/x"), "staging_uri", id="bucket is an IP"),
    pytest.param(stage(["{tmp}/pkg-1.0.tar.gz"], "gs://bucket/a/../b"), "staging_uri", id="object with .."),
    pytest.param(stage(["{tmp}/pkg-1.0.tar.gz"], "gs://bucket/a\x00b"), "staging_uri", id="object with NUL"),
    pytest.param(stage(["{tmp}/pkg-1.0.tar.gz"], "gs://bucket//a"), "staging_uri", id="empty segment"),
    # -- package trees and packages to stage ----------------------------------------------
    pytest.param(build({}), "package_path", id="package dir missing"),
    pytest.param(build({"trainer/task.py": ""}), "package_path", id="no __init__.py"),
    pytest.param(
        build({"my-trainer/__init__.py": ""}, "my-trainer"), "package_path", id="dir not identifier"
    ),
    pytest.param(
        build({"trainer/__init__.py": ""}, symlink=("trainer/secrets", "/etc")),
        "package_path",
        id="symlink escapes the tree",
    ),
    pytest.param(
        build({"trainer/__init__.py": "", "pyproject.toml": "[build-system\n"}),
        "package_path",
        id="pyproject not TOML",
    ),
    pytest.param(
        build({"trainer/__init__.py": "", "setup.py": "raise SystemExit('broken setup.py')"}),
        PackagingError,
        id="setup.py fails",
    ),
    pytest.param(stage([]), "packages", id="no packages"),
    pytest.param(stage(["{tmp}/pkg.zip"]), "packages[0]", id="package neither sdist nor wheel"),
    pytest.param(stage(["{tmp}/missing-1.0.tar.gz"]), "packages[0]", id="package file missing"),
    pytest.param(
        stage(["{tmp}/pkg-1.0.tar.gz", "{tmp}/sub/pkg-1.0.tar.gz"]), "packages[1]", id="basename repeats"
    ),
    pytest.param(
        stage([{"path": "{tmp}/pkg-1.0.tar.gz", "sha256": "0" * 64}]), "packages[0]", id="changed since built"
    ),
    # -- export destinations --------------------------------------------------------------
    pytest.param(export(destination_uri="/local/models"), "destination_uri", id="destination not gs"),
    pytest.param(export(destination_uri="gs://bucket/../x"), "destination_uri", id="destination with .."),
    pytest.param(
        export(champion_manifest_uri="gs://bucket"), "champion_manifest_uri", id="champion is a bucket"
    ),
    pytest.param(export(job_id="job 1"), "job_id", id="export job id with a space"),
    # -- config files neither YAML nor JSON -----------------------------------------------
    pytest.param(config_file("config.json", b'{"trainingInput": {'), "config", id="json file not JSON"),
    pytest.param(config_file("config.yaml", b"trainingInput: [a\n"), "config", id="yaml file not YAML"),
    pytest.param(config_file("config.yaml", b"\xff\xfe\x00binary"), "config", id="binary file"),
    pytest.param(config_file("config.txt", b"just some words\n"), "config", id="plain text"),
    pytest.param(config_file("config.yaml", b"- a\n- b\n"), "config", id="yaml list"),
    pytest.param(config_file("config.yaml", b"trainingInputs: {}\n"), "config.trainingInputs", id="typo key"),
    pytest.param(
        config_file("config.yaml", b"trainingInput: [1, 2]\n"), "config.trainingInput", id="input a list"
    ),
    pytest.param(
        config_file("config.yaml", b"labels: [team, ml]\n"), "config.labels", id="config labels a list"
    ),
    pytest.param(lambda tmp: submit(config=str(tmp / "absent.yaml"))(tmp), "config", id="config missing"),
    # -- credentials: never a silent fall back to another identity ------------------------
    pytest.param(connection({"key_secret_name": "k"}), "extra.key_secret_name", id="key in Secret Manager"),
    pytest.param(
        connection({"extra__google_cloud_platform__idp_issuer_url": "https://idp"}),
        "extra.idp_issuer_url",
        id="IdP token flow (prefixed extra)",
    ),
    pytest.param(
        connection({"keyfile_dict": KEY, "key_path": "/k.json"}), "extra.key_path", id="two key sources"
    ),
    pytest.param(
        connection({"is_anonymous": True, "key_path": "/k.json"}), "extra.is_anonymous", id="anonymous, key"
    ),
    pytest.param(connection({"keyfile_dict": "{not json"}), "extra.keyfile_dict", id="key not JSON"),
    pytest.param(connection({"key_path": "{tmp}/absent.json"}), "extra.key_path", id="key file missing"),
    pytest.param(
        connection({"credential_config_file": "{tmp}/absent.json"}),
        "extra.credential_config_file",
        id="credential config file missing",
    ),
    pytest.param(
        connection({"credential_config_file": "{not json"}),
        "extra.credential_config_file",
        id="credential config not JSON",
    ),
    pytest.param(
        connection({"impersonation_chain": "not-an-email"}),
        "extra.impersonation_chain",
        id="impersonation chain not accounts",
    ),
    pytest.param(connection({"quota_project_id": 7}), "extra.quota_project_id", id="quota project a number"),
    pytest.param(
        submit(impersonation_chain=["ok@p.iam.gserviceaccount.com", "nobody"]),
        "impersonation_chain",
        id="task's impersonation chain not accounts",
    ),
    # -- Vertex AI (the default backend): AI Platform's vocabulary that cannot be translated, and
    #    Vertex AI's own; nothing is sent (a request would reach no server and not be a ValidationError)
    pytest.param(submit(backend="mars"), "backend", id="backend unknown"),
    pytest.param(
        submit({"runtimeVersion": "1.15", "pythonVersion": "3.7"}, backend="vertex"),
        f"{TI}.runtimeVersion",
        id="vertex: runtime version with no container",
    ),
    pytest.param(
        vertex({"scheduling": {"priority": 5}}),
        f"{TI}.scheduling.priority",
        id="vertex: job priority",
    ),
    pytest.param(
        vertex({"scaleTier": "BASIC_TPU"}),
        f"{TI}.scaleTier",
        id="vertex: a TPU scale tier",
    ),
    pytest.param(
        vertex(region="global"),
        f"{TI}.region",
        id="vertex: no global endpoint",
    ),
    pytest.param(
        vertex(executor_image_uri="docker.io/me/trainer:1"),
        "executor_image_uri",
        id="vertex: not a pre-built training container",
    ),
    pytest.param(
        vertex(vertex_job={"jobSpec": {"workerPoolSpecs": "x"}}),
        "jobSpec.workerPoolSpecs",
        id="vertex: vertex_job of the wrong shape",
    ),
    pytest.param(
        vertex(vertex_job=["x"]),
        "vertex_job",
        id="vertex_job a list",
    ),
    pytest.param(
        submit(vertex_job={"jobSpec": {}}),
        "vertex_job",
        id="ai_platform: vertex_job is Vertex AI's vocabulary",
    ),
    pytest.param(
        export(backend="vertex", job_id="projects/p/locations/mars-central1/customJobs/1"),
        "region",
        id="vertex: export of a job in no Vertex AI region",
    ),
    # -- Vertex AI's placement (a job's, or a capacity ladder: every rung is built and checked,
    #    machine table included, before the first is sent)
    pytest.param(vertex(placement={"strategy": "CHEAP"}), f"{LADDER}.strategy", id="strategy unknown"),
    pytest.param(vertex(placement={"strategy": "spot"}), f"{LADDER}.strategy", id="strategy lowercase"),
    pytest.param(
        vertex(placement={"max_wait_duration": "3600s"}),
        f"{LADDER}.max_wait_duration",
        id="max wait without a strategy",
    ),
    pytest.param(
        vertex(placement={"strategy": "SPOT", "max_wait_duration": "3600s"}),
        f"{LADDER}.max_wait_duration",
        id="max wait without FLEX_START",
    ),
    pytest.param(
        vertex(A100, placement={"strategy": "FLEX_START", "max_wait_duration": "1h"}),
        f"{LADDER}.max_wait_duration",
        id="max wait not in seconds",
    ),
    pytest.param(
        vertex(A100, placement={"strategy": "FLEX_START", "max_wait_duration": 3600}),
        f"{LADDER}.max_wait_duration",
        id="max wait a number",
    ),
    pytest.param(
        vertex(placement={"strategy": "FLEX_START"}),
        "jobSpec.workerPoolSpecs[0].machineSpec.acceleratorType",
        id="FLEX_START without one of its GPUs",
    ),
    pytest.param(
        vertex(placement={"restart_job_on_worker_restart": "yes"}),
        f"{LADDER}.restart_job_on_worker_restart",
        id="restart on worker restart not a bool",
    ),
    pytest.param(vertex(placement={"reservation": ""}), f"{LADDER}.reservation", id="reservation empty"),
    pytest.param(
        vertex(placement={"persistent_resource_id": ""}),
        f"{LADDER}.persistent_resource_id",
        id="persistent resource empty",
    ),
    pytest.param(
        vertex(placement={"persistent_resource_id": "Not An ID"}),
        "jobSpec.persistentResourceId",
        id="persistent resource not an ID",
    ),
    pytest.param(vertex({"network": "my-net"}), "jobSpec.network", id="network not a resource name"),
    pytest.param(
        vertex(placement={"tensorboard": TENSORBOARD}), "jobSpec.serviceAccount", id="tensorboard, no account"
    ),
    pytest.param(
        vertex({"serviceAccount": "a@p.iam.gserviceaccount.com"}, placement={"tensorboard": "tb"}),
        "jobSpec.tensorboard",
        id="tensorboard not a resource name",
    ),
    pytest.param(
        vertex(placement={"strategy": "SPOT", "region": "europe-west4"}),
        f"{LADDER}.region",
        id="a rung's field in a job's placement",
    ),
    pytest.param(vertex(placement={"speed": 1}), f"{LADDER}.speed", id="placement field unknown"),
    pytest.param(vertex(placement="SPOT"), LADDER, id="ladder a string"),
    pytest.param(vertex(placement='["SPOT"'), LADDER, id="ladder as broken JSON text"),
    pytest.param(vertex(placement=3), LADDER, id="placement neither a mapping nor a list"),
    pytest.param(
        vertex(placement='{"strategy": "CHEAP"}'), f"{LADDER}.strategy", id="placement as JSON of a mapping"
    ),
    pytest.param(vertex(placement=["SPOT"] * 9), LADDER, id="ladder over 8 rungs"),
    pytest.param(vertex(placement=[3]), f"{LADDER}[0]", id="rung neither name nor mapping"),
    pytest.param(vertex(placement=[{"speed": 1}]), f"{LADDER}[0].speed", id="rung field unknown"),
    pytest.param(vertex(placement=["CHEAP"]), f"{LADDER}[0].strategy", id="rung strategy unknown"),
    pytest.param(
        vertex(placement=["SPOT", {"label": "Big_GPU"}]), f"{LADDER}[1].label", id="rung label caps"
    ),
    pytest.param(vertex(placement=[{"label": "r2"}]), f"{LADDER}[0].label", id="rung label like an attempt"),
    pytest.param(vertex(placement=["SPOT", "SPOT"]), f"{LADDER}[1].label", id="rung label repeats"),
    pytest.param(vertex(placement=[{"queued_limit": 0}]), f"{LADDER}[0].queued_limit", id="queued limit 0"),
    pytest.param(
        vertex(placement=["SPOT", {"queued_limit": -60}]),
        f"{LADDER}[1].queued_limit",
        id="queued limit negative",
    ),
    pytest.param(
        vertex(placement=[{"strategy": "SPOT", "max_wait_duration": "600s"}]),
        f"{LADDER}[0].max_wait_duration",
        id="rung max wait without FLEX_START",
    ),
    pytest.param(
        vertex(placement=[{"strategy": "FLEX_START", "max_wait_duration": "1h"}]),
        f"{LADDER}[0].max_wait_duration",
        id="rung max wait not in seconds",
    ),
    pytest.param(
        vertex(placement=[{"region": "mars-central1"}]), f"{LADDER}[0].region", id="rung region unknown"
    ),
    pytest.param(
        vertex(placement=[{"accelerator_count": -1}]),
        f"{LADDER}[0].accelerator_count",
        id="rung accelerator count negative",
    ),
    pytest.param(
        vertex(
            placement=[
                "SPOT",
                {"label": "a100", "machine_type": "n1-standard-4", "accelerator_type": "NVIDIA_TESLA_A100"},
            ]
        ),
        f"{LADDER}[1].jobSpec.workerPoolSpecs[0].machineSpec.acceleratorType",
        id="rung 2's A100 on an n1 machine",
    ),
    pytest.param(
        vertex(placement=["SPOT", "FLEX_START"]),
        f"{LADDER}[1].jobSpec.workerPoolSpecs[0].machineSpec.acceleratorType",
        id="rung 2 FLEX_START without one of its GPUs",
    ),
    *(
        pytest.param(submit(placement={key: value}), f"{LADDER}.{key}", id=f"ai_platform: placement {key}")
        for key, value in PLACEMENT.items()
    ),
    pytest.param(submit(placement=["SPOT", "STANDARD"]), LADDER, id="ai_platform: a capacity ladder"),
    # -- a field given in its old spelling (deprecated) and in its new one ---------------------
    pytest.param(
        submit(package_uris=["gs://bucket/trainer-0.2.tar.gz"]),
        f"{TI_ARG}.packageUris",
        id="package_uris= and training_input's packageUris",
    ),
    pytest.param(
        vertex(placement={"strategy": "SPOT"}, scheduling_strategy="SPOT"),
        LADDER,
        id="scheduling_strategy= and placement=",
    ),
    pytest.param(
        vertex(placement={"strategy": "SPOT"}, capacity_ladder=["SPOT", "STANDARD"]),
        LADDER,
        id="capacity_ladder= and placement=",
    ),
    pytest.param(
        lambda _: SubmitTrainingJobOperator(**{**SUBMIT, "training_input": ["x"]}).execute(context()),
        TI_ARG,
        id="training_input not a mapping",
    ),
]


class NoStorage:
    """Cloud Storage at the boundary: any use at all is a failure of the row."""

    def __init__(self) -> None:
        self.touched: list[str] = []

    def __getattr__(self, name: str) -> Any:
        self.touched.append(name)
        raise AssertionError(f"Cloud Storage used ({name}) for bad input")


@pytest.mark.parametrize(("case", "expected"), TABLE)
def test_bad_input_is_refused_before_any_side_effect(
    case: Case, expected: str | type[Exception], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = serve_hook(monkeypatch, TrainingJobHook, FakeMlApi())
    storage = NoStorage()
    monkeypatch.setattr(StorageHook, "client", property(lambda self: storage))

    if isinstance(expected, str):
        with pytest.raises(ValidationError) as err:
            case(tmp_path)
        assert err.value.field == expected, err.value
        assert err.value.rule
    else:
        with pytest.raises(expected, match=r"broken setup\.py"):
            case(tmp_path)

    assert api.requests == []
    assert storage.touched == []
    assert not (tmp_path / "out").exists()

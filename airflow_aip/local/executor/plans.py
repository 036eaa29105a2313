"""What the one executor runs, whichever API submitted the job: an :class:`ExecutionPlan`.

The executor (:mod:`.execution`, :mod:`.runner`, :mod:`.trials`) never reads a wire format. Each
API face stores its job as it answers it, and this module turns a stored job into a plan:

- ml v1: ``trainingInput`` -> master/worker/ps/evaluator replicas named ``master-replica-0``...,
  ``--job-dir`` appended, ``scheduling.maxRunningTime`` cancelling the job;
- aiplatform v1: ``workerPoolSpecs[0..3]`` -> pools named ``workerpool0-0``... (TF_CONFIG roles
  chief/worker/ps/evaluator), ``pythonPackageSpec.env`` set, AIP_* directories under
  ``baseOutputDirectory``, ``scheduling.timeout`` failing the job, ``studySpec`` translated to
  the tuner's search spec once (:func:`airflow_aip.jobs.vertex.study.search_spec`).

Each package pool carries its own ``packageUris`` (Vertex installs only those in its replicas; ml v1
has one list for every role) and its ``executorImageUri``: the executor runs it in that image when
the container engine holds it (:mod:`.prebuilt`), else in a venv of this machine's Python
(:mod:`.environments`). A pool's accelerators (``machineSpec``, ml v1's ``acceleratorConfig``)
are recorded for :mod:`.accelerators`. A custom container (Vertex's ``containerSpec``,
ml v1's ``imageUri`` per role, each falling back to ``masterConfig``'s as AI Platform did) is run
(:mod:`.containers`): its pool carries ``image_uri``, ``command`` and ``args``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_aip.config import OPTIONS
from airflow_aip.jobs import DEFAULT_METRIC_TAG, JobState
from airflow_aip.jobs.vertex.body import job_spec_of
from airflow_aip.jobs.vertex.containers import Runtime, runtime_of
from airflow_aip.jobs.vertex.machines import LEGACY_MACHINES, SCALE_TIERS
from airflow_aip.jobs.vertex.study import search_spec
from airflow_aip.local.store import project_number

VERTEX_KINDS = ("customJobs", "hyperparameterTuningJobs")
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")
_ML_ROLES = (
    ("master", "master"),
    ("worker", "worker"),
    ("ps", "parameterServer"),
    ("evaluator", "evaluator"),
)
_TF_ROLES = ("chief", "worker", "ps", "evaluator")


def snake_case_keys(value: Any) -> Any:
    """TF_CONFIG's ``job`` uses the proto field names (``package_uris``), not JSON's camelCase."""
    if isinstance(value, Mapping):
        return {_CAMEL.sub("_", str(k)).lower(): snake_case_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [snake_case_keys(v) for v in value]
    return value


def ml_service_agent(project_number: str) -> str:
    """Whom an AI Platform job without ``serviceAccount`` ran as: the Cloud ML Service Agent."""
    return f"service-{project_number}@cloud-ml.google.com.iam.gserviceaccount.com"


def vertex_service_agent(project_number: str) -> str:
    """Whom a Vertex AI job without ``serviceAccount`` runs as: the AI Platform Custom Code Service
    Agent (cloud.google.com/vertex-ai/docs/general/access-control, "service agents")."""
    return f"service-{project_number}@gcp-sa-aiplatform-cc.iam.gserviceaccount.com"


def trial_job_id(job_id: str, trial_id: str) -> str:
    """The 19-digit ID of a Vertex trial's own CustomJob: a hash of the tuning job's ID and the trial's.

    Unrelated to the tuning job's ID, as on Vertex (code that derives one from the other fails
    there), and the same on every GET and after a restart, so nothing needs storing. The trial's
    ``CLOUD_ML_JOB_ID`` and its ``Trial.customJob`` both name it.
    """
    digest = hashlib.sha256(f"{job_id}/trials/{trial_id}".encode()).digest()
    return str(10**18 + int.from_bytes(digest[:8], "big") % (9 * 10**18))


@dataclass(frozen=True)
class PoolPlan:
    """One pool of identical replicas: ``count`` processes of ``python -m module args``."""

    cluster_key: str  # CLUSTER_SPEC's key: master/worker/ps/evaluator (ml v1), workerpool0.. (Vertex)
    tf_key: str  # TF_CONFIG's key: master or chief, worker, ps, evaluator
    task_prefix: str  # task names are f"{task_prefix}{index}": master-replica-0, workerpool0-0
    count: int
    python_module: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    # Listed in CLUSTER_SPEC: AI Platform left evaluators out, Vertex lists every pool.
    in_cluster: bool = True
    image_uri: str = ""  # a custom container's image: the replica runs in it (.containers)
    command: tuple[str, ...] = ()  # its entrypoint, replaced ("" keeps the image's)
    package_uris: tuple[str, ...] = ()  # what its replicas pip-install: its own pool's only
    executor_image: str = ""  # a package pool's executorImageUri (Vertex), run in it if the engine has it
    accelerators: str = ""  # "2 x NVIDIA_TESLA_T4" when the pool asks for accelerators
    mounts: tuple[tuple[str, str], ...] = ()  # more binds of a container replica (source, target)
    machine_type: str = ""  # its replicas' machine (.limits holds each to its memory and vCPUs)

    def task_name(self, index: int) -> str:
        return f"{self.task_prefix}{index}"


@dataclass(frozen=True)
class ExecutionPlan:
    """Everything the executor needs to run one stored job, in neither API's vocabulary."""

    job_id: str
    project_env: str  # CLOUD_ML_PROJECT_ID (the project number on Vertex)
    package_uris: tuple[str, ...]  # every pool's, each once; each pool installs its own (PoolPlan)
    pools: tuple[PoolPlan, ...]
    job_json: Mapping[str, Any]  # TF_CONFIG / CLUSTER_SPEC "job"
    output_base: str | None = None  # AIP_MODEL_DIR... live under it
    job_dir_arg: str | None = None  # ml v1 appends --job-dir
    extra_env: tuple[tuple[str, str], ...] = ()
    run_limit: str | None = None
    run_limit_field: str = "scheduling.maxRunningTime"
    run_limit_state: JobState = JobState.CANCELLED
    trial_limit: str | None = None  # Vertex tuning: scheduling.timeout, per trial
    runtime: Runtime | None = None  # the primary pool's executorImageUri
    gcs_mount: bool = False  # Vertex mounts Cloud Storage at /gcs/; AI Platform did not
    max_wait_time: str | None = None
    # Where the record keeps when RUNNING began, if the API reports it (Vertex's startTime does;
    # ml v1's startTime is when the job left the queue, which the executor records for both).
    running_since_field: str | None = None
    tuning: Mapping[str, Any] | None = None
    metric_tag: str = DEFAULT_METRIC_TAG
    notes: tuple[str, ...] = field(default=())
    # Vertex runs each trial as a CustomJob of its own (CLOUD_ML_JOB_ID: :func:`trial_job_id`);
    # AI Platform's trials ran inside the job and saw its ID.
    trials_are_jobs: bool = False
    # Who the trainer is, as its metadata server answers (:mod:`airflow_aip.local.metadata_server`).
    project_id: str = ""
    project_number: str = ""
    service_account: str = ""
    region: str = OPTIONS["region"].default  # [aip] region's default, as an operator given none
    # AI Platform set TF_CONFIG on every job; Vertex AI on distributed ones only (.cluster_env).
    tf_config_always: bool = False

    @property
    def primary(self) -> PoolPlan:
        return self.pools[0]

    @property
    def package_sets(self) -> tuple[tuple[str, ...], ...]:
        """The distinct ``packageUris`` of the pools that run as processes: one environment each."""
        return tuple(dict.fromkeys(p.package_uris for p in self.pools if not p.image_uri and p.package_uris))

    @property
    def images(self) -> tuple[str, ...]:
        """The custom containers' images, each once, in pool order."""
        return tuple(dict.fromkeys(p.image_uri for p in self.pools if p.image_uri))

    def job_id_of(self, trial_id: str | None) -> str:
        """``CLOUD_ML_JOB_ID`` of the job, or of one of its trials."""
        if trial_id and self.trials_are_jobs:
            return trial_job_id(self.job_id, trial_id)
        return self.job_id


def ml_plan(project: str, job: Mapping[str, Any]) -> ExecutionPlan:
    """An ml v1 Job: the replicas of its scale tier (counts exist in CUSTOM only)."""
    ti = job["trainingInput"]
    master_key = "chief" if ti.get("useChiefInTfConfig") else "master"
    pools = [PoolPlan("master", master_key, "master-replica-", 1, "")]
    if ti.get("scaleTier") == "CUSTOM":
        for role, name in _ML_ROLES[1:]:
            count = int(ti.get(f"{name}Count", "0") or 0)
            if count:
                in_cluster = role != "evaluator"
                pools.append(PoolPlan(role, role, f"{role}-replica-", count, "", in_cluster=in_cluster))
    module, args = str(ti.get("pythonModule", "")), tuple(ti.get("args", []))
    configs = {role: ti.get(f"{name}Config") or {} for role, name in _ML_ROLES}
    uris = tuple(ti.get("packageUris") or ())
    pools = [
        PoolPlan(
            p.cluster_key,
            p.tf_key,
            p.task_prefix,
            p.count,
            module,
            args,
            in_cluster=p.in_cluster,
            package_uris=uris,
            accelerators=_ml_accelerators(configs[p.cluster_key]),
            machine_type=_ml_machine(ti, dict(_ML_ROLES)[p.cluster_key]),
        )
        for p in pools
    ]
    master_image = configs["master"].get("imageUri")
    if master_image:  # AI Platform: a role without its own imageUri runs the master's
        pools = [_ml_container(p, configs[p.cluster_key], master_image, args) for p in pools]
    job_json = dict(snake_case_keys(dict(ti)), job_name=f"projects/{project}/jobs/{job['jobId']}")
    scheduling = ti.get("scheduling") or {}
    hyperparameters = ti.get("hyperparameters")
    return ExecutionPlan(
        job_id=str(job["jobId"]),
        project_env=project,
        package_uris=uris,
        pools=tuple(pools),
        job_json=job_json,
        output_base=ti.get("jobDir"),
        job_dir_arg=ti.get("jobDir"),
        run_limit=scheduling.get("maxRunningTime"),
        max_wait_time=scheduling.get("maxWaitTime"),
        tuning=hyperparameters,
        metric_tag=(hyperparameters or {}).get("hyperparameterMetricTag") or DEFAULT_METRIC_TAG,
        project_id=project,
        project_number=project_number(project),
        service_account=ti.get("serviceAccount") or ml_service_agent(project_number(project)),
        region=str(ti.get("region") or OPTIONS["region"].default),
        tf_config_always=True,
    )


def _ml_container(
    pool: PoolPlan, config: Mapping[str, Any], master_image: str, args: tuple[str, ...]
) -> PoolPlan:
    """An ml v1 role's container: ``containerCommand``, then ``containerArgs`` and ``trainingInput.args``.

    [U] unverified: that AI Platform passed both ``containerArgs`` and ``trainingInput.args``, in this order.
    """
    return dataclasses.replace(
        pool,
        python_module="",
        package_uris=(),
        image_uri=str(config.get("imageUri") or master_image),
        command=tuple(config.get("containerCommand") or ()),
        args=(*(config.get("containerArgs") or ()), *args),
    )


def _ml_machine(ti: Mapping[str, Any], name: str) -> str:
    """An ml v1 role's Compute Engine machine type: its ``<role>Type`` (a legacy name translated as
    the Vertex AI backend translates it), else its scale tier's; ``""`` when neither names one."""
    tier = SCALE_TIERS.get(str(ti.get("scaleTier") or "BASIC"), {})
    named = str(ti.get(f"{name}Type") or tier.get(name, ("", 0))[0])
    legacy = LEGACY_MACHINES.get(named)
    return legacy.machine_type if legacy is not None else named


def _ml_accelerators(config: Mapping[str, Any]) -> str:
    """An ml v1 role's ``acceleratorConfig`` as ``"<count> x <type>"``, or ``""``."""
    accelerator = config.get("acceleratorConfig") or {}
    kind = accelerator.get("type")
    if not kind or kind == "ACCELERATOR_TYPE_UNSPECIFIED":
        return ""
    return f"{accelerator.get('count') or 1} x {kind}"


def _vertex_accelerators(machine: Mapping[str, Any]) -> str:
    """A Vertex pool's ``machineSpec`` accelerators as ``"<count> x <type>"``, or ``""``."""
    kind = machine.get("acceleratorType")
    if not kind or kind == "ACCELERATOR_TYPE_UNSPECIFIED":
        return ""
    return f"{machine.get('acceleratorCount') or 1} x {kind}"


# Google's Reduction Server (cloud.google.com/vertex-ai/docs/training/distributed-training: pool 3 of
# the table, workerpool2): an image only Google's registry serves, which speeds NCCL's all-reduce.
REDUCTION_SERVER = "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver"
_REDUCTION_SKIPPED = (
    "{key} runs Google's Reduction Server ({image}): not run locally, so the other pools' all-reduce "
    "goes the way it goes without one ([U] unverified: how NCCL's reduction plugin in a trainer's image "
    "behaves with no server)"
)


def reduction_server(image: str) -> bool:
    """Whether ``image`` is Google's Reduction Server (any tag or digest)."""
    return image.split("@")[0].rsplit(":", 1)[0] == REDUCTION_SERVER if image else False


def _vertex_pools(spec: Mapping[str, Any]) -> tuple[list[PoolPlan], list[str], list[str], list[str]]:
    pools: list[PoolPlan] = []
    uris: list[str] = []
    images: list[str] = []
    notes: list[str] = []
    for index, pool in enumerate(spec["workerPoolSpecs"]):
        count = int(pool.get("replicaCount", "1" if index == 0 else "0") or 0)
        package, container = pool.get("pythonPackageSpec"), pool.get("containerSpec")
        if not count or not (package or container):
            continue
        accelerators = _vertex_accelerators(pool.get("machineSpec") or {})
        machine_type = str((pool.get("machineSpec") or {}).get("machineType") or "")
        key = f"workerpool{index}"
        if container and reduction_server(str(container.get("imageUri", ""))):
            notes.append(_REDUCTION_SKIPPED.format(key=key, image=container["imageUri"]))
            continue
        if container:
            plan = _vertex_container(key, index, count, container)
            pools.append(dataclasses.replace(plan, accelerators=accelerators, machine_type=machine_type))
            continue
        own = tuple(package["packageUris"])
        uris += [u for u in own if u not in uris]
        images.append(package["executorImageUri"])
        env = _env_of(package)
        module, args = package["pythonModule"], tuple(package.get("args") or ())
        pools.append(
            PoolPlan(
                key,
                _TF_ROLES[index],
                f"{key}-",
                count,
                module,
                args,
                env,
                package_uris=own,
                executor_image=str(package["executorImageUri"]),
                accelerators=accelerators,
                machine_type=machine_type,
            )
        )
    if len(set(images)) > 1:
        notes.append(
            f"the pools name {len(set(images))} executorImageUris; a pool that runs in a virtual "
            f"environment gets the primary pool's runtime ({images[0]})"
        )
    return pools, uris, images, notes


def _env_of(program: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple((str(v["name"]), str(v.get("value", ""))) for v in program.get("env") or [])


def _vertex_container(key: str, index: int, count: int, spec: Mapping[str, Any]) -> PoolPlan:
    command, args = tuple(spec.get("command") or ()), tuple(spec.get("args") or ())
    image = str(spec["imageUri"])
    return PoolPlan(
        key, _TF_ROLES[index], f"{key}-", count, "", args, _env_of(spec), image_uri=image, command=command
    )


def vertex_plan(record: Mapping[str, Any]) -> ExecutionPlan:
    """A stored aiplatform v1 job (:mod:`airflow_aip.local.vertex.service`'s record) as a plan."""
    resource = record["resource"]
    tuning_job = record["kind"] == "hyperparameterTuningJobs"
    spec = job_spec_of(resource)
    pools, uris, images, notes = _vertex_pools(spec)
    tuning = search_spec(resource) if tuning_job else None
    timeout = (spec.get("scheduling") or {}).get("timeout")
    # [U] unverified: whether Vertex sets CLOUD_ML_REGION (the SDK reads it: initializer.py).
    extra = (("CLOUD_ML_REGION", str(record["location"])),)
    return ExecutionPlan(
        job_id=str(record["jobId"]),
        project_env=str(record["projectNumber"]),
        package_uris=tuple(uris),
        pools=tuple(pools),
        job_json=snake_case_keys(dict(spec)),
        output_base=(spec.get("baseOutputDirectory") or {}).get("outputUriPrefix"),
        extra_env=extra,
        run_limit=None if tuning_job else timeout,
        run_limit_field="scheduling.timeout",
        trial_limit=timeout if tuning_job else None,
        runtime=runtime_of(images[0]) if images else None,
        gcs_mount=True,
        run_limit_state=JobState.FAILED,
        running_since_field="runningSince",
        tuning=tuning,
        metric_tag=tuning["hyperparameterMetricTag"] if tuning else DEFAULT_METRIC_TAG,
        notes=tuple(notes),
        trials_are_jobs=True,
        project_id=str(record.get("projectId") or record["projectNumber"]),
        project_number=str(record["projectNumber"]),
        service_account=spec.get("serviceAccount") or vertex_service_agent(str(record["projectNumber"])),
        region=str(record["location"]),
    )


def execution_plan(project: str, job: Mapping[str, Any]) -> ExecutionPlan:
    """The plan for a stored job of either API."""
    if job.get("kind") in VERTEX_KINDS:
        return vertex_plan(job)
    return ml_plan(project, job)

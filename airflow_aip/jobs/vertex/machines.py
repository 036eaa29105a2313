"""The tables that turn AI Platform's machines and runtimes into Vertex AI's, each with its source.

AI Platform Training named clusters by scale tier and machines by legacy names (``standard``,
``complex_model_m_gpu``...) and chose the software by ``runtimeVersion``. Vertex AI takes only
Compute Engine machine types with explicit accelerators, and a pre-built training container per
worker pool. These are explicit tables the team owns: a name missing from them is an error that
lists what is known, never a guess.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_aip.exceptions import ValidationError
from airflow_aip.jobs.vertex.containers import DEFAULT_IMAGES
from airflow_aip.jobs.vertex.hardware import check_machine_spec


@dataclass(frozen=True)
class Machine:
    """A Compute Engine machine type with its accelerators (none when ``accelerator`` is empty)."""

    machine_type: str
    accelerator: str = ""
    accelerators: int = 0

    def spec(self) -> dict[str, Any]:
        """This machine as a Vertex AI ``MachineSpec``."""
        out: dict[str, Any] = {"machineType": self.machine_type}
        if self.accelerator:
            out.update(acceleratorType=self.accelerator, acceleratorCount=self.accelerators)
        return out


# Vertex AI ended support for the K80: aiplatform.v1.json, MachineSpec.acceleratorType
# NVIDIA_TESLA_K80: "Deprecated: Nvidia Tesla K80 GPU has reached end of support, see
# https://cloud.google.com/compute/docs/eol/k80-eol". Legacy names that bundled K80s get the same
# number of NVIDIA_TESLA_T4 (Google's entry-level successor, offered on N1 in 1, 2 or 4 GPUs:
# https://cloud.google.com/compute/docs/gpus); the 8-GPU complex_model_l_gpu has no T4 equivalent.
K80_SUBSTITUTE = "NVIDIA_TESLA_T4"

# Legacy machine names -> Compute Engine, from "Machine types" of AI Platform Training,
# https://cloud.google.com/ai-platform/training/docs/machine-types#legacy-machine-types
# (the CPU rows cross-check with the prices per hour of
# https://cloud.google.com/ml-engine/docs/pricing: BASIC = standard, BASIC_GPU = standard_gpu).
# complex_model_s was an n1-highcpu-8, which Vertex AI training does not offer (its machine list,
# https://cloud.google.com/vertex-ai/docs/training/configure-compute, has n1-highcpu from 16): the
# N1 type with the same 8 vCPUs stands in.
LEGACY_MACHINES: dict[str, Machine] = {
    "standard": Machine("n1-standard-4"),
    "large_model": Machine("n1-highmem-8"),
    "complex_model_s": Machine("n1-standard-8"),  # was n1-highcpu-8, see above
    "complex_model_m": Machine("n1-highcpu-16"),
    "complex_model_l": Machine("n1-highcpu-32"),
    "standard_gpu": Machine("n1-standard-8", K80_SUBSTITUTE, 1),  # was 1 x K80
    "complex_model_m_gpu": Machine("n1-standard-16", K80_SUBSTITUTE, 4),  # was 4 x K80
    "standard_p100": Machine("n1-standard-8", "NVIDIA_TESLA_P100", 1),
    "complex_model_m_p100": Machine("n1-standard-16", "NVIDIA_TESLA_P100", 4),
    "standard_v100": Machine("n1-standard-8", "NVIDIA_TESLA_V100", 1),
    "large_model_v100": Machine("n1-highmem-8", "NVIDIA_TESLA_V100", 1),
    "complex_model_m_v100": Machine("n1-standard-16", "NVIDIA_TESLA_V100", 4),
    "complex_model_l_v100": Machine("n1-standard-32", "NVIDIA_TESLA_V100", 8),
}
# Legacy names with no Vertex AI equivalent, and why.
UNTRANSLATABLE_MACHINES: dict[str, str] = {
    "complex_model_l_gpu": (
        "bundled 8 K80 GPUs, which Vertex AI no longer offers, and N1 machines take at most 4 T4s; "
        "use complex_model_l_v100, or a Compute Engine type with an acceleratorConfig"
    ),
    "cloud_tpu": (
        "AI Platform's TPU nodes (a VM driving a separate Cloud TPU) do not exist on Vertex AI, which "
        "trains on TPU VMs in the primary pool (machineType cloud-tpu, acceleratorType TPU_V2/TPU_V3); "
        "describe that pool in vertex_job and adapt the trainer"
    ),
}

# Scale tiers -> (legacy machine, replicas) per role, from "Scale tiers" of
# https://cloud.google.com/ai-platform/training/docs/machine-types#scale_tiers (STANDARD_1: a master,
# 4 workers, 3 parameter servers; PREMIUM_1: a master, 19 workers, 11 parameter servers). The machine
# of each role is derived from the tier prices of https://cloud.google.com/ml-engine/docs/pricing
# (Americas): STANDARD_1 $1.9880 = 5 x complex_model_s $0.2836 + 3 x standard $0.1900;
# PREMIUM_1 $16.5536 = 20 x complex_model_m $0.5672 + 11 x large_model $0.4736.
SCALE_TIERS: dict[str, dict[str, tuple[str, int]]] = {
    "BASIC": {"master": ("standard", 1)},
    "BASIC_GPU": {"master": ("standard_gpu", 1)},
    "STANDARD_1": {
        "master": ("complex_model_s", 1),
        "worker": ("complex_model_s", 4),
        "parameterServer": ("standard", 3),
    },
    "PREMIUM_1": {
        "master": ("complex_model_m", 1),
        "worker": ("complex_model_m", 19),
        "parameterServer": ("large_model", 11),
    },
}
UNTRANSLATABLE_TIERS: dict[str, str] = {"BASIC_TPU": UNTRANSLATABLE_MACHINES["cloud_tpu"]}

# Accelerators of ml v1's AcceleratorConfig that Vertex AI cannot take (see above for the K80).
_TPU_RULE = (
    "TPUs attach to a TPU VM on Vertex AI, not to a Compute Engine machine; describe that pool "
    "(machineType cloud-tpu) in vertex_job"
)
UNTRANSLATABLE_ACCELERATORS: dict[str, str] = {
    "NVIDIA_TESLA_K80": (
        "Vertex AI ended support for the K80 (aiplatform.v1.json: 'has reached end of support'); "
        f"choose another GPU, e.g. {K80_SUBSTITUTE}"
    ),
    **dict.fromkeys(("TPU_V2", "TPU_V3", "TPU_V2_POD", "TPU_V3_POD", "TPU_V4_POD"), _TPU_RULE),
}
# A Compute Engine machine type name: n1-standard-4, a2-highgpu-1g, e2-highmem-16...
_COMPUTE_ENGINE = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)+")


# hardware's MachineSpec fields -> the ml v1 fields they came from.
_ML_V1_FIELDS = {
    "machineType": "Type",
    "acceleratorType": "Config.acceleratorConfig.type",
    "acceleratorCount": "Config.acceleratorConfig.count",
}


def _check_hardware(spec: Mapping[str, Any], path: str) -> None:
    """The translated machine against Vertex AI's table (:mod:`.hardware`), errors named in ml v1 terms."""
    try:
        check_machine_spec(spec, path)
    except ValidationError as error:
        leaf = error.field.rsplit(".", 1)[-1]
        raise ValidationError(f"{path}{_ML_V1_FIELDS.get(leaf, 'Config')}", error.rule) from None


def machine_spec(name: str, accelerator: Mapping[str, Any] | None, path: str) -> dict[str, Any]:
    """A ``MachineSpec`` for an ml v1 machine name (legacy or Compute Engine) and acceleratorConfig.

    ``path`` names the role, e.g. ``trainingInput.master``: errors point at ``<path>Type`` or
    ``<path>Config.acceleratorConfig``.
    """
    if name in UNTRANSLATABLE_MACHINES:
        raise ValidationError(f"{path}Type", f"{name!r} {UNTRANSLATABLE_MACHINES[name]}")
    if name in LEGACY_MACHINES:
        if accelerator:
            raise ValidationError(
                f"{path}Config.acceleratorConfig",
                f"only with a Compute Engine machine type; {name!r} comes with its own accelerators",
            )
        return LEGACY_MACHINES[name].spec()
    if not _COMPUTE_ENGINE.fullmatch(name):
        known = ", ".join([*LEGACY_MACHINES, *UNTRANSLATABLE_MACHINES])
        raise ValidationError(
            f"{path}Type", f"must be a Compute Engine machine type or one of {known}; got {name!r}"
        )
    spec: dict[str, Any] = {"machineType": name}
    if accelerator:
        kind = accelerator.get("type", "ACCELERATOR_TYPE_UNSPECIFIED")
        if kind in UNTRANSLATABLE_ACCELERATORS:
            raise ValidationError(
                f"{path}Config.acceleratorConfig.type", f"{kind}: {UNTRANSLATABLE_ACCELERATORS[kind]}"
            )
        spec.update(acceleratorType=kind, acceleratorCount=int(accelerator.get("count", "0")))
    _check_hardware(spec, path)
    return spec


# runtimeVersion/pythonVersion/framework -> pre-built training container
# (https://cloud.google.com/vertex-ai/docs/training/pre-built-containers).
# AI Platform's last runtime versions, from its runtime version list
# (https://cloud.google.com/ai-platform/training/docs/runtime-version-list): all of them ran Python 3.7
# only (ml.v1.json, TrainingInput.pythonVersion: "Python '3.7' is available when runtime_version is
# set to '1.15' or later"); 1.x runtimes (TensorFlow 1, Python 2.7/3.5) have no Vertex AI container.
RUNTIME_VERSIONS = ("2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "2.7", "2.8", "2.11")
PYTHON_VERSIONS = ("3.7",)
DEFAULT_FRAMEWORK = "tensorflow"
# Every runtime maps to one image per framework and device: the container table's choice.
FRAMEWORK_IMAGES = DEFAULT_IMAGES
_FRAMEWORK_ALIASES = {"sklearn": "scikit-learn", "scikit_learn": "scikit-learn"}
# "Each of the following container images is available in several Artifact Registry repositories"
# (us-, europe-, asia-docker.pkg.dev): we pick the one nearest the job's region.
_REPOSITORIES = (("europe", "europe"), ("asia", "asia"), ("australia", "asia"), ("me-", "asia"))


def framework_name(framework: str | None) -> str:
    """``tensorflow`` when unset; ml v1's enum spelling (``SCIKIT_LEARN``) is accepted too."""
    if framework is None:
        return DEFAULT_FRAMEWORK
    name = framework.strip().lower()
    name = _FRAMEWORK_ALIASES.get(name, name)
    if name not in FRAMEWORK_IMAGES:
        raise ValidationError("framework", f"must be one of {', '.join(FRAMEWORK_IMAGES)}; got {framework!r}")
    return name


def valid_combinations() -> str:
    """The runtime/Python/framework combinations we can translate, for error messages."""
    frameworks = ", ".join(
        f"{name} ({'cpu and gpu' if gpu else 'cpu only'})" for name, (_, gpu) in FRAMEWORK_IMAGES.items()
    )
    return (
        f"valid combinations: runtimeVersion one of {', '.join(RUNTIME_VERSIONS)} with pythonVersion "
        f"{' or '.join(PYTHON_VERSIONS)} (or unset), framework one of {frameworks}; "
        "or pass executor_image_uri"
    )


def _repository(region: str) -> str:
    for prefix, repository in _REPOSITORIES:
        if region.startswith(prefix):
            return repository
    return "us"


def executor_image(spec: Mapping[str, Any], framework: str, *, gpu: bool) -> str:
    """The pre-built training container for a trainingInput's runtime, Python and a framework."""
    runtime, python = spec.get("runtimeVersion"), spec.get("pythonVersion", PYTHON_VERSIONS[0])
    if not runtime:
        raise ValidationError(
            "trainingInput.runtimeVersion", f"is required to choose a container; {valid_combinations()}"
        )
    if runtime not in RUNTIME_VERSIONS:
        raise ValidationError(
            "trainingInput.runtimeVersion", f"{runtime!r} has no Vertex AI container; {valid_combinations()}"
        )
    if python not in PYTHON_VERSIONS:
        raise ValidationError(
            "trainingInput.pythonVersion",
            f"{python!r} with runtimeVersion {runtime!r} has no Vertex AI container; {valid_combinations()}",
        )
    cpu_image, gpu_image = FRAMEWORK_IMAGES[framework]
    image = gpu_image if gpu else cpu_image
    if not image:
        raise ValidationError(
            "trainingInput.runtimeVersion",
            f"{framework} has no GPU container, but a pool has accelerators; {valid_combinations()}",
        )
    repository = _repository(str(spec.get("region", "")))
    return f"{repository}-docker.pkg.dev/vertex-ai/training/{image}:latest"


_GPU_TWINS = {cpu: gpu for cpu, gpu in DEFAULT_IMAGES.values() if gpu}
_REGISTRY = re.compile(r"(?:us|europe|asia)-docker\.pkg\.dev/")


def image_for(uri: str, *, gpu: bool, region: str | None) -> str:
    """A pre-built training image moved to ``region``'s registry and to its GPU (or CPU) twin.

    What a capacity ladder's rung needs when it adds or removes GPUs or changes region: the
    same framework and version, built for the machine it now gets, from the nearest registry.
    A framework with no GPU build (scikit-learn, XGBoost) keeps its CPU image, which runs on a
    GPU machine's CPUs. Any other image (a custom container, gcr.io's global registry) is kept.
    """
    registry = _REGISTRY.match(uri)
    if registry is None:
        return uri
    image = uri[uri.rindex("/") + 1 :].removesuffix(":latest")
    if gpu and image in _GPU_TWINS:
        image = _GPU_TWINS[image]
    elif not gpu and image in _GPU_TWINS.values():
        image = next(cpu for cpu, twin in _GPU_TWINS.items() if twin == image)
    repository = _repository(region) if region else registry.group(0).split("-docker")[0]
    return f"{repository}-docker.pkg.dev/vertex-ai/training/{image}:latest"

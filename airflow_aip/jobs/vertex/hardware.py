"""The machines, accelerators and scheduling Vertex AI custom training accepts: one table, two users.

Google refuses a bad pairing only at create (``400 Accelerator "NVIDIA_TESLA_K80" is not supported
for machine type "n1-standard-4"``), after the package is staged. The local emulator answers the same
400 from this table and the operators check it before sending, so a wrong GPU fails on a laptop.
Pure data and checks, no I/O: the quota simulation imports :func:`vcpus` and :func:`gpu_quota_resource`.

Sources, cited per row: [CC] "Configure compute resources for custom training",
https://cloud.google.com/vertex-ai/docs/training/configure-compute (machine list, GPU compatibility
table, TPUs); [GPU] https://cloud.google.com/compute/docs/gpus (GPU counts and vCPUs per machine);
[LOC] https://cloud.google.com/vertex-ai/docs/general/locations#accelerators; [DWS]
https://cloud.google.com/vertex-ai/docs/training/schedule-jobs-dws; [SPOT]
https://cloud.google.com/vertex-ai/docs/training/use-spot-vms; [API] aiplatform.v1.json
(accelerator_type.proto) ``MachineSpec``, ``DiskSpec`` and ``Scheduling``; [SDK] google-cloud-aiplatform's
docstrings. ``# [U] unverified:`` marks a reading we could not confirm; where it is, we chose what the
documents say.

Memory, per machine type (GB as Compute Engine counts it: GiB, ``memoryMb`` / 1024): [MT]
https://cloud.google.com/compute/docs/machine-types (N1 "3.75 / 6.5 / 0.9 GB per vCPU"); [PIPE]
https://cloud.google.com/vertex-ai/docs/pipelines/machine-types ("e2-standard-4 machine, with 4 core
CPUs and 16GB memory"); [E2] matdevdug/gcp-iam-reference ``GCP_Machine_Types_and_Pricing.md``
(e2-standard 4, e2-highmem 8, e2-highcpu 1 GB per vCPU) [O]; [SKY] skypilot-org/skypilot-catalog
``catalogs/v8/gcp/vms.csv``, read from Compute Engine's API (a2-highgpu-1g 12 vCPUs 85 GB,
a2-ultragpu-1g 170, a2-megagpu-16g 1360, a3-highgpu-1g 26 vCPUs 234 GB ... 8g 1872) [O]. The local
service holds a replica to it (:mod:`airflow_aip.local.executor.limits`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from airflow_aip.exceptions import ValidationError


@dataclass(frozen=True)
class Machine:
    """A machine type: vCPUs, memory in GB (GiB) and a built-in accelerator; an N1 type's GPU limits
    count its memory too."""

    vcpus: int
    memory_gb: float = 0.0
    accelerator: str = ""  # the GPU/TPU the type "must be used with" [CC]; "" for CPU and N1 types
    count: int = 0  # how many; 0 for TPU VMs, whose size is the tpuTopology


def _family(prefix: str, sizes: str, gb_per_vcpu: float = 0.0) -> dict[str, Machine]:
    return {f"{prefix}-{n}": Machine(int(n), int(n) * gb_per_vcpu) for n in sizes.split()}


def _gpus(names: str, accelerator: str, vcpus_per_gpu: int, gb_per_gpu: float) -> dict[str, Machine]:
    """``a2-highgpu-1g 2g...``: the GPU count is the name's ``<n>g`` suffix; vCPUs, memory scale with it."""
    out = {}
    for name in names.split():
        count = int(name.rsplit("-", 1)[1].removesuffix("g"))
        out[name] = Machine(vcpus_per_gpu * count, gb_per_gpu * count, accelerator, count)
    return out


A100, A100_80, L4, H100 = "NVIDIA_TESLA_A100", "NVIDIA_A100_80GB", "NVIDIA_L4", "NVIDIA_H100_80GB"
H100_MEGA, H200, B200, GB200 = "NVIDIA_H100_MEGA_80GB", "NVIDIA_H200_141GB", "NVIDIA_B200", "NVIDIA_GB200"
RTX_PRO, TPU_V2, TPU_V3, TPU_V5E = "NVIDIA_RTX_PRO_6000", "TPU_V2", "TPU_V3", "TPU_V5_LITEPOD"
TPU_VM = "cloud-tpu"
# Every machineType [CC] lists ("you must specify one of the following machine types"); vCPUs from
# Compute Engine's machine pages. n1-standard-2 and smaller, n1-highcpu-2..8, n2d, c2d and c3 are not
# on it. [U] unverified: the python-aiplatform PR #66 review we were given says the same ("n1-standard-2
# is supported in Deploy but not for Training"); we could not re-read it.
MACHINES: dict[str, Machine] = {
    **_family("n1-standard", "4 8 16 32 64 96", 3.75),  # [CC]; 3.75/6.5/0.9 GB per vCPU [GPU] [MT]
    **_family("n1-highmem", "2 4 8 16 32 64 96", 6.5),
    **_family("n1-highcpu", "16 32 64 96", 0.9),
    **_family("e2-standard", "4 8 16 32", 4),  # [CC]; e2-standard-4 16 GB [PIPE]; 4/8/1 GB per vCPU [E2]
    **_family("e2-highmem", "2 4 8 16", 8),
    **_family("e2-highcpu", "16 32", 1),
    # [U] unverified: memory of the N2, N4, C2, M1, G2 and G4 types and the TPU hosts, from Compute
    # Engine's machine pages as we remember them (the search here returned page openings only).
    **_family("n2-standard", "4 8 16 32 48 64 80", 4),  # [CC]; N2 "8 GB of memory per vCPU" at most [MT]
    **_family("n2-highmem", "2 4 8 16 32 48 64 80", 8),
    **_family("n2-highcpu", "16 32 48 64 80", 1),
    **_family("n4-standard", "2 4 8 16 32 48 64 80", 4),  # [CC]
    **_family("n4-highmem", "2 4 8 16 32 48 64 80", 8),
    **_family("n4-highcpu", "2 4 8 16 32 48 64 80", 2),
    **_family("c2-standard", "4 8 16 30 60", 4),  # [CC]
    "m1-ultramem-40": Machine(40, 961),  # [CC]; memory [U]
    "m1-ultramem-80": Machine(80, 1922),
    "m1-ultramem-160": Machine(160, 3844),
    "m1-megamem-96": Machine(96, 1433.6),
    # [CC] table, [GPU]; memory [SKY]
    **_gpus("a2-highgpu-1g a2-highgpu-2g a2-highgpu-4g a2-highgpu-8g", A100, 12, 85),
    "a2-megagpu-16g": Machine(96, 1360, accelerator=A100, count=16),
    **_gpus("a2-ultragpu-1g a2-ultragpu-2g a2-ultragpu-4g a2-ultragpu-8g", A100_80, 12, 170),
    **_gpus("a3-highgpu-1g a3-highgpu-2g a3-highgpu-4g a3-highgpu-8g", H100, 26, 234),
    "a3-megagpu-8g": Machine(208, 1872, accelerator=H100_MEGA, count=8),  # [U] memory of these four
    "a3-ultragpu-8g": Machine(224, 2952, accelerator=H200, count=8),
    "a4-highgpu-8g": Machine(224, 3968, accelerator=B200, count=8),
    "a4x-highgpu-4g": Machine(140, 884, accelerator=GB200, count=4),
    # G2: one L4 up to g2-standard-32, then 2/4/8 [CC] table (g2-standard-32 has 1, 24 has 2); 4 GB
    # per vCPU [U].
    **{f"g2-standard-{n}": Machine(n, 4 * n, L4, 1) for n in (4, 8, 12, 16, 32)},
    **{f"g2-standard-{n}": Machine(n, 4 * n, L4, c) for n, c in ((24, 2), (48, 4), (96, 8))},
    **{f"g4-standard-{n}": Machine(n, 3.75 * n, RTX_PRO, n // 48) for n in (48, 96, 192, 384)},  # [U]
    # [U] unverified: vCPUs and memory of a v2-8/v3-8 TPU VM host; TPU_V2 or TPU_V3 [CC]
    TPU_VM: Machine(96, 335),
    "ct5lp-hightpu-1t": Machine(24, 48, accelerator=TPU_V5E),  # [CC] v5e table (vCPUs too); memory [U]
    "ct5lp-hightpu-4t": Machine(112, 192, accelerator=TPU_V5E),
    "ct5lp-hightpu-8t": Machine(224, 384, accelerator=TPU_V5E),
    "ct6e-standard-1t": Machine(44, 176, accelerator="TPU_V6E"),  # [CC] v6e table (no enum); memory [U]
    "ct6e-standard-4t": Machine(180, 720, accelerator="TPU_V6E"),
    "ct6e-standard-8t": Machine(180, 1440, accelerator="TPU_V6E"),
}
FAMILIES = sorted({name.split("-")[0] for name in MACHINES if name != TPU_VM} | {TPU_VM})
# tpuTopology per TPU VM type [CC]; the multi-host ones are slices of a pod.
_HOSTS = ("2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16")  # ct*-4t: 1 to 64 VMs of 4 chips
TOPOLOGIES: dict[str, tuple[str, ...]] = {
    **{f"{kind}-1t": ("1x1",) for kind in ("ct5lp-hightpu", "ct6e-standard")},
    **{f"{kind}-4t": _HOSTS for kind in ("ct5lp-hightpu", "ct6e-standard")},
    **{f"{kind}-8t": ("2x4",) for kind in ("ct5lp-hightpu", "ct6e-standard")},
}
# GPUs that attach to N1: {count: (max vCPUs, max memory GB)}. [CC]'s compatibility table, which is
# stricter than [GPU] for the T4 (one T4: up to 24 vCPUs there, 48 on Compute Engine) and caps four
# P100s at 64 vCPUs and 208 GB "in all regions and zones"; these limits reproduce every N1 row of it.
N1_GPUS: dict[str, dict[int, tuple[int, int]]] = {
    "NVIDIA_TESLA_T4": {1: (24, 156), 2: (48, 312), 4: (96, 624)},
    "NVIDIA_TESLA_P4": {1: (24, 156), 2: (48, 312), 4: (96, 624)},
    "NVIDIA_TESLA_P100": {1: (16, 104), 2: (32, 208), 4: (64, 208)},
    "NVIDIA_TESLA_V100": {1: (12, 78), 2: (24, 156), 4: (48, 312), 8: (96, 624)},
}
REFUSED_ACCELERATORS = {
    "NVIDIA_TESLA_K80": "the K80 reached end of support (aiplatform.v1.json; compute/docs/eol/k80-eol)",
    # [U] unverified: [CC] documents TPU v2/v3 (cloud-tpu), v5e, v6e and 7x for training, not v4.
    "TPU_V4_POD": "Vertex AI training documents no TPU v4 machine; use cloud-tpu or ct5lp-hightpu-*",
}
# [LOC], "Using accelerators", rows not marked "isn't available for training"; a region it does not
# list has no accelerators for training. Pods are cloud-tpu with 32 or more TPU cores.
_CODES = {"A100": A100, "A100_80": A100_80, "H100": H100, "MEGA": H100_MEGA, "H200": H200, "B200": B200}
_CODES |= {"GB200": GB200, "RTX": RTX_PRO, "L4": L4, "P4": "NVIDIA_TESLA_P4", "P100": "NVIDIA_TESLA_P100"}
_CODES |= {"T4": "NVIDIA_TESLA_T4", "V100": "NVIDIA_TESLA_V100", "V2": TPU_V2, "V3": TPU_V3, "V5E": TPU_V5E}
_CODES |= {"V2POD": "TPU_V2_POD", "V3POD": "TPU_V3_POD", "V6E": "TPU_V6E"}
_REGIONS = """
asia-east1: P100 T4 V2 V100 MEGA | asia-east2: T4 | asia-northeast1: H100 MEGA B200 T4 V6E
asia-northeast3: A100 H100 L4 T4 | asia-south1: H100 L4 T4 H200 | asia-south2: H200 RTX
asia-southeast1: A100 A100_80 B200 H100 MEGA L4 P4 T4 RTX | asia-southeast2: T4
australia-southeast1: MEGA P4 T4 | europe-central2: T4 | europe-north1: MEGA
europe-west1: H100 MEGA H200 P100 T4 | europe-west2: H100 L4 T4 | europe-west3: H100 MEGA T4
europe-west4: A100 A100_80 H100 MEGA H200 B200 L4 P4 T4 V100 P100 RTX V2 V2POD V3 V3POD V6E
me-central2: L4 | me-west1: A100 | northamerica-northeast1: P4 T4 | northamerica-northeast2: H100 L4
southamerica-east1: T4 | southamerica-west1: V6E
us-central1: A100 A100_80 B200 H100 MEGA GB200 H200 L4 P4 P100 T4 RTX V2 V2POD V3 V5E V6E V100
us-east1: A100 B200 L4 P100 T4 RTX V5E V6E V100
us-east4: A100_80 H100 MEGA H200 B200 GB200 L4 P4 T4 RTX | us-east5: A100_80 H100 MEGA H200 V6E
us-south1: V6E B200 H200 | us-west1: MEGA H200 L4 P100 T4 H100 V5E V100 | us-west2: P4 T4 B200
us-west3: A100 B200 | us-west4: A100 H100 MEGA T4 V5E
"""
REGION_ACCELERATORS = {
    region.strip(): frozenset(_CODES[code] for code in codes.split())
    for region, codes in (row.split(":") for row in _REGIONS.replace("\n", " | ").split(" | ") if row.strip())
}
# [DWS] "requests L4, A100, H100, H200, or B200 GPUs". [U] unverified: that "H100" covers H100 Mega.
FLEX_START_GPUS = frozenset({L4, A100, A100_80, H100, H100_MEGA, H200, B200})
MAX_FLEX_START_TIMEOUT = 7 * 24 * 3600  # [DWS] "a maximum timeout of 7 days or less"
# Quota metrics (aiplatform.googleapis.com/<metric>): T4, L4, V100, A100, A100 80GB and TPU v3/v5e as
# Vertex's Model Garden notebooks name them, H100 and its preemptible twin from [DWS], P4 from a
# RESOURCE_EXHAUSTED answer; [U] unverified: P100, H100 Mega, H200, B200, GB200, RTX PRO, TPU v2.
_QUOTA = {"NVIDIA_TESLA_T4": "nvidia_t4_gpus", "NVIDIA_TESLA_P4": "nvidia_p4_gpus", L4: "nvidia_l4_gpus"}
_QUOTA |= {"NVIDIA_TESLA_P100": "nvidia_p100_gpus", "NVIDIA_TESLA_V100": "nvidia_v100_gpus"}
_QUOTA |= {A100: "nvidia_a100_gpus", A100_80: "nvidia_a100_80gb_gpus", H100: "nvidia_h100_gpus"}
_QUOTA |= {H100_MEGA: "nvidia_h100_mega_gpus", H200: "nvidia_h200_gpus", B200: "nvidia_b200_gpus"}
_QUOTA |= {GB200: "nvidia_gb200_gpus", RTX_PRO: "nvidia_rtx_pro_6000_gpus"}
_QUOTA |= {TPU_V2: "tpu_v2", TPU_V3: "tpu_v3", TPU_V5E: "tpu_v5e"}
_NONE = ("", "ACCELERATOR_TYPE_UNSPECIFIED")
# [API] DiskSpec.bootDiskType: 'Valid values: "pd-ssd" ..., "pd-standard" ... or "hyperdisk-balanced"'.
BOOT_DISK_TYPES = ("pd-ssd", "pd-standard", "hyperdisk-balanced")
# [SDK] google-cloud-aiplatform 2.7.0 (jobs.py CustomJob.from_local_script, training_jobs.py,
# utils/worker_spec_utils.py): "boot disk size must be within the range of [100, 64000]".
# 0 is proto3's unset value: the default, 100 GB.
BOOT_DISK_GB = (100, 64000)


def machine(machine_type: str, field: str = "machineSpec.machineType") -> Machine:
    """The table's row for a training machine type; anything else is refused, listing the families."""
    found = MACHINES.get(machine_type)
    if found is None:
        raise ValidationError(
            field,
            f'Machine type "{machine_type}" is not supported for custom training; use a type of the '
            f"families {', '.join(FAMILIES)} (e.g. n1-standard-4; n1-standard-2 and smaller serve "
            "predictions only), see https://cloud.google.com/vertex-ai/docs/training/configure-compute",
        )
    return found


def vcpus(machine_type: str) -> int:
    """vCPUs of one replica of ``machine_type`` (ValidationError if training cannot use it)."""
    return machine(machine_type).vcpus


def gpu_quota_resource(accelerator_type: str | None, *, preemptible: bool = False) -> str:
    """Vertex's quota metric an accelerator draws on (``custom_model_training_cpus`` for none).

    Spot and FLEX_START jobs draw on the ``preemptible`` twin ([DWS]; [U] unverified for CPUs).
    """
    if (accelerator_type or "") in _NONE:
        metric = "cpus"
    elif accelerator_type in _QUOTA:
        metric = _QUOTA[accelerator_type]
    else:
        raise ValidationError("machineSpec.acceleratorType", f"{accelerator_type} has no training quota")
    return f"custom_model_training_{'preemptible_' if preemptible else ''}{metric}"


def _attaches_to(accelerator: str) -> str:
    if accelerator in N1_GPUS:
        return "n1-standard-*, n1-highmem-* and n1-highcpu-* machine types"
    if accelerator in (TPU_V2, TPU_V3):
        return TPU_VM
    names = [name for name, row in MACHINES.items() if row.accelerator == accelerator]
    return ", ".join(names) if names else "no machine type for training"


def _allowed_counts(name: str, row: Machine, accelerator: str) -> list[int] | None:
    """The acceleratorCount values of a pairing ([] = any); None when the pairing is refused."""
    if name.startswith("n1-") and accelerator in N1_GPUS:
        limits = N1_GPUS[accelerator]
        counts = [n for n, (cpus, gb) in limits.items() if row.vcpus <= cpus and row.memory_gb <= gb]
        return counts or None
    if name == TPU_VM and accelerator in (TPU_V2, TPU_V3):
        return []  # 8, or a multiple of 32 for a pod: checked apart
    if row.accelerator and accelerator == row.accelerator:
        return [row.count] if row.count else []  # [U] unverified: any count with TPU_V5_LITEPOD
    return None


def _required(name: str, row: Machine) -> str:
    """The accelerator a type "must be used with" [CC] ("" when none); v5e/v6e size by tpuTopology."""
    return f"{TPU_V2} or {TPU_V3}" if name == TPU_VM else row.accelerator if row.count else ""


def check_disk_spec(spec: Mapping[str, Any], path: str, name: str = "diskSpec") -> None:
    """A worker pool's ``diskSpec``: a documented boot disk type, 100 to 64,000 GB.

    ``name``: the field's name under ``path`` (ml v1's ``diskConfig``, translated to it).

    [U] unverified: that hyperdisk-balanced works on every machine type (the document names it
    the A3 Ultra default only); it is taken everywhere, the side that refuses nothing Google takes.
    """
    where = f"{path}.{name}"
    kind = spec.get("bootDiskType") or ""
    if kind and kind not in BOOT_DISK_TYPES:
        raise ValidationError(
            f"{where}.bootDiskType",
            f'Boot disk type "{kind}" is not supported; valid values: {", ".join(BOOT_DISK_TYPES)}',
        )
    size = int(spec.get("bootDiskSizeGb") or 0)
    low, high = BOOT_DISK_GB
    if size and not low <= size <= high:
        raise ValidationError(
            f"{where}.bootDiskSizeGb",
            f"Boot disk size must be within the range of [{low}, {high}] GB; got {size}",
        )


def check_machine_spec(spec: Mapping[str, Any], path: str, region: str | None = None) -> None:
    """A worker pool's ``machineSpec`` against the table; ``path`` names the pool.

    Per-region availability applies only when ``region`` is given (the body has no region).
    """
    where, name = f"{path}.machineSpec", str(spec.get("machineType", ""))
    row = machine(name, f"{where}.machineType")
    accelerator = str(spec.get("acceleratorType") or "").replace(_NONE[1], "")
    count = int(spec.get("acceleratorCount") or 0)
    pairing = "Both acceleratorType and acceleratorCount should be specified or none"
    if count < 0:
        raise ValidationError(f"{where}.acceleratorCount", f"must not be negative, got {count}")
    if accelerator and not count:
        raise ValidationError(f"{where}.acceleratorCount", f"{pairing}; got {accelerator} with no count")
    if count and not accelerator:
        raise ValidationError(f"{where}.acceleratorType", f"{pairing}; got a count of {count} with no type")
    if not accelerator and _required(name, row):
        raise ValidationError(
            f"{where}.acceleratorType", f'machine type "{name}" must be used with {_required(name, row)}'
        )
    if accelerator:
        _check_pairing(name, row, accelerator, count, where)
    if name in TOPOLOGIES and spec.get("tpuTopology") not in TOPOLOGIES[name]:
        raise ValidationError(
            f"{where}.tpuTopology",
            f"{name} takes one of {', '.join(TOPOLOGIES[name])}; got {spec.get('tpuTopology')!r}",
        )
    kind = f"{accelerator}_POD" if name == TPU_VM and count >= 32 else accelerator or row.accelerator
    _check_region(kind, name, f"{where}.{'acceleratorType' if accelerator else 'machineType'}", region)


def _check_pairing(name: str, row: Machine, accelerator: str, count: int, where: str) -> None:
    if accelerator in REFUSED_ACCELERATORS:
        raise ValidationError(
            f"{where}.acceleratorType", f"{accelerator}: {REFUSED_ACCELERATORS[accelerator]}"
        )
    allowed = _allowed_counts(name, row, accelerator)
    if allowed is None:
        raise ValidationError(
            f"{where}.acceleratorType",
            f'Accelerator "{accelerator}" is not supported for machine type "{name}"; '
            f"{accelerator} attaches to {_attaches_to(accelerator)}",
        )
    if allowed and count not in allowed:
        raise ValidationError(
            f"{where}.acceleratorCount",
            f'The accelerator count "{count}" is not allowed. The allowed numbers of accelerator '
            f'"{accelerator}" to use with machine type "{name}" are: {allowed}.',
        )
    # [CC]: 8 cores, or "32 or multiple of 32" for a v2 pod; [U] unverified: v3's "32+" read the same way.
    if name == TPU_VM and count != 8 and count % 32:
        raise ValidationError(
            f"{where}.acceleratorCount", f"{accelerator} takes 8 or 32*n cores, got {count}"
        )


def _check_region(kind: str, name: str, field: str, region: str | None) -> None:
    if region is None or not kind or kind in REGION_ACCELERATORS.get(region, ()):
        return
    raise ValidationError(
        field,
        f"{kind} (machine type {name}) is not available for training in {region}; see "
        "https://cloud.google.com/vertex-ai/docs/general/locations#accelerators",
    )


def _pools(spec: Mapping[str, Any]) -> list[tuple[int, Mapping[str, Any]]]:
    """(index, machineSpec) of the pools that run; a skipped pool has no machineType."""
    pools = enumerate(spec.get("workerPoolSpecs") or [])
    return [(i, p["machineSpec"]) for i, p in pools if (p.get("machineSpec") or {}).get("machineType")]


def is_tpu_pod(machine_spec: Mapping[str, Any]) -> bool:
    """cloud-tpu with 32+ cores; [U] unverified: a multi-host v5e/v6e topology counts as a pod."""
    name = machine_spec.get("machineType", "")
    if name == TPU_VM:
        return int(machine_spec.get("acceleratorCount") or 0) >= 32
    return name in TOPOLOGIES and machine_spec.get("tpuTopology") != TOPOLOGIES[name][0]


def check_tpu_pools(spec: Mapping[str, Any], path: str) -> None:
    """[CC]: "When you use a TPU VM ... you must only use a single worker pool" (of one replica)."""
    pools = _pools(spec)
    if len(pools) > 1 and any(s["machineType"] in (TPU_VM, *TOPOLOGIES) for _, s in pools):
        raise ValidationError(
            f"{path}.workerPoolSpecs[{pools[1][0]}]", "a TPU VM job has one worker pool only"
        )


def check_scheduling(spec: Mapping[str, Any], path: str) -> None:
    """``scheduling`` (GoogleCloudAiplatformV1Scheduling) against the pools of a ``CustomJobSpec``."""
    scheduling, where = spec.get("scheduling") or {}, f"{path}.scheduling"
    strategy = scheduling.get("strategy", "STRATEGY_UNSPECIFIED")
    if "maxWaitDuration" in scheduling and strategy != "FLEX_START":
        # [API] "the maximum duration that a job will wait ... if the scheduling strategy is set to
        # FLEX_START"; [U] unverified: that Google refuses it under another strategy.
        raise ValidationError(f"{where}.maxWaitDuration", f"only with strategy FLEX_START, got {strategy}")
    pods = [index for index, machine_spec in _pools(spec) if is_tpu_pod(machine_spec)]
    if strategy == "SPOT" and pods:  # [SPOT] "Using Spot VMs with TPU Pods isn't supported"
        raise ValidationError(f"{where}.strategy", f"SPOT does not take TPU pods (worker pool {pods[0]})")
    if strategy == "FLEX_START":
        _check_flex_start(spec, path)


def _check_flex_start(spec: Mapping[str, Any], path: str) -> None:
    """[DWS] requirements: a listed GPU, the same machine in every pool, a timeout of 7 days at most."""
    pools = _pools(spec)
    keys = ("machineType", "acceleratorType", "acceleratorCount")
    first = {k: pools[0][1].get(k) for k in keys} if pools else {}
    for index, machine_spec in pools:
        where = f"{path}.workerPoolSpecs[{index}].machineSpec"
        gpu = machine_spec.get("acceleratorType")
        if gpu not in FLEX_START_GPUS:
            raise ValidationError(
                f"{where}.acceleratorType",
                f"FLEX_START (Dynamic Workload Scheduler) takes L4, A100, H100, H200 or B200 GPUs; got {gpu}",
            )
        if {k: machine_spec.get(k) for k in keys} != first:
            raise ValidationError(
                where, "FLEX_START needs the same machine configuration in every worker pool"
            )
    timeout = (spec.get("scheduling") or {}).get("timeout")
    if timeout is not None and Decimal(str(timeout).removesuffix("s")) > MAX_FLEX_START_TIMEOUT:
        raise ValidationError(
            f"{path}.scheduling.timeout", f"FLEX_START takes a timeout of 7 days or less, got {timeout}"
        )

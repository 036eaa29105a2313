"""Billing Catalog SKUs of Vertex AI read as price table rows: which SKU prices which row, pure.

``services.skus.list`` (cloudbilling v1) answers each SKU with a ``description``, the regions it
is sold in (``serviceRegions``), a ``category.usageType`` (``OnDemand``, ``Preemptible``...)
and a ``pricingInfo[].pricingExpression`` (``usageUnit``; ``tieredRates[].unitPrice`` in
``units`` and ``nanos``). Mapping a worker pool to SKUs is ours (Google publishes no estimator
for a CustomJob), by the words of the description:

- only training SKUs (the description says ``Training``); commitments are left out;
- a machine row when the description names a machine type of our table (``N1 Standard 4`` or
  ``n1-standard-4``); an accelerator row when it names a GPU (``Nvidia Tesla T4``);
- Spot when it says ``Spot`` or ``Preemptible`` (or the usage type is ``Preemptible``);
  Flex-Start when it says ``DWS`` or ``Flex``; else the standard row;
- the price of the first tier, per hour;
- a family's per-vCPU and per-GB SKUs (``Vertex AI: Training/Pipelines on N1 Predefined Instance
  Core running in Americas``, ``... Ram ...``) price each of its machine types whose memory we know
  (vCPUs x core + GB x RAM), unless a SKU prices the machine type itself;
- a ``management fee`` SKU is never a row: Vertex AI adds it to Compute Engine's SKUs for Spot,
  Flex-Start and reservations, so on its own it is a fraction of the price (the H100's fee is
  USD 1.47 an hour against 11.27 on demand).

The wording above is as public bills and scripts quote it (the table's ``sources``); it was not
read from the catalog itself here. A SKU that names nothing we know is skipped (and counted),
never guessed. [U] unverified: Spot and Flex-Start on Vertex AI bill through Compute Engine's
SKUs plus that fee, which this mapping (Vertex AI's service only) does not combine yet.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from airflow_aip.jobs.vertex.hardware import MACHINES

VERTEX_AI_SERVICE = "C7E2-9256-1C43"  # the Billing Catalog's Vertex AI, as public scripts and bills name it
GPUS = {  # words of a SKU's description -> acceleratorType, longest first
    "a100 80gb": "NVIDIA_A100_80GB",
    "h100 80gb": "NVIDIA_H100_80GB",
    "h100 mega": "NVIDIA_H100_MEGA_80GB",
    "tesla a100": "NVIDIA_TESLA_A100",
    "tesla t4": "NVIDIA_TESLA_T4",
    "tesla p4": "NVIDIA_TESLA_P4",
    "tesla p100": "NVIDIA_TESLA_P100",
    "tesla v100": "NVIDIA_TESLA_V100",
    "nvidia l4": "NVIDIA_L4",
    "h200": "NVIDIA_H200_141GB",
    "b200": "NVIDIA_B200",
}
_PER_HOUR = {"h": 1.0, "min": 60.0, "s": 3600.0, "GiBy.h": 1.0, "GBy.h": 1.0}
_PART = re.compile(r"\b([a-z]\d[a-z]?) (?:predefined )?instance (core|ram)\b")
Row = tuple[str, str, str, str]  # (region, section: "" | spot | flex_start, machines | accelerators, name)


def _section(sku: Mapping[str, Any], text: str) -> str | None:
    usage = str((sku.get("category") or {}).get("usageType") or "OnDemand")
    if usage.startswith("Commit"):
        return None
    if "spot" in text or "preemptible" in text or usage == "Preemptible":
        return "spot"
    if "dws" in text or "flex" in text:
        return "flex_start"
    return ""


def _named(text: str) -> tuple[str, str] | None:
    words = f" {re.sub(r'[^a-z0-9]+', ' ', text)} "
    for name in sorted(MACHINES, key=len, reverse=True):
        if f" {name.replace('-', ' ')} " in words:
            return "machines", name
    for words, accelerator in GPUS.items():
        if words in text:
            return "accelerators", accelerator
    return None


def hourly_price(sku: Mapping[str, Any]) -> float | None:
    """The first tier's price per hour, or None when the SKU's unit is not a time."""
    for info in sku.get("pricingInfo") or []:
        expression = info.get("pricingExpression") or {}
        per = _PER_HOUR.get(str(expression.get("usageUnit")))
        tiers = expression.get("tieredRates") or []
        if per is None or not tiers:
            return None
        price = tiers[0].get("unitPrice") or {}
        return (int(price.get("units") or 0) + int(price.get("nanos") or 0) / 1e9) * per
    return None


def _composed(parts: Mapping[tuple[str, str, str, str], float]) -> dict[Row, float]:
    """Machine rows from a family's per-vCPU and per-GB prices: vCPUs x core + GB x RAM."""
    rows: dict[Row, float] = {}
    for (region, section, family, part), core in parts.items():
        ram = parts.get((region, section, family, "ram"))
        if part != "core" or ram is None:
            continue
        for name, machine in MACHINES.items():
            if name.startswith(f"{family}-") and machine.memory_gb:
                rows[(region, section, "machines", name)] = machine.vcpus * core + machine.memory_gb * ram
    return rows


def sku_rows(skus: Iterable[Mapping[str, Any]]) -> tuple[dict[Row, float], int]:
    """Every row the SKUs price (region, section, kind, name) -> USD per hour; and how many were skipped."""
    rows: dict[Row, float] = {}
    parts: dict[tuple[str, str, str, str], float] = {}
    skipped = 0
    for sku in skus:
        text = str(sku.get("description") or "").lower()
        usable = "training" in text and "management fee" not in text
        section = _section(sku, text) if usable else None
        part = _PART.search(text) if section is not None else None
        named = _named(text) if section is not None and part is None else None
        price = hourly_price(sku) if named is not None or part is not None else None
        if section is None or (named is None and part is None) or price is None:
            skipped += 1
            continue
        for region in sku.get("serviceRegions") or []:
            if part is not None:
                parts[(str(region), section, part.group(1), part.group(2))] = price
            elif named is not None:
                rows[(str(region), section, *named)] = price
    return {**_composed(parts), **rows}, skipped

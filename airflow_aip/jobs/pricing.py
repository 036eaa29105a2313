"""One price table for what a Vertex AI custom job bills, with its source and date, pure.

The table is a data file (``jobs/prices/vertex_training.json``, a snapshot shipped so everything
works offline; ``python -m airflow_aip.pricing refresh`` rewrites it from Google's Billing
Catalog API). Per region it holds the hourly rate of each machine type and accelerator, each
boot disk type's rate per GB-hour, and Spot's and Flex-Start's own machine and accelerator rows;
a pool that consumes a reservation is counted at the on-demand rows (the reservation bills its
machines whether or not the job runs). Time is billed in ``billing_increment_seconds``.

Each row says how it is known (``provenance``, keyed ``region/[spot|flex_start/]kind/name``):
``sourced`` (a published figure, with the source's URL and the day it was seen in ``sources``),
``derived`` (arithmetic on sourced unit prices) or ``unverified``; a row without an entry is
unverified. A price the table does not hold is *unknown*: :meth:`PriceTable.pool_rate` names the missing
row (``spot accelerator NVIDIA_L4 in us-central1``) and gives no number. Nothing estimates a
missing price as zero: a budget checked against a zero would let a job run on for ever.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from airflow_aip.exceptions import ValidationError

SNAPSHOT = Path(__file__).parent / "prices" / "vertex_training.json"
STRATEGY_SECTIONS = {"SPOT": "spot", "FLEX_START": "flex_start"}  # STANDARD: the region's own rows


@dataclass(frozen=True)
class Rate:
    """A pool's rate per hour (all its replicas), or the rows the table lacks for it (``unknown``)."""

    per_hour: float
    unknown: tuple[str, ...] = ()
    unverified: tuple[str, ...] = ()  # the rows used that no source confirms (``provenance``)

    @property
    def known(self) -> bool:
        return not self.unknown


@dataclass(frozen=True)
class PriceTable:
    """A loaded price table: ``data`` as the file holds it (see the module docstring)."""

    data: Mapping[str, Any]
    path: str = ""

    @classmethod
    def load(cls, path: str | Path | None = None) -> PriceTable:
        """The table at ``path`` (default: the shipped snapshot); ValidationError when it is not one."""
        return _load(str(path or SNAPSHOT))

    @property
    def currency(self) -> str:
        return str(self.data["currency"])

    @property
    def date(self) -> str:
        """The day the table was written (``source.as_of``): every figure says which table it is from."""
        return str(self.data["source"]["as_of"])

    @property
    def source(self) -> str:
        return str(self.data["source"]["page"])

    @property
    def increment(self) -> float:
        return float(self.data.get("billing_increment_seconds") or 1)

    def describe(self) -> str:
        """``the price table of 2026-11-29 (https://...)``: how a line names the table it used."""
        return f"the price table of {self.date} ({self.source})"

    def billed_seconds(self, seconds: float) -> float:
        """Seconds as billed: rounded up to the billing increment."""
        step = self.increment
        return math.ceil(max(0.0, seconds) / step - 1e-9) * step

    def _rows(self, region: str, strategy: str, kind: str) -> tuple[Mapping[str, Any], str]:
        regional = (self.data.get("regions") or {}).get(region) or {}
        section = STRATEGY_SECTIONS.get(strategy)
        if section is None:
            return regional.get(kind) or {}, ""
        return (regional.get(section) or {}).get(kind) or {}, f"{section.replace('_', '-')} "

    def _unverified(self, region: str, strategy: str, kind: str, name: str) -> list[str]:
        """``[the row as a line names it]`` when no source confirms it, else ``[]``."""
        section = STRATEGY_SECTIONS.get(strategy, "")
        key = f"{region}/{section}/{kind}/{name}" if section else f"{region}/{kind}/{name}"
        return [] if self.provenance(key) != "unverified" else [_describe_row(region, section, kind, name)]

    def pool_rate(self, pool: Mapping[str, Any], region: str, strategy: str = "STANDARD") -> Rate:
        """One worker pool's rate per hour, all replicas: machine + accelerators + boot disk."""
        replicas = int(pool.get("replicas") or 1)
        total, unknown, unverified = 0.0, [], []
        machines, prefix = self._rows(region, strategy, "machines")
        machine_type = str(pool.get("machine_type") or "")
        if machine_type in machines:
            total += float(machines[machine_type])
            unverified += self._unverified(region, strategy, "machines", machine_type)
        else:
            unknown.append(f"{prefix}machine {machine_type or '(none)'} in {region}")
        accelerator, count = pool.get("accelerator_type"), int(pool.get("accelerator_count") or 0)
        if accelerator and count:
            accelerators, _ = self._rows(region, strategy, "accelerators")
            if accelerator in accelerators:
                total += count * float(accelerators[accelerator])
                unverified += self._unverified(region, strategy, "accelerators", accelerator)
            else:
                unknown.append(f"{prefix}accelerator {accelerator} in {region}")
        disks = ((self.data.get("regions") or {}).get(region) or {}).get("disks") or {}
        disk_type = str(pool.get("disk_type") or "pd-ssd")
        if disk_type in disks:
            total += int(pool.get("disk_gb") or 0) * float(disks[disk_type])
            unverified += self._unverified(region, "STANDARD", "disks", disk_type)
        else:
            unknown.append(f"boot disk {disk_type} in {region}")
        return Rate(replicas * total, tuple(unknown), tuple(unverified))

    def job_rate(self, usage: Mapping[str, Any], region: str, strategy: str | None = None) -> Rate:
        """A job's rate per hour (one trial's, for a tuning job): the sum of its pools'.

        ``strategy``: the rows to use (default: the job's own; ``STANDARD`` prices the same work on
        standard VMs, which is what a Spot or Flex-Start job saves against). A reservation's
        pools are counted at the on-demand rows.
        """
        chosen = strategy or str(usage.get("strategy") or "STANDARD")
        if usage.get("reserved"):
            chosen = "STANDARD"
        pools = usage.get("pools") or []
        if not pools:
            return Rate(0.0, (f"worker pools of the job in {region}",))
        rates = [self.pool_rate(pool, region, chosen) for pool in pools]
        unknown = tuple(row for rate in rates for row in rate.unknown)
        unverified = tuple(dict.fromkeys(row for rate in rates for row in rate.unverified))
        return Rate(sum(rate.per_hour for rate in rates), unknown, unverified)

    def has_currency(self, currency: str) -> bool:
        return currency == self.currency

    def provenance(self, key: str) -> str:
        """How the row ``region/[section/]kind/name`` is known: sourced, derived or unverified."""
        return str(((self.data.get("provenance") or {}).get(key) or {}).get("status") or "unverified")

    def row_keys(self) -> list[str]:
        """Every priced row's key, as ``provenance`` names it."""
        keys = []
        for region, regional in (self.data.get("regions") or {}).items():
            for section in ("", *STRATEGY_SECTIONS.values()):
                holder = (regional.get(section) or {}) if section else regional
                for kind in ("machines", "accelerators", "disks"):
                    prefix = f"{region}/{section}/" if section else f"{region}/"
                    keys += [f"{prefix}{kind}/{name}" for name in holder.get(kind) or {}]
        return keys

    def provenance_counts(self) -> dict[str, int]:
        """How many rows are sourced, derived and unverified: what ``show`` says of the table."""
        counts = {"sourced": 0, "derived": 0, "unverified": 0}
        for key in self.row_keys():
            counts[self.provenance(key)] = counts.get(self.provenance(key), 0) + 1
        return counts


@lru_cache(maxsize=8)
def _load(path: str) -> PriceTable:
    try:
        data = json.loads(Path(path).read_text())
        str(data["currency"]), str(data["source"]["as_of"]), str(data["source"]["page"])
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ValidationError("price_table", f"{path} is not a price table: {err}") from err
    return PriceTable(data, path)


def _describe_row(region: str, section: str, kind: str, name: str) -> str:
    prefix = f"{section.replace('_', '-')} " if section else ""
    return f"{prefix}{kind[:-1]} {name} in {region}"


def refreshed(
    data: Mapping[str, Any], rows: Mapping[tuple[str, str, str, str], float], *, as_of: str, source: str
) -> tuple[dict[str, Any], list[str]]:
    """The table with the fetched rows (region, section, kind, name) -> per hour, and what changed.

    Rows the fetch did not price are kept from the table before (the change list counts them);
    the source and date become the fetch's.
    """
    out = json.loads(json.dumps(data))
    changes: list[str] = []
    for (region, section, kind, name), price in sorted(rows.items()):
        regional = out.setdefault("regions", {}).setdefault(region, {})
        holder = regional.setdefault(section, {}) if section else regional
        table = holder.setdefault(kind, {})
        old = table.get(name)
        described = _describe_row(region, section, kind, name)
        if old is None:
            changes.append(f"+ {described}: {price:.6g}")
        elif abs(float(old) - price) > 1e-9:
            changes.append(f"~ {described}: {float(old):.6g} -> {price:.6g}")
        table[name] = round(price, 9)
        key = f"{region}/{section}/{kind}/{name}" if section else f"{region}/{kind}/{name}"
        out.setdefault("provenance", {})[key] = {"status": "sourced", "source": "catalog"}
    out.setdefault("sources", {})["catalog"] = {"url": source, "seen": as_of, "quote": "services.skus.list"}
    out["source"] = {
        "page": source,
        "as_of": as_of,
        "how": "fetched from the Billing Catalog API (services.skus.list) by `python -m airflow_aip.pricing "
        "refresh`; rows the catalog did not price are kept from the table before",
    }
    return out, changes

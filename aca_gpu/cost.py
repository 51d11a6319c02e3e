"""Cost estimates for GPU runs from ACA's own meters: always labelled an estimate and its table.

A serverless GPU replica bills per second on three meters at once: the profile's GPU meter
(`Standard NC T4 v3 GPU Usage`, `Standard NC A100 v4 GPU Usage`) on top of `Standard vCPU Active
Usage` and `Standard Memory Active Usage` for the replica's vCPUs and GiB (no idle rate for GPU
apps). A dedicated GPU node bills by the hour: its vCPUs, GiB and GPUs on the `Dedicated …` meters,
plus `Dedicated Plan Management` per environment (that mapping is inferred, and says so).

The bundled table (gpu/data/prices.json) holds the meters per region with the date and source of
each; `price_refresh` replaces a region's meters from the Retail Prices API into a local cache. Every
figure names the table it came from (`PriceTable.label`), so a user can tell a bundled guess from a
price read this morning.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aca_gpu.errors import BadInput
from aca_gpu.gpu.profiles import GpuProfile, profile_catalog, resolve_profile
from aca_gpu.resources import data_path
from aca_gpu.units import duration_text, gpu_seconds_text, per_second, usd_text


def default_cache_path() -> Path:
    base = os.environ.get("ACAGPU_CACHE_DIR")
    return Path(base) / "prices.json" if base else Path.home() / ".cache" / "acagpu" / "prices.json"


@dataclass(frozen=True)
class Meter:
    """One ACA meter in one region, as a per-second (or per-hour) rate."""

    name: str
    region: str
    per_second: float
    date: str
    source: str
    unconfirmed: str | None = None

    @property
    def per_hour(self) -> float:
        return self.per_second * 3600


@dataclass(frozen=True)
class PriceTable:
    """The price document (prices.json shape) plus where it came from ("bundled" or "cache")."""

    doc: Mapping[str, Any]
    origin: str

    @property
    def source(self) -> str:
        return str(self.doc.get("source", ""))

    @property
    def region(self) -> str:
        """The region a location the table does not list is priced as."""
        return str(self.doc.get("default_region", "eastus"))

    @property
    def regions(self) -> list[str]:
        return sorted(self.doc.get("regions", {}))

    @property
    def label(self) -> str:
        """Which table: `bundled table 2026-11-24`, or
        `refreshed 2026-11-24T09:00Z (eastus; Retail Prices API)`."""
        refreshed = self.doc.get("refreshed")
        if self.origin == "cache" and isinstance(refreshed, Mapping):
            regions = ", ".join(sorted(refreshed.get("regions", {})))
            return f"refreshed {refreshed.get('at', '?')} ({regions}; Retail Prices API)"
        return f"bundled table {self.doc.get('date', '?')}"

    def region_for(self, location: str | None) -> str:
        wanted = (location or "").replace(" ", "").lower()
        return wanted if wanted in self.doc.get("regions", {}) else self.region

    def meter(self, name: str, location: str | None = None) -> Meter:
        region = self.region_for(location)
        row = self.doc.get("regions", {}).get(region, {}).get(name)
        if row is None:
            raise BadInput(f"the price table has no {name!r} meter for {region}")
        rate = per_second(float(row["price"]), str(row["unit"]))
        if rate is None:
            raise BadInput(f"the price table's {name!r} unit {row['unit']!r} is not a time unit")
        return Meter(
            name, region, rate, str(row.get("date", "")), str(row.get("source", "")), row.get("unconfirmed")
        )

    def profile_rates(self, profile_type: str) -> Mapping[str, Any]:
        rates = self.doc.get("profiles", {}).get(profile_type)
        if rates is None:
            raise BadInput(f"no price for workload profile {profile_type!r}")
        return dict(rates)

    def _names(self, key: str) -> list[str]:
        return [str(n) for n in self.doc.get("meters", {}).get(key, [])]

    @property
    def management_meter(self) -> str:
        return str(self.doc.get("meters", {}).get("management", "Dedicated Plan Management"))

    @property
    def dedicated_mapping(self) -> str:
        return str(self.doc.get("meters", {}).get("dedicated_mapping", ""))

    def replica_meters(self, prof: GpuProfile, location: str | None = None) -> list[tuple[Meter, float]]:
        """(meter, quantity per second of life) for one replica (serverless) or one node (dedicated)."""
        rates = self.profile_rates(prof.type)
        gpu = self.meter(str(rates["gpu_meter"]), location)
        if rates.get("billing") == "per-node-hour":
            vcpu_name, mem_name = self._names("dedicated")
            cpu, mem = float(prof.vcpu), float(prof.memory_gib)
        else:
            vcpu_name, mem_name = self._names("serverless")
            cpu, mem = prof.container_cpu, float(prof.container_memory_gib)
        return [
            (gpu, float(prof.gpu_count)),
            (self.meter(vcpu_name, location), cpu),
            (self.meter(mem_name, location), mem),
        ]

    def unconfirmed(self, prof: GpuProfile, location: str | None = None) -> list[str]:
        """The meters behind a profile's price that were inferred rather than read."""
        meters = [m for m, _ in self.replica_meters(prof, location)]
        if not prof.serverless:
            meters.append(self.meter(self.management_meter, location))
        return [m.name for m in meters if m.unconfirmed]


@dataclass(frozen=True)
class CostEstimate:
    usd: float
    gpu_seconds: float
    basis: str
    is_estimate: bool = True
    breakdown: Mapping[str, float] = field(default_factory=dict)
    table: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "usd": round(self.usd, 4),
            "gpu_seconds": round(self.gpu_seconds, 1),
            "basis": self.basis,
            "is_estimate": self.is_estimate,
            "prices": self.table,
            "breakdown": {k: round(v, 6) for k, v in self.breakdown.items()},
        }


@dataclass(frozen=True)
class PlanEstimate:
    """Dry-run cost of an `up`: the explorer and the tester running for their planned minutes."""

    explorer: CostEstimate
    tester: CostEstimate
    usd: float
    basis: str
    is_estimate: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {
            "usd": round(self.usd, 4),
            "explorer": self.explorer.as_dict(),
            "tester": self.tester.as_dict(),
            "basis": self.basis,
            "is_estimate": self.is_estimate,
        }


def bundled_prices() -> PriceTable:
    with data_path("prices.json").open(encoding="utf-8") as fh:
        return PriceTable(json.load(fh), "bundled")


def load_prices(cache_path: Path | None = None) -> PriceTable:
    """The refreshed cache when one is readable and of this table's schema, else the bundled table."""
    path = cache_path or default_cache_path()
    bundled = bundled_prices()
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        table = PriceTable(doc, "cache")
        if doc.get("schema") != bundled.doc.get("schema"):
            return bundled  # a cache written by an older acagpu: its shape is not this one
        for prof in profile_catalog():  # validates the shape: every profile priced
            table.replica_meters(prof)
        return table
    except (OSError, ValueError, KeyError, TypeError, AttributeError, BadInput):
        return bundled


def _profile(profile: GpuProfile | str) -> GpuProfile:
    return profile if isinstance(profile, GpuProfile) else resolve_profile(profile)


def estimate(
    profile: GpuProfile | str,
    seconds: float,
    replicas: int = 1,
    *,
    location: str | None = None,
    prices: PriceTable | None = None,
) -> CostEstimate:
    """List-price estimate for `replicas` replicas (serverless) or nodes (dedicated) over `seconds`."""
    if seconds < 0 or replicas < 0:
        raise BadInput("seconds and replicas must not be negative")
    prof = _profile(profile)
    table = prices or load_prices()
    meters = table.replica_meters(prof, location)
    region = meters[0][0].region
    where = f"{region} meters, {table.label}"
    if location and region != location.replace(" ", "").lower():
        where += f"; {location} may differ"
    unconfirmed = table.unconfirmed(prof, location)
    if unconfirmed:
        where += f"; UNCONFIRMED: {', '.join(unconfirmed)}"
    gpu_seconds = seconds * replicas * prof.gpu_count
    life = seconds * replicas
    gpu, vcpu, mem = (meter.per_second * qty * life for meter, qty in meters)
    if not prof.serverless:
        mgmt = table.meter(table.management_meter, location).per_second * seconds
        node_hour = sum(meter.per_hour * qty for meter, qty in meters)
        basis = (
            f"estimate: {_count(replicas, 'node')} x {_duration(seconds)} of {prof.type} "
            f"at ${node_hour:.3f}/h ({prof.gpu_count} GPU ${gpu:.2f} + {prof.vcpu} vCPU ${vcpu:.2f} + "
            f"{prof.memory_gib} GiB ${mem:.2f}), + plan management ${mgmt:.2f}; "
            f"total ${gpu + vcpu + mem + mgmt:.2f}; {where}"
        )
        return CostEstimate(
            gpu + vcpu + mem + mgmt,
            gpu_seconds,
            basis,
            breakdown={"gpu": gpu, "vcpu": vcpu, "memory": mem, "management": mgmt},
            table=table.label,
        )
    basis = (
        f"estimate: {_count(replicas, 'replica')} x {_duration(seconds)} on {prof.type}: "
        f"{gpu_seconds_text(gpu_seconds).replace('GPU-seconds', 'GPU-s')} x "
        f"${meters[0][0].per_second:.6f} = {usd_text(gpu)}, "
        f"+ {prof.container_cpu:g} vCPU {usd_text(vcpu)} + "
        f"{prof.container_memory_gib:g} GiB {usd_text(mem)}; "
        f"total {usd_text(gpu + vcpu + mem)}; {where}"
    )
    return CostEstimate(
        gpu + vcpu + mem,
        gpu_seconds,
        basis,
        breakdown={"gpu": gpu, "vcpu": vcpu, "memory": mem},
        table=table.label,
    )


def replica_rate(
    profile: GpuProfile | str,
    cpu: float,
    memory_gib: float,
    *,
    location: str | None = None,
    prices: PriceTable | None = None,
) -> tuple[float, str]:
    """USD per second of one replica asking for `cpu` and `memory_gib` (serverless: the GPU meter
    plus what it asked for on the vCPU and memory meters), or of one node plus management
    (dedicated: the node bills whole, whatever the replica asks), with the basis in words."""
    prof = _profile(profile)
    table = prices or load_prices()
    meters = table.replica_meters(prof, location)
    where = f"{meters[0][0].region} meters, {table.label}"
    if not prof.serverless:
        mgmt = table.meter(table.management_meter, location)
        node = sum(m.per_second * q for m, q in meters)
        return node + mgmt.per_second, f"{prof.type} node ${node * 3600:.3f}/h + management ({where})"
    gpu, vcpu, mem = (m for m, _ in meters)
    rate = gpu.per_second * prof.gpu_count + vcpu.per_second * cpu + mem.per_second * memory_gib
    basis = (
        f"{prof.gpu_count} GPU x ${gpu.per_second:.6f}/s + {cpu:g} vCPU x ${vcpu.per_second:.6f}/s + "
        f"{memory_gib:g} GiB x ${mem.per_second:.6f}/s ({where})"
    )
    return rate, basis


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _duration(seconds: float) -> str:
    """The one duration text (units.duration_text)."""
    return duration_text(seconds)


def run_spend(
    profile: GpuProfile | str, gpu_replica_seconds: float, location: str | None = None
) -> CostEstimate:
    """Spend of a run so far, from the seconds its GPU replicas have lived: the one function `status`
    and `reap` both use, so the same group never shows two different figures."""
    return estimate(profile, gpu_replica_seconds, 1, location=location)


def estimate_plan(
    profile: GpuProfile | str,
    explorer_minutes: float,
    tester_minutes: float,
    *,
    location: str | None = None,
    prices: PriceTable | None = None,
) -> PlanEstimate:
    """Serverless: two replicas billed for their own minutes. Dedicated: one node for the longer of
    the two, since both containers share the environment's node while they run in parallel."""
    prof = _profile(profile)
    table = prices or load_prices()
    explorer = estimate(prof, explorer_minutes * 60, 1, location=location, prices=table)
    tester = estimate(prof, tester_minutes * 60, 1, location=location, prices=table)
    if prof.serverless:
        total = explorer.usd + tester.usd
        basis = (
            f"estimate: explorer {explorer_minutes:g} min + tester {tester_minutes:g} min, one replica each"
        )
    else:
        longest = max(explorer_minutes, tester_minutes) * 60
        total = estimate(prof, longest, 1, location=location, prices=table).usd
        basis = f"estimate: one {prof.type} node for {max(explorer_minutes, tester_minutes):g} min"
    return PlanEstimate(explorer, tester, total, f"{basis}; {table.label}")


def price_per_hour(
    profile: GpuProfile | str, prices: PriceTable | None = None, location: str | None = None
) -> float:
    """One replica (serverless) or one node plus management (dedicated) for an hour."""
    return estimate(profile, 3600, 1, location=location, prices=prices).usd


def catalog_prices(prices: PriceTable | None = None, location: str | None = None) -> dict[str, float]:
    """Hourly estimate per profile type, for listings."""
    table = prices or load_prices()
    return {p.type: round(price_per_hour(p, table, location), 4) for p in profile_catalog()}


def table_summary(table: PriceTable, location: str | None = None) -> dict[str, Any]:
    """The `prices` block of a listing: which table, which region's meters, what is inferred."""
    region = table.region_for(location)
    rows = table.doc.get("regions", {}).get(region, {})
    return {
        "origin": table.origin,
        "table": table.label,
        "region": region,
        "source": table.source,
        "estimate": True,
        "unconfirmed": sorted(name for name, row in rows.items() if row.get("unconfirmed")),
        "dedicated": table.dedicated_mapping,
    }


@dataclass(frozen=True)
class RegistryRate:
    """A container registry's fixed fee per day for its tier: billed whether it is used or not, so it
    is what an environment holding one costs while idle (its GPU profiles cost nothing then)."""

    sku: str
    meter: str
    usd_per_day: float
    included_gib: int | None
    source: str
    unconfirmed: str | None = None

    @property
    def usd_per_hour(self) -> float:
        return self.usd_per_day / 24

    def as_dict(self) -> dict[str, Any]:
        return {
            "sku": self.sku,
            "meter": self.meter,
            "usd_per_day": self.usd_per_day,
            "included_gib": self.included_gib,
            "source": self.source,
            "unconfirmed": self.unconfirmed,
        }


def registry_daily(sku: str, prices: PriceTable | None = None) -> RegistryRate:
    """The tier's daily meter (`Standard Registry Unit`, 1/Day) from the price table; a refreshed
    cache without registry meters (the refresh reads ACA's) falls back to the bundled table's."""
    table = prices or load_prices()
    block = table.doc.get("registry") or bundled_prices().doc.get("registry") or {}
    row = (block.get("tiers") or {}).get(sku)
    if row is None:
        raise BadInput(f"the price table has no container registry meter for tier {sku!r}")
    included = row.get("included_gib")
    return RegistryRate(
        sku,
        str(row.get("meter", "")),
        float(row["price"]),
        int(included) if included is not None else None,
        str(row.get("source", "")),
        row.get("unconfirmed"),
    )

"""Cost estimates for GPU runs from a list-price table: always labelled an estimate, never a bill.

Serverless GPU profiles bill per replica-second for the GPU plus the replica's vCPU and GiB (no idle
rate for GPU apps); dedicated profiles bill per node-hour plus the Dedicated plan management fee
(reference aca-api.md §5.4). The bundled table (gpu/data/prices.json) says where each figure comes
from; `refresh_prices` can replace it with the public Azure Retail Prices API, cached locally, and
falls back to the bundled table with a warning whenever that is impossible.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aca_gpu.errors import BadInput
from aca_gpu.gpu.profiles import GpuProfile, profile_catalog, resolve_profile
from aca_gpu.resources import data_path

RETAIL_PRICES_URL = "https://prices.azure.com/api/retail/prices"
RETAIL_FILTER = "serviceName eq 'Azure Container Apps'"
MAX_PAGES = 20


def default_cache_path() -> Path:
    base = os.environ.get("ACAGPU_CACHE_DIR")
    return Path(base) / "prices.json" if base else Path.home() / ".cache" / "acagpu" / "prices.json"


def retail_prices_url() -> str:
    """The public Retail Prices API, or ACAGPU_PRICES_URL (a mirror, or a test server)."""
    return os.environ.get("ACAGPU_PRICES_URL") or RETAIL_PRICES_URL


@dataclass(frozen=True)
class PriceTable:
    """The price document (prices.json shape) plus where it came from."""

    doc: Mapping[str, Any]
    origin: str  # "bundled", "cache", or "retail-api"

    @property
    def source(self) -> str:
        return str(self.doc.get("source", ""))

    @property
    def region(self) -> str:
        return str(self.doc.get("region", "default"))

    def profile_rates(self, profile_type: str) -> Mapping[str, Any]:
        rates = self.doc.get("profiles", {}).get(profile_type)
        if rates is None:
            raise BadInput(f"no price for workload profile {profile_type!r}")
        return dict(rates)

    @property
    def vcpu_second(self) -> float:
        return float(self.doc["consumption"]["vcpu_second"])

    @property
    def gib_second(self) -> float:
        return float(self.doc["consumption"]["gib_second"])

    @property
    def management_hour(self) -> float:
        return float(self.doc.get("dedicated_management_hour", 0.0))


@dataclass(frozen=True)
class CostEstimate:
    usd: float
    gpu_seconds: float
    basis: str
    is_estimate: bool = True
    breakdown: Mapping[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "usd": round(self.usd, 4),
            "gpu_seconds": round(self.gpu_seconds, 1),
            "basis": self.basis,
            "is_estimate": self.is_estimate,
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
    """The refreshed cache when one is readable, else the bundled table."""
    path = cache_path or default_cache_path()
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        table = PriceTable(doc, "cache")
        _ = (table.vcpu_second, table.gib_second)  # validates the shape
        return table
    except (OSError, ValueError, KeyError, TypeError):
        return bundled_prices()


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
    rates = table.profile_rates(prof.type)
    gpu_seconds = seconds * replicas * prof.gpu_count
    where = f"{table.region} prices ({table.origin})"
    if location and table.region != location:
        where += f"; {location} may differ"
    if rates.get("billing") == "per-node-hour":
        node = float(rates["node_hour"]) / 3600 * seconds * replicas
        mgmt = table.management_hour / 3600 * seconds
        basis = (
            f"estimate: {_count(replicas, 'node')} x {_duration(seconds)} of {prof.type} "
            f"at ${float(rates['node_hour']):.3f}/h = ${node:.2f}, + plan management "
            f"${table.management_hour:.2f}/h = ${mgmt:.2f}; total ${node + mgmt:.2f}; {where}"
        )
        return CostEstimate(node + mgmt, gpu_seconds, basis, breakdown={"node": node, "management": mgmt})
    replica_seconds = seconds * replicas
    gpu = float(rates["gpu_second"]) * prof.gpu_count * replica_seconds
    vcpu = table.vcpu_second * prof.container_cpu * replica_seconds
    mem = table.gib_second * prof.container_memory_gib * replica_seconds
    basis = (
        f"estimate: {_count(replicas, 'replica')} x {_duration(seconds)} on {prof.type}: "
        f"{gpu_seconds:.0f} GPU-s x ${float(rates['gpu_second']):.7f} = ${gpu:.2f}, "
        f"+ {prof.container_cpu:g} vCPU ${vcpu:.2f} + {prof.container_memory_gib:g} GiB ${mem:.2f}; "
        f"total ${gpu + vcpu + mem:.2f}; {where}"
    )
    return CostEstimate(
        gpu + vcpu + mem, gpu_seconds, basis, breakdown={"gpu": gpu, "vcpu": vcpu, "memory": mem}
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _duration(seconds: float) -> str:
    """90 s, 30 min, 2.5 h: the unit a person reads a cost line in."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.3g} min"
    return f"{seconds / 3600:.3g} h"


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
        total = estimate(prof, max(explorer_minutes, tester_minutes) * 60, 1, prices=table).usd
        basis = f"estimate: one {prof.type} node for {max(explorer_minutes, tester_minutes):g} min"
    return PlanEstimate(explorer, tester, total, f"{basis}; {table.source.split('.')[0]}")


def price_per_hour(profile: GpuProfile | str, prices: PriceTable | None = None) -> float:
    """One replica (serverless) or one node plus management (dedicated) for an hour."""
    return estimate(profile, 3600, 1, prices=prices).usd


# -- refresh from the Azure Retail Prices API ---------------------------------------------------

_UNIT = re.compile(
    r"^\s*(\d+(?:\.\d+)?)\s*([KM]?)\s*/?\s*(?:GiB[- ]?|GB[- ]?)?(second|hour)s?\b", re.IGNORECASE
)


def _per_second(price: float, unit: str) -> float | None:
    """Retail prices are quoted per `unitOfMeasure` ("1 Second", "1 Hour", "100 Seconds", "1M Seconds")."""
    m = _UNIT.match(unit)
    if not m:
        return None
    count = float(m.group(1)) * {"": 1, "K": 1e3, "M": 1e6}[m.group(2).upper()]
    seconds = count * (3600 if m.group(3).lower() == "hour" else 1)
    return price / seconds


def _text(item: Mapping[str, Any]) -> str:
    return " ".join(str(item.get(k, "")) for k in ("productName", "skuName", "meterName")).lower()


def parse_retail_items(
    items: Iterable[Mapping[str, Any]], region: str, base: Mapping[str, Any]
) -> dict[str, Any]:
    """Fold Retail Prices API items into the prices.json shape; meters not found keep `base`'s figures."""
    doc: dict[str, Any] = json.loads(json.dumps(base))
    found: list[str] = []
    for item in items:
        if item.get("armRegionName", region) != region or item.get("currencyCode", "USD") != "USD":
            continue
        if item.get("type", "Consumption") != "Consumption":
            continue
        text, unit = _text(item), str(item.get("unitOfMeasure", ""))
        price = item.get("retailPrice", item.get("unitPrice"))
        if price is None or "idle" in text:
            continue
        per_second = _per_second(float(price), unit)
        if per_second is None:
            continue
        dedicated = "dedicated" in text
        if "gpu" in text or "a100" in text or "t4" in text:
            target = _gpu_profile_for(text, dedicated)
            if target is None:
                continue
            rates = doc["profiles"].setdefault(target, {})
            if dedicated:
                rates.update(billing="per-node-hour", node_hour=round(per_second * 3600, 6))
            else:
                rates.update(billing="per-second", gpu_second=per_second)
            rates["source"] = f"Azure Retail Prices API: {item.get('meterName')} ({region})"
            found.append(target)
        elif "management" in text:
            doc["dedicated_management_hour"] = round(per_second * 3600, 6)
            found.append("management")
        elif "vcpu" in text and not dedicated:
            doc["consumption"]["vcpu_second"] = per_second
            found.append("vcpu")
        elif "memory" in text and not dedicated:
            doc["consumption"]["gib_second"] = per_second
            found.append("memory")
    doc["region"] = region
    doc["date"] = datetime.now(UTC).strftime("%Y-%m-%d")
    kept = "; figures not in the API kept from the bundled table" if len(set(found)) < 8 else ""
    doc["source"] = f"Azure Retail Prices API ({RETAIL_PRICES_URL}), {region}, list prices{kept}"
    doc["meters_found"] = sorted(set(found))
    return doc


def _gpu_profile_for(text: str, dedicated: bool) -> str | None:
    if dedicated:
        for size in ("NC96", "NC48", "NC24"):
            if size.lower() in text and "a100" in text:
                return f"{size}-A100"
        return None
    if "t4" in text:
        return "Consumption-GPU-NC8as-T4"
    if "a100" in text:
        return "Consumption-GPU-NC24-A100"
    return None


def _fetch_json(url: str, timeout: float) -> dict[str, Any]:
    import urllib.request

    with urllib.request.urlopen(url, timeout=timeout) as resp:
        data: dict[str, Any] = json.loads(resp.read().decode("utf-8"))
    return data


def refresh_prices(
    cache_path: Path | None = None,
    *,
    region: str = "eastus",
    endpoint: str | None = None,
    timeout: float = 10.0,
    warn: Callable[[str], None] | None = None,
) -> PriceTable:
    """Fetch list prices, cache them, and return the table; on any failure warn and use the fallback."""
    from urllib.parse import quote

    path = cache_path or default_cache_path()
    query = f"{RETAIL_FILTER} and armRegionName eq '{region}'"
    url: str | None = f"{endpoint or retail_prices_url()}?$filter={quote(query)}"
    items: list[Mapping[str, Any]] = []
    try:
        for _ in range(MAX_PAGES):
            if not url:
                break
            page = _fetch_json(url, timeout)
            items.extend(page.get("Items", []))
            url = page.get("NextPageLink")
        if not items:
            raise ValueError("the price list came back empty")
        doc = parse_retail_items(items, region, bundled_prices().doc)
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        fallback = load_prices(path)
        if warn:
            warn(f"could not refresh prices ({exc}); using the {fallback.origin} price table")
        return fallback
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        if warn:
            warn(f"could not cache prices at {path}: {exc}")
    return PriceTable(doc, "retail-api")


def catalog_prices(prices: PriceTable | None = None) -> dict[str, float]:
    """Hourly estimate per profile type, for listings."""
    table = prices or load_prices()
    return {p.type: round(price_per_hour(p, table), 4) for p in profile_catalog()}

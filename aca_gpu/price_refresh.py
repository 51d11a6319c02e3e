"""Refresh one region's ACA meters from the public Azure Retail Prices API into the local price cache.

Meters are matched by the exact names ACA bills under (the table's own meter names): GPU rows have
`skuName=Standard` and an empty `armSkuName`, so the meter name is the only key, and the dedicated
GPU meter (`Dedicated GPU Usage`) names no NC size. `Hybrid …` rows are Azure Arc (ACA on a
customer's cluster), never ACA in Azure: they are dropped. What could not be matched is reported,
and a meter the API did not list keeps its previous figure, marked as kept. On any failure the
caller gets the table it had, with a warning.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aca_gpu.cost import PriceTable, default_cache_path, load_prices
from aca_gpu.units import per_second

RETAIL_PRICES_URL = "https://prices.azure.com/api/retail/prices"
RETAIL_FILTER = "serviceName eq 'Azure Container Apps'"
MAX_PAGES = 20


def retail_prices_url() -> str:
    """The public Retail Prices API, or ACAGPU_PRICES_URL (a mirror, or a test server)."""
    return os.environ.get("ACAGPU_PRICES_URL") or RETAIL_PRICES_URL


def known_meters(doc: Mapping[str, Any]) -> set[str]:
    """Every meter name the table prices a profile with."""
    meters = doc.get("meters", {})
    names = {str(p["gpu_meter"]) for p in doc.get("profiles", {}).values()}
    names.update(meters.get("serverless", []), meters.get("dedicated", []))
    names.add(str(meters.get("management", "Dedicated Plan Management")))
    return names


def _is_hybrid(item: Mapping[str, Any]) -> bool:
    return any(str(item.get(k, "")).lower().startswith("hybrid") for k in ("skuName", "meterName"))


def parse_retail_items(
    items: Iterable[Mapping[str, Any]], region: str, base: Mapping[str, Any], *, now: datetime | None = None
) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """Fold Retail Prices API items into `base` (prices.json shape) for `region`.

    Returns the new document and a report: `matched`, `missing` (needed, not listed: kept),
    `hybrid` (dropped), `unknown_gpu` (GPU rows acagpu has no profile for) and `ignored`.
    """
    doc: dict[str, Any] = json.loads(json.dumps(base))
    when = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%MZ")
    wanted = known_meters(doc)
    regions = doc.setdefault("regions", {})
    fallback = regions.get(region) or regions.get(doc.get("default_region", "eastus"), {})
    rows: dict[str, Any] = json.loads(json.dumps(fallback))
    report: dict[str, list[str]] = {
        "matched": [],
        "missing": [],
        "hybrid": [],
        "unknown_gpu": [],
        "ignored": [],
    }
    for item in items:
        if (
            str(item.get("armRegionName", region)).lower() != region
            or item.get("currencyCode", "USD") != "USD"
        ):
            continue
        if (
            item.get("type", "Consumption") != "Consumption"
            or float(item.get("tierMinimumUnits", 0) or 0) > 0
        ):
            continue
        name = str(item.get("meterName", ""))
        if _is_hybrid(item):
            report["hybrid"].append(name)
            continue
        price, unit = item.get("retailPrice", item.get("unitPrice")), str(item.get("unitOfMeasure", ""))
        if name not in wanted:
            report["unknown_gpu" if "gpu" in name.lower() else "ignored"].append(name)
            continue
        if price is None or per_second(float(price), unit) is None:
            report["ignored"].append(f"{name} ({unit})")
            continue
        rows[name] = {
            "price": float(price),
            "unit": unit,
            "date": when[:10],
            "source": f"Azure Retail Prices API, {region}, read {when}"
            + (
                f" (effective {str(item['effectiveStartDate'])[:10]})"
                if item.get("effectiveStartDate")
                else ""
            ),
        }
        report["matched"].append(name)
    for name in sorted(wanted - set(report["matched"])):
        report["missing"].append(name)
        if name in rows:
            kept = dict(rows[name])
            kept["unconfirmed"] = (
                f"UNCONFIRMED: not listed by the Retail Prices API for {region} on {when[:10]}; "
                f"kept from the earlier table ({kept.get('source', '')})"
            )
            rows[name] = kept
    regions[region] = rows
    for key in report:
        report[key] = sorted(set(report[key]))
    refreshed = dict(doc.get("refreshed") or {})
    refreshed["at"] = when
    refreshed["regions"] = {**refreshed.get("regions", {}), region: {"at": when, **report}}
    doc["refreshed"] = refreshed
    return doc, report


def _fetch_json(url: str, timeout: float) -> dict[str, Any]:
    import urllib.request

    with urllib.request.urlopen(url, timeout=timeout) as resp:
        data: dict[str, Any] = json.loads(resp.read().decode("utf-8"))
    return data


def _describe(region: str, report: Mapping[str, list[str]]) -> list[str]:
    """What a person should know about a refresh that was not complete."""
    notes = []
    if report["missing"]:
        notes.append(
            f"{region}: not in the price list, kept from the earlier table: {', '.join(report['missing'])}"
        )
    if report["unknown_gpu"]:
        notes.append(f"{region}: GPU meters acagpu has no profile for: {', '.join(report['unknown_gpu'])}")
    if report["hybrid"]:
        notes.append(f"{region}: dropped Azure Arc (Hybrid) meters: {', '.join(report['hybrid'])}")
    return notes


def refresh_prices(
    cache_path: Path | None = None,
    *,
    region: str = "eastus",
    endpoint: str | None = None,
    timeout: float = 10.0,
    warn: Callable[[str], None] | None = None,
) -> PriceTable:
    """Fetch one region's list prices, cache them, and return the table; on failure warn and fall back."""
    from urllib.parse import quote

    path = cache_path or default_cache_path()
    region = region.replace(" ", "").lower()
    query = f"{RETAIL_FILTER} and armRegionName eq '{region}'"
    url: str | None = f"{endpoint or retail_prices_url()}?$filter={quote(query)}"
    items: list[Mapping[str, Any]] = []
    current = load_prices(path)
    try:
        for _ in range(MAX_PAGES):
            if not url:
                break
            page = _fetch_json(url, timeout)
            items.extend(page.get("Items", []))
            url = page.get("NextPageLink")
        if not items:
            raise ValueError("the price list came back empty")
        doc, report = parse_retail_items(items, region, current.doc)
        if not report["matched"]:
            raise ValueError(f"no Azure Container Apps meter acagpu prices with was listed for {region}")
    except (OSError, ValueError, TypeError, AttributeError, KeyError) as exc:
        if warn:
            warn(f"could not refresh prices ({exc}); using the {current.label}")
        return current
    for note in _describe(region, report):
        if warn:
            warn(note)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        if warn:
            warn(f"could not cache prices at {path}: {exc}")
    return PriceTable(doc, "cache")

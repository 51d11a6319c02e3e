"""`acagpu profiles -l LOCATION` live: the GPU workload profile types a region offers now, with catalog specs.

The region list in the docs goes stale; `available_workload_profiles` is the truth, so the live
listing joins what Azure offers with what acagpu knows (aliases, GPU, container size, price).
"""

from __future__ import annotations

from typing import Any

from aca_gpu.cost import catalog_prices, load_prices, table_summary
from aca_gpu.gpu.profiles import profile_catalog
from aca_gpu.models import Cloud, ProfileOffer


def _is_gpu(offer: ProfileOffer, known: set[str]) -> bool:
    return bool(offer.gpus) or offer.name.lower() in known or "gpu" in (offer.category or "").lower()


def offered_profiles(cloud: Cloud, location: str) -> dict[str, Any]:
    """GPU profile types `location` offers, each with the catalog's entry when acagpu knows the type."""
    catalog = {p.type.lower(): p for p in profile_catalog()}
    table = load_prices()
    prices = catalog_prices(table, location)
    rows: list[dict[str, Any]] = []
    for offer in sorted(cloud.available_profiles(location), key=lambda o: o.name):
        if not _is_gpu(offer, set(catalog)):
            continue
        known = catalog.get(offer.name.lower())
        rows.append(
            {
                "type": offer.name,
                "category": offer.category,
                "cores": offer.cores,
                "memory_gib": offer.memory_gib,
                "gpus": offer.gpus,
                "display_name": offer.display_name,
                "catalog": None
                if known is None
                else {
                    "aliases": list(known.aliases),
                    "gpu": known.gpu,
                    "gpu_count": known.gpu_count,
                    "serverless": known.serverless,
                    "container_cpu": known.container_cpu,
                    "container_memory_gib": known.container_memory_gib,
                    "price_per_hour_usd": prices.get(known.type),
                },
            }
        )
    return {
        "command": "profiles",
        "source": "live",
        "location": location,
        "profiles": rows,
        "prices": table_summary(table, location),
    }


def render_offers(doc: dict[str, Any]) -> str:
    if not doc["profiles"]:
        return f"{doc['location']} offers no GPU workload profile"
    lines = [f"{'TYPE':<28} {'GPU':<26} {'N':>2} {'CORES':>5} {'GiB':>4} {'ALIAS':<12} {'$/h est.':>8}"]
    for row in doc["profiles"]:
        cat = row["catalog"] or {}
        price = cat.get("price_per_hour_usd")
        lines.append(
            f"{row['type']:<28} {cat.get('gpu') or '?':<26} {row['gpus'] or cat.get('gpu_count') or '?':>2} "
            f"{row['cores'] or '?':>5} {row['memory_gib'] or '?':>4} {(cat.get('aliases') or ['-'])[0]:<12} "
            f"{f'{price:.2f}' if price is not None else '?':>8}"
        )
    lines.append(
        f"offered in {doc['location']} now (live); $/h is a list-price estimate "
        f"({doc['prices']['region']} meters, {doc['prices']['table']})"
    )
    return "\n".join(lines)

"""`acagpu profiles`: the GPU workload profiles acagpu can deploy to, with aliases and hourly estimates."""

from __future__ import annotations

import textwrap
from typing import Any, TextIO

import click

from aca_gpu import price_refresh
from aca_gpu.cli.options import output_options
from aca_gpu.cli.render import table
from aca_gpu.cli.runopts import command_settings
from aca_gpu.cost import catalog_prices, load_prices, table_summary
from aca_gpu.errors import AuthError
from aca_gpu.gpu.profiles import GpuProfile, profile_catalog
from aca_gpu.naming import validate_location
from aca_gpu.output import Output, terminal_width
from aca_gpu.workflow.base.context import open_cloud
from aca_gpu.workflow.preflight.offers import offered_profiles, render_offers


def catalog_document(location: str | None = None) -> dict[str, Any]:
    """The bundled catalog as the `{"profiles": [...]}` JSON document, optionally one region's share."""
    table = load_prices()
    prices = catalog_prices(table, location)
    wanted: list[GpuProfile] = [p for p in profile_catalog() if location is None or p.offered_in(location)]
    return {
        "profiles": [
            {
                "type": p.type,
                "aliases": list(p.aliases),
                "gpu": p.gpu,
                "gpu_count": p.gpu_count,
                "vcpu": p.vcpu,
                "memory_gib": p.memory_gib,
                "serverless": p.serverless,
                "regions": list(p.regions),
                "price_per_hour_usd": prices.get(p.type),
            }
            for p in wanted
        ],
        "prices": table_summary(table, location),
    }


WIDE = 160  # below this the region lists go under the table


def render_catalog(doc: dict[str, Any], stream: TextIO | None = None) -> str:
    """A table for people, sized to the terminal; prices are list-price estimates, regions the docs' list."""
    rows = []
    for p in doc["profiles"]:
        price = p["price_per_hour_usd"]
        rows.append(
            [
                p["type"],
                ", ".join(p["aliases"][:2]),
                p["gpu"],
                str(p["gpu_count"]),
                str(p["vcpu"]),
                str(p["memory_gib"]),
                "serverless" if p["serverless"] else "dedicated",
                f"{price:.2f}" if price is not None else "?",
                ", ".join(p["regions"]),
            ]
        )
    headers = ["TYPE", "ALIASES", "GPU", "N", "vCPU", "GiB", "KIND", "$/h≈", "REGIONS"]
    right = ("N", "vCPU", "GiB", "$/h≈")
    width = terminal_width(stream)
    if width >= WIDE:
        lines = [table(headers, rows, stream=stream, wrap="REGIONS", right=right)]
    else:  # regions under the table, wrapped, so the columns keep their words
        lines = [table(headers[:-1], [r[:-1] for r in rows], stream=stream, right=right), ""]
        for row in rows:
            lines += textwrap.wrap(f"{row[0]}: {row[-1]}", width, subsequent_indent="    ")
    if not doc["profiles"]:
        lines = ["(no GPU profile in the bundled catalog lists that region)"]
    lines.append("")
    prices = doc["prices"]
    note = (
        f"$/h≈: list-price estimate from {prices['region']} meters ({prices['table']}) per replica "
        "(serverless: GPU + vCPU + memory meters) or per node + plan management (dedicated). "
        "Regions: the docs' list; `acagpu profiles -l REGION` asks Azure."
    )
    if prices.get("unconfirmed"):
        note += " UNCONFIRMED (inferred) meters: " + ", ".join(prices["unconfirmed"]) + "."
    lines += textwrap.wrap(note, width)
    return "\n".join(lines)


@click.command()
@click.option("--offline", is_flag=True, help="Show the bundled catalog instead of asking Azure.")
@click.option("-l", "--location", help="Region, e.g. eastus (with --offline: filter the catalog by it).")
@click.option("--subscription", help="Subscription id for the live listing (default: ACAGPU_SUBSCRIPTION).")
@click.option(
    "--refresh-prices",
    is_flag=True,
    help="Fetch list prices from the public Azure Retail Prices API and cache them (else: bundled, warned).",
)
@output_options
def profiles(
    output: Output, offline: bool, location: str | None, subscription: str | None, refresh_prices: bool
) -> None:
    """List the ACA GPU workload profiles: type, aliases, GPU, size, regions and an hourly estimate."""
    if refresh_prices:
        price_refresh.refresh_prices(
            region=validate_location(location) if location else "eastus", warn=output.warn
        )
    if offline:
        doc = catalog_document(location)
        output.emit(doc, lambda stream: print(render_catalog(doc, stream), file=stream))
        return
    settings = command_settings(subscription)
    region = validate_location(location or settings.location)
    try:
        cloud = open_cloud(settings)
    except AuthError as exc:
        if exc.code != "NoSubscription":
            raise
        raise AuthError(
            exc.message,
            code=exc.code,
            hint="`acagpu profiles --offline` shows the bundled catalog without Azure",
        ) from exc
    doc = offered_profiles(cloud, region)
    output.emit(doc, render_offers(doc))

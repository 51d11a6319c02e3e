"""What Azure bills for the emulator's own replicas: each replica's life at the price table's meters.

A serverless replica costs, per second of its life, the profile's GPU meter for each GPU plus the
vCPU and memory meters for what its containers requested; the rates are the bundled table's meters
for the environment's region (the default region's where the table has none). A dedicated profile
is priced the same way per replica at the Dedicated meters (the node and its plan-management fee
are not modelled). Lives are measured on the wall clock, the clock the emulator's ARM timestamps
use, so a client timing its replicas sees the same seconds. Usage appears at once unless the
`cost_delay` fault holds it back, as Azure's 8 to 24 hours do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

from aca_gpu.emulator.context import Ctx
from aca_gpu.emulator.state import BillingRecord
from aca_gpu.resources import data_path
from aca_gpu.units import per_second


@cache
def _table() -> dict[str, Any]:
    with data_path("prices.json").open(encoding="utf-8") as fh:
        doc: dict[str, Any] = json.load(fh)
    return doc


def _rate(region: str, meter: str) -> float:
    table = _table()
    regions = table["regions"]
    rows = regions.get(region.replace(" ", "").lower()) or regions[table["default_region"]]
    row = rows[meter]
    return per_second(float(row["price"]), str(row["unit"])) or 0.0


def usd_per_second(rec: BillingRecord) -> float:
    table = _table()
    profile = table["profiles"].get(rec.profile_type)
    if profile is None:
        return 0.0
    kind = "dedicated" if profile["billing"] == "per-node-hour" else "serverless"
    vcpu_meter, memory_meter = table["meters"][kind]
    return (
        _rate(rec.location, profile["gpu_meter"]) * rec.gpus
        + _rate(rec.location, vcpu_meter) * rec.vcpu
        + _rate(rec.location, memory_meter) * rec.memory_gib
    )


@dataclass(frozen=True)
class Usage:
    """One replica's billed usage inside the query's period."""

    record: BillingRecord
    start: datetime
    end: datetime
    cost: float

    def tag(self, name: str) -> str | None:
        for key, value in self.record.tags.items():
            if key.lower() == name.lower():
                return value
        return None


def usages(ctx: Ctx, start: datetime, end: datetime) -> list[Usage]:
    """Every replica's cost between `start` and `end` (UTC), minus what is still inside the delay."""
    now_wall, now_utc = ctx.clock.now(), datetime.now(UTC)
    delay = ctx.faults.fire("cost_delay")
    visible_until = now_utc - timedelta(
        seconds=ctx.clock.scaled(float(delay.param("seconds", "28800"))) if delay else 0.0
    )
    found = []
    for rec in ctx.state.billing:
        began = now_utc - timedelta(seconds=now_wall - rec.started_wall)
        ended = now_utc - timedelta(
            seconds=now_wall - (rec.ended_wall if rec.ended_wall is not None else now_wall)
        )
        lo, hi = max(began, start), min(ended, end, visible_until)
        if hi <= lo:
            continue
        found.append(Usage(rec, lo, hi, usd_per_second(rec) * (hi - lo).total_seconds()))
    return found

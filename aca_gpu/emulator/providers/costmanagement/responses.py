"""`POST …/providers/Microsoft.CostManagement/query`: the subset acagpu sends, refusing the rest.

Understood: `type` ActualCost or AmortizedCost; `timeframe` Custom (with `timePeriod`),
MonthToDate or TheLastMonth; granularity None or Daily; one Sum aggregation of Cost, PreTaxCost or
CostUSD; groupings by TagKey (any tag) and by the ResourceGroupName, ResourceGroup, ResourceLocation
or MeterCategory dimensions; filters `tags` and `dimensions` with operator In, combined by `and`.
Anything else answers 400 BadRequest, as a query the real service cannot run does.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

from aiohttp import web

from aca_gpu.emulator.arm import ArmError, json_response, read_json
from aca_gpu.emulator.context import Ctx, Params
from aca_gpu.emulator.providers.costmanagement.models import Usage, usages

COST_NAMES = ("Cost", "PreTaxCost", "CostUSD")
DIMENSIONS = ("ResourceGroupName", "ResourceGroup", "ResourceLocation", "MeterCategory")


def _bad(message: str) -> ArmError:
    return ArmError(message, code="BadRequest", status=400)


def _period(body: dict[str, Any]) -> tuple[datetime, datetime]:
    frame = str(body.get("timeframe", ""))
    now = datetime.now(UTC)
    if frame == "Custom":
        period = body.get("timePeriod") or {}
        try:
            start = datetime.fromisoformat(str(period["from"]).replace("Z", "+00:00"))
            end = datetime.fromisoformat(str(period["to"]).replace("Z", "+00:00"))
        except (KeyError, ValueError) as exc:
            raise _bad("timePeriod needs ISO-8601 'from' and 'to' for a Custom timeframe") from exc
        return (start if start.tzinfo else start.replace(tzinfo=UTC)), (
            end if end.tzinfo else end.replace(tzinfo=UTC)
        )
    month = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    if frame == "MonthToDate":
        return month, now
    if frame == "TheLastMonth":
        return (month - timedelta(days=1)).replace(day=1), month
    raise _bad(f"timeframe {frame!r} is not supported")


def _matches(usage: Usage, expr: dict[str, Any]) -> bool:
    if not expr:
        return True
    if "and" in expr:
        return all(_matches(usage, e) for e in expr["and"])
    if "or" in expr:
        return any(_matches(usage, e) for e in expr["or"])
    for kind in ("tags", "dimensions"):
        if kind in expr:
            cond = expr[kind]
            if str(cond.get("operator", "In")) != "In":
                raise _bad(f"filter operator {cond.get('operator')!r} is not supported")
            values = {str(v).lower() for v in cond.get("values") or []}
            name = str(cond.get("name", ""))
            got = usage.tag(name) if kind == "tags" else _dimension(usage, name)
            return got is not None and got.lower() in values
    raise _bad(f"filter {sorted(expr)} is not supported")


def _dimension(usage: Usage, name: str) -> str:
    rec = usage.record
    if name in ("ResourceGroupName", "ResourceGroup"):
        return rec.resource_group.lower()  # Cost Management reports group names in lower case
    if name == "ResourceLocation":
        return rec.location.replace(" ", "").lower()
    if name == "MeterCategory":
        return "Azure Container Apps"
    raise _bad(f"grouping or filter by dimension {name!r} is not supported")


def _columns(body: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bool]:
    dataset = body.get("dataset") or {}
    aggregation = dataset.get("aggregation") or {}
    if len(aggregation) != 1:
        raise _bad("exactly one aggregation is supported")
    (agg,) = aggregation.values()
    if agg.get("function") != "Sum" or agg.get("name") not in COST_NAMES:
        raise _bad(f"aggregation {agg} is not supported")
    groups = []
    for g in dataset.get("grouping") or []:
        if g.get("type") == "TagKey":
            groups.append(("TagKey", str(g.get("name", ""))))
        elif g.get("type") == "Dimension" and g.get("name") in DIMENSIONS:
            groups.append(("Dimension", str(g["name"])))
        else:
            raise _bad(f"grouping {g} is not supported")
    granularity = dataset.get("granularity") or "None"
    if granularity not in ("None", "Daily"):
        raise _bad(f"granularity {granularity!r} is not supported")
    return str(agg["name"]), groups, granularity == "Daily"


async def query(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    body = read_json(await req.read())
    if body.get("type", "ActualCost") not in ("ActualCost", "AmortizedCost", "Usage"):
        raise _bad(f"type {body.get('type')!r} is not supported")
    start, end = _period(body)
    cost_name, groups, daily = _columns(body)
    flt = (body.get("dataset") or {}).get("filter") or {}
    totals: dict[tuple[Any, ...], float] = defaultdict(float)
    for usage in usages(ctx, start, end):
        if "rg" in p and usage.record.resource_group.lower() != p["rg"].lower():
            continue
        if not _matches(usage, flt):
            continue
        key: list[Any] = [int(usage.start.strftime("%Y%m%d"))] if daily else []
        for kind, name in groups:
            if kind == "TagKey":
                value = usage.tag(name)
                key += [name.lower(), value] if value is not None else ["", ""]
            else:
                key.append(_dimension(usage, name))
        totals[tuple(key)] += usage.cost
    columns = [{"name": cost_name, "type": "Number"}]
    if daily:
        columns.append({"name": "UsageDate", "type": "Number"})
    for kind, name in groups:
        if kind == "TagKey":
            columns += [{"name": "TagKey", "type": "String"}, {"name": "TagValue", "type": "String"}]
        else:
            columns.append({"name": name, "type": "String"})
    columns.append({"name": "Currency", "type": "String"})
    rows = [[cost, *key, "USD"] for key, cost in sorted(totals.items(), key=lambda kv: str(kv[0]))]
    scope = req.path.split("/providers/")[0]
    return json_response(
        {
            "id": f"{scope}/providers/Microsoft.CostManagement/query/{ctx.subscription}",
            "name": ctx.subscription,
            "type": "Microsoft.CostManagement/query",
            "location": None,
            "sku": None,
            "eTag": None,
            "properties": {"nextLink": None, "columns": columns, "rows": rows},
        }
    )

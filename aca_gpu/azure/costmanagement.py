"""Azure Cost Management query: what acagpu's runs were actually billed, per run and resource group.

One query per subscription (`azure-mgmt-costmanagement`, query API): ActualCost over a custom period,
summed, grouped by the `acagpu:run-id` tag and the resource group, filtered to `acagpu:managed=true`
(and to the given run ids). Cost Management's data arrive 8 to 24 hours after the usage: a run newer
than that may show part of its bill or none; the caller says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aca_gpu import naming
from aca_gpu.azure.clients import Clients
from aca_gpu.azure.translate import translate_errors

DATA_DELAY_HOURS = 24  # Cost Management: "typically within 8 to 24 hours"


@dataclass(frozen=True)
class BilledCost:
    """One (run, resource group) row of the bill."""

    subscription: str
    run_id: str
    resource_group: str
    usd: float
    currency: str


def _definition(since: datetime, until: datetime, run_ids: Sequence[str]) -> Any:
    from azure.mgmt.costmanagement import models as m

    managed = m.QueryFilter(
        tags=m.QueryComparisonExpression(name=naming.TAG_MANAGED, operator="In", values_property=["true"])
    )
    flt = managed
    if run_ids:
        runs = m.QueryFilter(
            tags=m.QueryComparisonExpression(
                name=naming.TAG_RUN_ID, operator="In", values_property=list(run_ids)
            )
        )
        flt = m.QueryFilter(and_property=[managed, runs])
    return m.QueryDefinition(
        type="ActualCost",
        timeframe="Custom",
        time_period=m.QueryTimePeriod(from_property=since, to=until),
        dataset=m.QueryDataset(
            granularity="None",
            aggregation={"totalCost": m.QueryAggregation(name="Cost", function="Sum")},
            grouping=[
                m.QueryGrouping(type="TagKey", name=naming.TAG_RUN_ID),
                m.QueryGrouping(type="Dimension", name="ResourceGroupName"),
            ],
            filter=flt,
        ),
    )


def billed_costs(
    clients: Clients, since: datetime, until: datetime, run_ids: Sequence[str] = ()
) -> tuple[list[BilledCost], bool]:
    """The bill of acagpu's groups in `clients`' subscription; the flag says a further page was left."""
    scope = f"/subscriptions/{clients.subscription_id}"
    with translate_errors("query Cost Management", scope):
        result = clients.costmanagement.query.usage(scope, _definition(since, until, run_ids))
    props = getattr(result, "properties", None)
    if props is None:
        return [], False
    names = [str(c.name) for c in props.columns or []]
    rows = []
    for raw in props.rows or []:
        row = dict(zip(names, raw, strict=False))
        cost = next((row[n] for n in ("Cost", "PreTaxCost", "CostUSD") if n in row), 0.0)
        run = (
            str(row.get("TagValue") or "") if str(row.get("TagKey", "")).lower() == naming.TAG_RUN_ID else ""
        )
        rows.append(
            BilledCost(
                clients.subscription_id,
                run,
                str(row.get("ResourceGroupName", "")),
                float(cost or 0.0),
                str(row.get("Currency", "USD")),
            )
        )
    return rows, bool(getattr(props, "next_link", None))

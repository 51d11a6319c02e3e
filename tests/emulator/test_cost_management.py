"""The emulator's Cost Management query, driven by the real azure-mgmt-costmanagement client."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError
from azure.mgmt.appcontainers import ContainerAppsAPIClient
from azure.mgmt.costmanagement import CostManagementClient
from azure.mgmt.costmanagement import models as m
from azure.mgmt.resource.resources import ResourceManagementClient

from aca_gpu.emulator.server import EmulatorServer
from tests.emulator.helpers import POLL, StaticCredential, running_explorer


def _client(server: EmulatorServer) -> CostManagementClient:
    return CostManagementClient(
        StaticCredential(server.token),
        base_url=server.endpoint,
        connection_verify=server.ca_bundle,
        polling_interval=POLL,
        retry_total=0,
    )


def _query(grouping: list[Any], timeframe: str = "Custom") -> Any:
    now = datetime.now(UTC)
    return m.QueryDefinition(
        type="ActualCost",
        timeframe=timeframe,
        time_period=m.QueryTimePeriod(from_property=now - timedelta(days=1), to=now + timedelta(minutes=1)),
        dataset=m.QueryDataset(
            granularity="None",
            aggregation={"totalCost": m.QueryAggregation(name="Cost", function="Sum")},
            grouping=grouping,
        ),
    )


def test_a_replicas_life_is_billed_at_the_tables_meters(
    server: EmulatorServer, aca: ContainerAppsAPIClient, arm: ResourceManagementClient
) -> None:
    running_explorer(aca, arm, server.subscription)
    aca.container_apps.begin_delete("rg-acagpu-t1", "explorer").result()  # its replica stops billing
    (row,) = [r for r in server.billing()["replicas"] if r["resource"] == "explorer"]
    assert not row["running"]
    scope = f"/subscriptions/{server.subscription}"
    result = _client(server).query.usage(
        scope, _query([m.QueryGrouping(type="Dimension", name="ResourceGroupName")])
    )
    names = [c.name for c in result.properties.columns]
    assert names == ["Cost", "ResourceGroupName", "Currency"]
    ((cost, group, currency),) = result.properties.rows
    assert group == "rg-acagpu-t1" and currency == "USD"
    # a T4 replica of 8 vCPU / 56 GiB: GPU + vCPU + memory meters, eastus 2026-08 ($0.000433/s)
    assert cost == pytest.approx(row["wall_seconds"] * (0.000073 + 8 * 0.000024 + 56 * 0.000003), rel=0.02)
    # the same at the group's own scope; another group's scope has nothing
    rg_scope = f"{scope}/resourceGroups/rg-acagpu-t1"
    assert _client(server).query.usage(rg_scope, _query([])).properties.rows[0][0] == pytest.approx(
        cost, rel=1e-3
    )


@pytest.mark.parametrize(
    ("grouping", "timeframe"),
    [
        ([m.QueryGrouping(type="Dimension", name="ServiceName")], "Custom"),
        ([], "WeekToDate"),
    ],
)
def test_a_query_outside_the_subset_is_refused(
    server: EmulatorServer, grouping: list[Any], timeframe: str
) -> None:
    with pytest.raises(HttpResponseError) as caught:
        _client(server).query.usage(f"/subscriptions/{server.subscription}", _query(grouping, timeframe))
    assert caught.value.status_code == 400 and "not supported" in str(caught.value)

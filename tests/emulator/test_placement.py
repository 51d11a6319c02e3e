"""Placement failures and per-region GPU quotas, switched on by fault specs (faults.py docstring)."""

from __future__ import annotations

from typing import Any

import pytest
import requests
from azure.core.exceptions import HttpResponseError
from azure.mgmt.appcontainers import ContainerAppsAPIClient
from azure.mgmt.resource.resources import ResourceManagementClient

from aca_gpu.emulator.faults import Faults, FaultSpecError
from aca_gpu.emulator.server import EmulatorServer
from tests.emulator.helpers import A100_ONLY_TYPE, T4, app_body, make_rg, wait_for

RG = "rg-acagpu-t1"


def _env(aca: ContainerAppsAPIClient, name: str, location: str, gpu_type: str = T4) -> None:
    body = {
        "location": location,
        "properties": {
            "workloadProfiles": [
                {"name": "Consumption", "workloadProfileType": "Consumption"},
                {"name": "gpu", "workloadProfileType": gpu_type},
            ]
        },
    }
    aca.managed_environments.begin_create_or_update(RG, name, body).result()


def _app(server: EmulatorServer, env: str, location: str) -> dict[str, Any]:
    return {**app_body(server.subscription, RG, env), "location": location}


def _usage(aca: ContainerAppsAPIClient, location: str, name: str) -> tuple[int, int]:
    for u in aca.usages.list(location):
        if u.name.value == name:
            return int(u.current_value), int(u.limit)
    raise AssertionError(f"no usage {name} in {location}")


A100_USAGE, T4_USAGE = "ManagedEnvironmentConsumptionNCA100Gpus", "ManagedEnvironmentConsumptionT4Gpus"


def test_region_quota_shows_in_usages_and_refuses_the_create(
    server: EmulatorServer, aca: ContainerAppsAPIClient, arm: ResourceManagementClient
) -> None:
    server.set_faults("quota:region=eastus,profile=A100,limit=1")
    assert _usage(aca, "eastus", A100_USAGE) == (0, 1)
    assert _usage(aca, "eastus", T4_USAGE)[1] == 4  # other profiles keep the default
    assert _usage(aca, "westus", A100_USAGE)[1] == 4  # other regions too
    make_rg(arm)
    _env(aca, "cae-east", "eastus", A100_ONLY_TYPE)  # environments take no GPU quota
    aca.container_apps.begin_create_or_update(RG, "first", _app(server, "cae-east", "eastus")).result()
    wait_for(lambda: _usage(aca, "eastus", A100_USAGE) == (1, 1), what="usage 1 of 1")
    with pytest.raises(HttpResponseError) as err:
        aca.container_apps.begin_create_or_update(RG, "second", _app(server, "cae-east", "eastus")).result()
    assert err.value.status_code == 400
    assert err.value.error is not None and err.value.error.code == "MaxNumberOfGpuCoresExceeded"
    assert "Maximum Allowed Cores exceeded" in str(err.value)
    assert [a.name for a in aca.container_apps.list_by_resource_group(RG)] == ["first"]  # nothing created


def test_stuck_can_be_scoped_to_one_region(
    server: EmulatorServer, aca: ContainerAppsAPIClient, arm: ResourceManagementClient
) -> None:
    server.set_faults("stuck:region=West US 3")
    make_rg(arm)
    _env(aca, "cae-east", "eastus")
    _env(aca, "cae-west", "westus3")
    east = aca.container_apps.begin_create_or_update(RG, "east", _app(server, "cae-east", "eastus")).result()
    west = aca.container_apps.begin_create_or_update(RG, "west", _app(server, "cae-west", "westus3")).result()

    def state(app: Any) -> str:
        reps = aca.container_apps_revision_replicas.list_replicas(
            RG, app.name, app.latest_revision_name
        ).value
        if not reps:
            return ""
        props = reps[0].properties
        return "Running" if props.running_state == "Running" else str(props.running_state_details)

    wait_for(lambda: state(east) == "Running", what="the eastus replica running")
    assert state(west) == "AssigningReplica"


def test_workload_profile_full_is_a_504_and_an_unplaced_replica(
    server: EmulatorServer, aca: ContainerAppsAPIClient, arm: ResourceManagementClient
) -> None:
    server.set_faults("wpfull:profile=T4")
    make_rg(arm)
    _env(aca, "cae-east", "eastus")
    rgp = f"/subscriptions/{server.subscription}/resourceGroups/{RG}/providers/Microsoft.App"
    url = f"{server.endpoint}{rgp}/containerApps/full"
    resp = requests.put(
        url,
        params={"api-version": "2026-07-01"},
        json=_app(server, "cae-east", "eastus"),
        headers={"Authorization": f"Bearer {server.token}"},
        verify=server.ca_bundle,
        timeout=10,
    )
    assert resp.status_code == 504 and resp.json()["error"]["code"] == "GatewayTimeout"
    app = wait_for(
        lambda: (a := aca.container_apps.get(RG, "full")).latest_revision_name and a, what="the app"
    )
    (replica,) = aca.container_apps_revision_replicas.list_replicas(
        RG, "full", app.latest_revision_name
    ).value
    assert replica.properties.running_state == "NotRunning"
    assert replica.properties.running_state_details == "WorkLoad Profile Full"


def test_region_without_capacity_has_a_healthy_revision_and_no_replicas(
    server: EmulatorServer, aca: ContainerAppsAPIClient, arm: ResourceManagementClient
) -> None:
    server.set_faults("nocapacity:region=eastus")
    make_rg(arm)
    _env(aca, "cae-east", "eastus")
    app = aca.container_apps.begin_create_or_update(RG, "empty", _app(server, "cae-east", "eastus")).result()
    assert app.provisioning_state == "Succeeded"
    rev = aca.container_apps_revisions.get_revision(RG, "empty", app.latest_revision_name)
    assert (rev.provisioning_state, rev.health_state, rev.replicas) == ("Provisioned", "Healthy", 1)
    assert list(aca.container_apps_revision_replicas.list_replicas(RG, "empty", rev.name).value) == []


def test_scoping_keys_and_bad_values() -> None:
    faults = Faults("quota:region=eastus,profile=A100,limit=0;stuck:profile=T4")
    assert faults.quota_limit("East US", "Consumption-GPU-NC24-A100") == 0
    assert faults.quota_limit("westus", "Consumption-GPU-NC24-A100") is None
    assert (
        faults.fire("quota", location="eastus", profile="Consumption-GPU-NC24-A100") is None
    )  # a standing rule
    assert faults.fire("stuck", location="eastus", profile="Consumption-GPU-NC8as-T4") is not None
    assert faults.fire("stuck", location="eastus", profile="Consumption-GPU-NC24-A100") is None
    with pytest.raises(FaultSpecError):
        Faults("quota:limit=many")

"""ARM surface through the real SDK clients: auth, api-version, RGs, providers, envs, apps, LROs, errors."""

from __future__ import annotations

import pytest
import requests
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError, ResourceNotFoundError
from azure.mgmt.appcontainers import ContainerAppsAPIClient
from azure.mgmt.resource.resources import ResourceManagementClient

from aca_gpu.emulator.providers.app.exceptions import MSG_QUOTA
from aca_gpu.emulator.server import EmulatorServer
from tests.emulator.helpers import (
    A100_ONLY_TYPE,
    SCALE,
    T4,
    StaticCredential,
    app_body,
    env_body,
    make_env,
    make_rg,
    wait_for,
)


def _get(server: EmulatorServer, path: str, *, token: str | None = "ok", **params: str) -> requests.Response:
    headers = {} if token is None else {"Authorization": f"Bearer {server.token if token == 'ok' else token}"}
    return requests.get(
        server.endpoint + path, params=params, headers=headers, verify=server.ca_bundle, timeout=10
    )


def test_missing_or_wrong_token_is_401_with_arm_envelope(server: EmulatorServer) -> None:
    path = f"/subscriptions/{server.subscription}/resourcegroups"
    for token, code in ((None, "AuthenticationFailed"), ("forged", "InvalidAuthenticationToken")):
        resp = _get(server, path, token=token, **{"api-version": "2025-04-01"})
        assert resp.status_code == 401
        assert resp.json()["error"]["code"] == code


def test_sdk_raises_client_authentication_error(server: EmulatorServer) -> None:
    arm = ResourceManagementClient(
        StaticCredential("nope"),
        server.subscription,
        base_url=server.endpoint,
        connection_verify=server.ca_bundle,
    )
    with pytest.raises(ClientAuthenticationError):
        list(arm.resource_groups.list())


def test_api_version_missing_or_unknown_is_400(server: EmulatorServer) -> None:
    path = f"/subscriptions/{server.subscription}/resourcegroups"
    assert _get(server, path).json()["error"]["code"] == "MissingApiVersionParameter"
    resp = _get(server, path, **{"api-version": "1999-01-01"})
    assert resp.status_code == 400
    assert resp.json()["error"]["code"] == "InvalidApiVersionParameter"


def test_the_provider_advertises_the_versions_it_accepts(
    arm: ResourceManagementClient, server: EmulatorServer
) -> None:
    # recorded (Nov 2025): newest first, defaultApiVersion the newest preview; Azure accepts each one.
    # Each type has its own list (recorded per type in api-supported-versions): jobs and their
    # operations first appeared at 2022-11-01-preview, the profile-type catalogue at
    # 2022-06-01-preview, apps and environments at 2022-03-01.
    types = {t.resource_type: t for t in arm.providers.get("Microsoft.App").resource_types}
    jobs = types["jobs"]
    assert jobs.default_api_version == "2025-10-02-preview"
    assert jobs.api_versions[0] == "2026-07-01" and jobs.api_versions[-1] == "2022-11-01-preview"
    oldest = {t: v.api_versions[-1] for t, v in types.items()}
    assert oldest["containerApps"] == oldest["managedEnvironments"] == "2022-03-01"
    assert oldest["locations/containerappsjobOperationStatuses"] == "2022-11-01-preview"
    assert oldest["locations/containerappsjobOperationResults"] == "2022-11-01-preview"
    assert oldest["locations/containerappOperationStatuses"] == "2022-03-01"
    assert oldest["locations/availableManagedEnvironmentsWorkloadProfileTypes"] == "2022-06-01-preview"
    assert {v.api_versions[0] for v in types.values()} == {"2026-07-01"}
    assert jobs.api_versions == sorted(jobs.api_versions, reverse=True)
    assert "SystemAssignedResourceIdentity" in (jobs.capabilities or "")
    path = f"/subscriptions/{server.subscription}/providers/Microsoft.App/jobs"
    for version in jobs.api_versions:
        assert _get(server, path, **{"api-version": version}).status_code == 200, version
    assert _get(server, path, **{"api-version": "2025-11-01"}).json()["error"]["code"] == (
        "InvalidApiVersionParameter"
    )
    # a version the provider knows but jobs do not: ARM's answer for a registered type
    older = _get(server, path, **{"api-version": "2022-10-01"})
    assert older.status_code == 400, older.text
    error = older.json()["error"]
    assert error["code"] == "NoRegisteredProviderFound"
    assert "for type 'jobs'" in error["message"]
    assert "'2022-11-01-preview, 2023-04-01-preview," in error["message"]
    apps = f"/subscriptions/{server.subscription}/providers/Microsoft.App/containerApps"
    listed = _get(server, apps, **{"api-version": "2022-10-01"})
    assert listed.status_code == 200
    assert listed.headers["api-supported-versions"].startswith("2022-03-01, ")
    ok = _get(server, path, **{"api-version": "2022-11-01-preview"})
    assert ok.headers["api-supported-versions"].startswith("2022-11-01-preview, ")


def test_resource_group_crud_and_tag_filter(arm: ResourceManagementClient, server: EmulatorServer) -> None:
    make_rg(arm, "rg-a", "a1")
    arm.resource_groups.create_or_update("rg-b", {"location": "westus", "tags": {"other": "x"}})
    assert arm.resource_groups.check_existence("rg-a") is True
    assert arm.resource_groups.get("rg-a").tags["acagpu:run-id"] == "a1"
    managed = list(arm.resource_groups.list(filter="tagName eq 'acagpu:managed' and tagValue eq 'true'"))
    assert [g.name for g in managed] == ["rg-a"]
    assert {g.name for g in arm.resource_groups.list(filter="tagName eq 'other'")} == {"rg-b"}
    arm.resource_groups.begin_delete("rg-a").result()
    assert arm.resource_groups.check_existence("rg-a") is False
    with pytest.raises(ResourceNotFoundError) as err:
        arm.resource_groups.get("rg-a")
    assert err.value.error is not None and err.value.error.code == "ResourceGroupNotFound"


def test_provider_starts_unregistered_then_registers(
    arm: ResourceManagementClient, server: EmulatorServer
) -> None:
    assert server.ctx is not None
    server.ctx.state.providers.clear()  # a fresh subscription
    resp = _get(
        server,
        f"/subscriptions/{server.subscription}/providers/Microsoft.App/locations/eastus/usages",
        **{"api-version": "2026-07-01"},
    )
    assert resp.status_code == 409
    assert resp.json()["error"]["code"] == "MissingSubscriptionRegistration"
    assert "'Microsoft.App'" in resp.json()["error"]["message"]
    assert arm.providers.get("Microsoft.App").registration_state == "NotRegistered"
    assert arm.providers.register("Microsoft.App").registration_state == "Registering"
    wait_for(
        lambda: arm.providers.get("Microsoft.App").registration_state == "Registered", what="registration"
    )


def test_gpu_profile_types_only_in_gpu_regions(aca: ContainerAppsAPIClient) -> None:
    def gpu_types(location: str) -> set[str]:
        return {p.name for p in aca.available_workload_profiles.get(location) if p.properties.gpus}

    assert {T4, "Consumption-GPU-NC24-A100"} <= gpu_types("eastus")
    assert gpu_types("westus2") == {T4}
    assert gpu_types("uksouth") == set()
    assert {"NC24-A100", "NC48-A100", "NC96-A100"} <= gpu_types("northeurope")


def test_usages_include_gpu_quota(aca: ContainerAppsAPIClient) -> None:
    names = {u.name.value for u in aca.usages.list("eastus")}
    assert "ManagedEnvironmentCount" in names
    assert "ManagedEnvironmentConsumptionT4Gpus" in names


def test_env_create_lro_waiting_then_succeeded(
    aca: ContainerAppsAPIClient, arm: ResourceManagementClient, server: EmulatorServer
) -> None:
    make_rg(arm)
    assert server.ctx is not None
    # the create's emulated minutes are a moment at the tests' scale, which a loaded machine can
    # outlive between two requests: the clock stands still while the state is read
    with server.ctx.clock.held():
        poller = aca.managed_environments.begin_create_or_update("rg-acagpu-t1", "cae-acagpu-t1", env_body())
        assert aca.managed_environments.get("rg-acagpu-t1", "cae-acagpu-t1").provisioning_state == "Waiting"
    env = poller.result()
    assert env.provisioning_state == "Succeeded"
    assert [p.workload_profile_type for p in env.workload_profiles] == ["Consumption", T4]
    assert env.event_stream_endpoint.startswith(
        aca._config.base_url if hasattr(aca._config, "base_url") else ""
    )


@pytest.mark.parametrize("prop", ["minimumCount", "maximumCount"])
def test_min_max_on_consumption_gpu_rejected(
    aca: ContainerAppsAPIClient, arm: ResourceManagementClient, prop: str
) -> None:
    make_rg(arm)
    with pytest.raises(HttpResponseError) as err:
        aca.managed_environments.begin_create_or_update("rg-acagpu-t1", "e1", env_body(**{prop: 1})).result()
    assert err.value.status_code == 400
    assert err.value.error is not None and err.value.error.code == "WorkloadProfilePropertyNotSupported"
    label = "MinimumCount" if prop == "minimumCount" else "MaximumCount"
    assert f"Workload Profile property '{label}' is not supported for Consumption_GPU_NC8as_T4" in str(
        err.value
    )


def test_gpu_type_not_offered_in_region_rejected(
    aca: ContainerAppsAPIClient, arm: ResourceManagementClient
) -> None:
    make_rg(arm)
    body = env_body(A100_ONLY_TYPE)
    body["location"] = "westus2"
    with pytest.raises(HttpResponseError) as err:
        aca.managed_environments.begin_create_or_update("rg-acagpu-t1", "e1", body).result()
    assert err.value.status_code == 400


def test_env_404_and_rg_404(aca: ContainerAppsAPIClient, arm: ResourceManagementClient) -> None:
    with pytest.raises(ResourceNotFoundError) as err:
        aca.managed_environments.get("rg-missing", "e1")
    assert err.value.error is not None and err.value.error.code == "ResourceGroupNotFound"
    make_rg(arm)
    with pytest.raises(ResourceNotFoundError) as err:
        aca.managed_environments.get("rg-acagpu-t1", "e1")
    assert err.value.error is not None and err.value.error.code == "ResourceNotFound"
    assert "Microsoft.App/managedEnvironments/e1" in str(err.value)


def test_env_delete_takes_scaled_minutes(
    aca: ContainerAppsAPIClient, arm: ResourceManagementClient, server: EmulatorServer
) -> None:
    make_rg(arm)
    make_env(aca)
    import time

    started = time.monotonic()
    aca.managed_environments.begin_delete("rg-acagpu-t1", "cae-acagpu-t1").result()
    assert time.monotonic() - started >= 540 * SCALE * 0.9
    assert list(aca.managed_environments.list_by_resource_group("rg-acagpu-t1")) == []


def test_app_create_replica_running_with_endpoints(
    aca: ContainerAppsAPIClient, arm: ResourceManagementClient, server: EmulatorServer
) -> None:
    make_rg(arm)
    make_env(aca)
    app = aca.container_apps.begin_create_or_update(
        "rg-acagpu-t1", "explorer", app_body(server.subscription, "rg-acagpu-t1", "cae-acagpu-t1")
    ).result()
    assert app.provisioning_state == "Succeeded" and app.latest_revision_name.startswith("explorer--")
    rev = app.latest_revision_name

    def running() -> object:
        reps = aca.container_apps_revision_replicas.list_replicas("rg-acagpu-t1", "explorer", rev).value
        return reps if reps and reps[0].properties.running_state == "Running" else None

    reps = wait_for(running, what="replica Running")
    c = reps[0].properties.containers[0]
    assert c.exec_endpoint.startswith("wss://127.0.0.1:") and c.exec_endpoint.endswith(
        "/containers/explorer/exec"
    )
    assert "/providers/" not in c.log_stream_endpoint and c.log_stream_endpoint.endswith("/logstream")
    one = aca.container_apps_revision_replicas.get_replica("rg-acagpu-t1", "explorer", rev, reps[0].name)
    assert one.name == reps[0].name
    assert (
        aca.container_apps_revisions.get_revision("rg-acagpu-t1", "explorer", rev).running_state == "Running"
    )


def test_quota_fault_fails_env_creation_with_real_text(
    aca: ContainerAppsAPIClient, arm: ResourceManagementClient, server: EmulatorServer
) -> None:
    make_rg(arm)
    server.set_faults("quota:count=1")
    with pytest.raises(HttpResponseError) as err:
        make_env(aca)
    assert MSG_QUOTA in str(err.value)
    assert make_env(aca).provisioning_state == "Succeeded"  # count=1: the second try goes through


def test_429_fault_is_retried_by_azure_core(arm: ResourceManagementClient, server: EmulatorServer) -> None:
    server.set_faults("429:count=2,retry_after=0.01,method=PUT")
    assert make_rg(arm).name == "rg-acagpu-t1"
    fired = server.ctx.faults.describe()["faults"]  # type: ignore[union-attr]
    assert fired[0]["fired"] == 2  # type: ignore[index]


def test_5xx_fault_surfaces_after_retries(arm: ResourceManagementClient, server: EmulatorServer) -> None:
    server.set_faults("5xx:status=503")
    client = ResourceManagementClient(
        StaticCredential(server.token),
        server.subscription,
        base_url=server.endpoint,
        connection_verify=server.ca_bundle,
        retry_total=1,
        retry_backoff_factor=0.01,
    )
    with pytest.raises(HttpResponseError) as err:
        client.resource_groups.get("rg-x")
    assert err.value.status_code == 503


def test_rg_delete_removes_everything_and_inventory_is_empty(
    aca: ContainerAppsAPIClient, arm: ResourceManagementClient, server: EmulatorServer
) -> None:
    make_rg(arm)
    make_env(aca)
    aca.container_apps.begin_create_or_update(
        "rg-acagpu-t1", "explorer", app_body(server.subscription, "rg-acagpu-t1", "cae-acagpu-t1")
    ).result()
    assert server.inventory()["empty"] is False
    arm.resource_groups.begin_delete("rg-acagpu-t1").result()
    inv = server.inventory()
    assert inv["empty"] is True and inv["replicas"] == []


def test_a_started_emulator_answers_at_once() -> None:
    """start() returns once the server's loop runs: a reset right after it used to find the loop
    not yet running on a busy machine ("the emulator is not running")."""
    from aca_gpu.emulator.server import EmulatorServer

    for _ in range(5):
        with EmulatorServer(time_scale=0.01) as server:
            assert server._loop is not None and server._loop.is_running()
            server.reset()


def test_a_create_whose_group_is_deleted_meanwhile_ends_canceled(
    aca: ContainerAppsAPIClient, arm: ResourceManagementClient, server: EmulatorServer
) -> None:
    """`acagpu down --run-id` from another shell while the run's environment is still being made:
    its create's operation answered InProgress for ever, and the run's poller waited for ever."""
    make_rg(arm)
    assert server.ctx is not None
    with server.ctx.clock.held():  # the create cannot end on its own while the group goes
        poller = aca.managed_environments.begin_create_or_update("rg-acagpu-t1", "cae-acagpu-t1", env_body())
        arm.resource_groups.begin_delete("rg-acagpu-t1")
        with pytest.raises(HttpResponseError) as ended:
            poller.result(timeout=30)
    assert "OperationCanceled" in str(ended.value) or "Canceled" in str(ended.value), str(ended.value)

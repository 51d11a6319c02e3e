"""Sign-in as standard Azure tools do it: JWT-shaped ARM tokens, a managed-identity token endpoint,
subscriptions and tenants, cloud metadata by api-version, and resource listing by `$filter`."""

from __future__ import annotations

import jwt
import pytest
import requests
from azure.core.exceptions import HttpResponseError
from azure.mgmt.appcontainers import ContainerAppsAPIClient
from azure.mgmt.resource.resources import ResourceManagementClient

from aca_gpu.emulator.server import EmulatorServer
from tests.emulator.helpers import app_body, make_env, make_rg

ARM = "https://management.core.windows.net/"


def _identity(server: EmulatorServer, header: str | None, **query: str) -> requests.Response:
    env = server.identity_env()
    headers = {"X-IDENTITY-HEADER": header} if header is not None else {}
    return requests.get(
        env["IDENTITY_ENDPOINT"], params=query, headers=headers, verify=server.ca_bundle, timeout=5
    )


def test_static_token_is_a_jwt_with_tenant_and_object(server: EmulatorServer) -> None:
    claims = jwt.decode(server.token, options={"verify_signature": False})
    assert {"tid", "oid", "aud", "exp"} <= set(claims)
    assert claims["aud"] == ARM
    assert claims["tid"] == server.tokens.tenant


def test_managed_identity_endpoint_mints_a_token_arm_accepts(server: EmulatorServer) -> None:
    assert _identity(server, None, resource=ARM, **{"api-version": "2019-08-01"}).status_code == 401
    assert _identity(server, "wrong", resource=ARM, **{"api-version": "2019-08-01"}).status_code == 401
    assert (
        _identity(
            server, server.token, resource="https://vault.azure.net", **{"api-version": "2019-08-01"}
        ).status_code
        == 400
    )
    resp = _identity(server, server.token, resource=ARM, **{"api-version": "2019-08-01"})
    assert resp.status_code == 200
    doc = resp.json()
    assert set(doc) >= {"access_token", "expires_on", "resource", "token_type"}
    assert doc["resource"] == ARM and doc["token_type"] == "Bearer" and int(doc["expires_on"]) > 0
    minted = doc["access_token"]
    assert minted != server.token
    assert jwt.decode(minted, options={"verify_signature": False})["tid"] == server.tokens.tenant

    def get(path: str, token: str = minted) -> requests.Response:
        return requests.get(
            f"{server.endpoint}{path}?api-version=2022-12-01",
            headers={"Authorization": f"Bearer {token}"},
            verify=server.ca_bundle,
            timeout=5,
        )

    listed = get("/subscriptions").json()["value"]
    assert [s["subscriptionId"] for s in listed] == [server.subscription]
    assert listed[0]["tenantId"] == server.tokens.tenant and listed[0]["state"] == "Enabled"
    assert get(f"/subscriptions/{server.subscription}").json()["displayName"] == "acagpu emulator"
    assert [t["tenantId"] for t in get("/tenants").json()["value"]] == [server.tokens.tenant]
    missing = get("/subscriptions/00000000-0000-0000-0000-000000000000")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "SubscriptionNotFound"
    forged = jwt.encode(
        {"aud": ARM, "tid": "x", "exp": 9999999999}, "not-the-emulator-key-but-32-bytes!", algorithm="HS256"
    )
    bad = requests.get(
        f"{server.endpoint}/subscriptions?api-version=2022-12-01",
        headers={"Authorization": f"Bearer {forged}"},
        verify=server.ca_bundle,
        timeout=5,
    )
    assert bad.status_code == 401


def test_cloud_metadata_form_follows_the_api_version(server: EmulatorServer) -> None:
    def get(version: str) -> object:
        return requests.get(
            f"{server.endpoint}/metadata/endpoints?api-version={version}", verify=server.ca_bundle, timeout=5
        ).json()

    new = get("2022-09-01")
    assert isinstance(new, dict) and new["resourceManager"] == server.endpoint + "/"
    assert new["authentication"]["audiences"][0] == ARM
    old = get("2019-05-01")
    assert isinstance(old, list) and old[0]["resourceManager"] == server.endpoint + "/"


def test_resources_list_by_filter(
    server: EmulatorServer, aca: ContainerAppsAPIClient, arm: ResourceManagementClient
) -> None:
    make_rg(arm)
    make_rg(arm, name="rg-other", run_id="t2")
    make_env(aca)
    aca.container_apps.begin_create_or_update(
        "rg-acagpu-t1",
        "explorer",
        {**app_body(server.subscription, "rg-acagpu-t1", "cae-acagpu-t1"), "tags": {"role": "explorer"}},
    ).result()
    everything = {r.name for r in arm.resources.list()}
    assert everything == {"cae-acagpu-t1", "explorer"}
    by_rg = {r.name for r in arm.resources.list(filter="resourceGroup eq 'rg-acagpu-t1'")}
    assert by_rg == everything
    assert list(arm.resources.list(filter="resourceGroup eq 'rg-other'")) == []
    apps = [r.name for r in arm.resources.list(filter="resourceType eq 'Microsoft.App/containerApps'")]
    assert apps == ["explorer"]
    tagged = [r.name for r in arm.resources.list(filter="tagName eq 'role' and tagValue eq 'explorer'")]
    assert tagged == ["explorer"]
    assert list(arm.resources.list(filter="tagName eq 'role' and tagValue eq 'tester'")) == []
    in_group = [
        r.type
        for r in arm.resources.list_by_resource_group(
            "rg-acagpu-t1", filter="resourceType eq 'Microsoft.App/managedEnvironments'"
        )
    ]
    assert in_group == ["Microsoft.App/managedEnvironments"]
    with pytest.raises(HttpResponseError) as err:
        list(arm.resources.list(filter="startswith(name, 'x')"))
    assert err.value.status_code == 400 and "InvalidFilter" in str(err.value)

"""Microsoft.Storage in the emulator, through the real azure-mgmt-storage client, and `shares.ensure`
through acagpu's own Azure layer: an account's create is an LRO, its name is global, its keys come
only from listKeys, a share is read before it is made, and a group's delete takes its accounts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.mgmt.appcontainers import ContainerAppsAPIClient
from azure.mgmt.resource.resources import ResourceManagementClient
from azure.mgmt.storage import StorageManagementClient

from aca_gpu.azure.cloud import AzureCloud
from aca_gpu.config import load_settings
from aca_gpu.emulator.server import EmulatorServer
from aca_gpu.workflow.env import shares
from tests.emulator.helpers import POLL, StaticCredential, make_env, make_rg

ACCOUNT = "acagpulab0123abcd"
BODY = {"location": "eastus", "sku": {"name": "Standard_LRS"}, "kind": "StorageV2", "tags": {"a": "b"}}


@pytest.fixture
def storage(server: EmulatorServer) -> StorageManagementClient:
    kwargs: dict[str, Any] = {
        "base_url": server.endpoint,
        "connection_verify": server.ca_bundle,
        "polling_interval": POLL,
        "retry_backoff_factor": 0.01,
    }
    return StorageManagementClient(StaticCredential(server.token), server.subscription, **kwargs)


def _raw(server: EmulatorServer, method: str, path: str, body: Any = None) -> requests.Response:
    return requests.request(
        method,
        server.endpoint + path,
        params={"api-version": "2026-09-01"},
        json=body,
        headers={"Authorization": f"Bearer {server.token}"},
        verify=server.ca_bundle,
        timeout=10,
    )


def test_account_create_is_an_lro_and_its_keys_come_only_from_list_keys(
    arm: ResourceManagementClient, storage: StorageManagementClient, server: EmulatorServer
) -> None:
    make_rg(arm, "rg-a")
    path = (
        f"/subscriptions/{server.subscription}/resourceGroups/rg-a/providers/Microsoft.Storage/"
        f"storageAccounts/{ACCOUNT}"
    )
    first = _raw(server, "PUT", path, BODY)
    assert first.status_code == 202 and "/asyncoperations/" in first.headers["Location"], first.text
    assert int(first.headers["Retry-After"]) >= 1
    account = storage.storage_accounts.begin_create("rg-a", ACCOUNT, BODY).result()  # polls to the end
    assert (account.name, account.properties.provisioning_state, account.tags) == (
        ACCOUNT,
        "Succeeded",
        {"a": "b"},
    )
    assert account.sku.name == "Standard_LRS" and account.kind == "StorageV2"
    again = _raw(server, "PUT", path, BODY)  # a finished account: answered at once
    assert again.status_code == 200, again.text

    keys = storage.storage_accounts.list_keys("rg-a", ACCOUNT)["keys"]  # `.keys` is the Mapping method
    assert [k["keyName"] for k in keys] == ["key1", "key2"] and all(len(k["value"]) > 40 for k in keys)
    read = _raw(server, "GET", path)
    assert read.status_code == 200 and not any(k["value"] in read.text for k in keys)

    with pytest.raises(HttpResponseError) as taken:  # names are global: another group may not have it
        make_rg(arm, "rg-b")
        storage.storage_accounts.begin_create("rg-b", ACCOUNT, BODY).result()
    assert taken.value.error is not None and taken.value.error.code == "StorageAccountAlreadyTaken"
    with pytest.raises(HttpResponseError) as bad:
        storage.storage_accounts.begin_create("rg-a", "Bad_Name", BODY).result()
    assert bad.value.error is not None and bad.value.error.code == "AccountNameInvalid"


def test_shares_are_read_then_made_and_a_group_delete_takes_the_account(
    arm: ResourceManagementClient, storage: StorageManagementClient
) -> None:
    make_rg(arm, "rg-a")
    storage.storage_accounts.begin_create("rg-a", ACCOUNT, BODY).result()
    with pytest.raises(ResourceNotFoundError):
        storage.file_shares.get("rg-a", ACCOUNT, "data")
    made = storage.file_shares.create("rg-a", ACCOUNT, "data", {"properties": {"shareQuota": 100}})
    assert (made.name, made.share_quota) == ("data", 100)
    assert storage.file_shares.get("rg-a", ACCOUNT, "data").share_quota == 100
    with pytest.raises(HttpResponseError):
        storage.file_shares.create("rg-a", ACCOUNT, "Bad--name", {"properties": {}})

    arm.resource_groups.begin_delete("rg-a")  # the account goes with its group
    with pytest.raises(ResourceNotFoundError):
        storage.storage_accounts.get_properties("rg-a", ACCOUNT)


def test_delete_answers_200_then_204(
    arm: ResourceManagementClient, storage: StorageManagementClient, server: EmulatorServer
) -> None:
    make_rg(arm, "rg-a")
    storage.storage_accounts.begin_create("rg-a", ACCOUNT, BODY).result()
    path = (
        f"/subscriptions/{server.subscription}/resourceGroups/rg-a/providers/Microsoft.Storage/"
        f"storageAccounts/{ACCOUNT}"
    )
    assert [_raw(server, "DELETE", path).status_code for _ in range(2)] == [200, 204]


@pytest.fixture
def cloud(server: EmulatorServer) -> Iterator[AzureCloud]:
    settings = load_settings(env=server.client_env() | {"ACAGPU_POLLING_INTERVAL": "0.1"}, file={})
    yield AzureCloud.from_settings(settings)


def test_ensure_makes_only_what_is_missing_and_never_returns_the_key(
    arm: ResourceManagementClient, aca: ContainerAppsAPIClient, cloud: AzureCloud, server: EmulatorServer
) -> None:
    make_rg(arm, "rg-acagpu-env-lab")
    make_env(aca, "rg-acagpu-env-lab", "cae-acagpu-env-lab")
    said: list[str] = []
    tags = {"acagpu:managed": "true", "acagpu:kind": "env", "acagpu:env": "lab", "acagpu:expires-at": "x"}

    def ensure() -> shares.Made:
        return shares.ensure(
            cloud,
            env_name="lab",
            resource_group="rg-acagpu-env-lab",
            environment="cae-acagpu-env-lab",
            location="eastus",
            group_tags=tags,
            shares=["data", "models"],
            say=said.append,
        )

    made = ensure()
    account = shares.account_name(cloud.subscription_id, "lab")
    assert made.created == [
        f"storage account {account}",
        "file share data",
        "environment storage data",
        "file share models",
        "environment storage models",
    ]
    assert sorted(cloud.environment_storages("rg-acagpu-env-lab", "cae-acagpu-env-lab")) == ["data", "models"]
    found = cloud.get_storage_account("rg-acagpu-env-lab", account)
    assert found is not None and found.tags == {k: v for k, v in tags.items() if k != "acagpu:expires-at"}
    assert ensure().created == []  # everything is found again: nothing is made twice
    share = _raw(
        server,
        "GET",
        f"/subscriptions/{server.subscription}/resourceGroups/rg-acagpu-env-lab/providers/Microsoft.Storage/"
        f"storageAccounts/{account}/fileServices/default/shares/data",
    )
    assert share.json()["properties"]["shareQuota"] == shares.SHARE_QUOTA_GIB  # sent, not the 5 TiB default

    key = aca.managed_environments_storages.get("rg-acagpu-env-lab", "cae-acagpu-env-lab", "data")
    assert key.properties.azure_file.account_name == account and not key.properties.azure_file.account_key
    secret = _raw(
        server,
        "POST",
        f"/subscriptions/{server.subscription}/resourceGroups/rg-acagpu-env-lab/providers/Microsoft.Storage/"
        f"storageAccounts/{account}/listKeys",
    ).json()["keys"][0]["value"]
    assert secret not in json.dumps([made.as_dict(), said, found.as_dict()])


def test_a_role_at_one_queues_scope_grants_its_data_actions_there_once_in_effect(
    arm: ResourceManagementClient, aca: ContainerAppsAPIClient, cloud: AzureCloud, server: EmulatorServer
) -> None:
    """Queue mode's grant through acagpu's Azure layer: the Event job's identity gets Contributor on
    one queue and Message Sender on another, each at the queue's own scope; the data plane allows
    each what its role holds, there only, once the assignment is in effect; the listing at a scope
    has that scope's assignments, and a delete takes each away (twice: no error)."""
    from aca_gpu.emulator.dataplane.queue_rbac import allows
    from aca_gpu.emulator.providers.authorization.models import PROPAGATION_S
    from tests.emulator.helpers import job_body, wait_for

    make_rg(arm)
    make_env(aca)
    made = shares.ensure(cloud, env_name="t1", resource_group="rg-acagpu-t1", environment="cae-acagpu-t1",
                         location="eastus", group_tags={}, shares=[], say=lambda _: None)  # fmt: skip
    body = job_body(server.subscription, "rg-acagpu-t1", "cae-acagpu-t1") | {
        "identity": {"type": "SystemAssigned"}
    }
    aca.jobs.begin_create_or_update("rg-acagpu-t1", "run-q1", body).result()
    job = cloud.get_job("rg-acagpu-t1", "run-q1")
    assert job is not None and job.principal_id
    ids = [
        cloud.grant_queue_role(
            "rg-acagpu-t1", made.account, "acagpu-q1", "contributor", job.principal_id, "r"
        ),
        cloud.grant_queue_role(
            "rg-acagpu-t1", made.account, "acagpu-q1-results", "sender", job.principal_id, "r"
        ),
    ]
    again = cloud.grant_queue_role(
        "rg-acagpu-t1", made.account, "acagpu-q1", "contributor", job.principal_id, "r"
    )
    assert again == ids[0] and ids[0].endswith(
        f"/storageAccounts/{made.account}/queueServices/default/queues/acagpu-q1/providers/"
        f"Microsoft.Authorization/roleAssignments/{ids[0].rsplit('/', 1)[-1]}"
    )
    (found,) = cloud.queue_role_assignments("rg-acagpu-t1", made.account, "acagpu-q1")
    assert (found.id, found.principal_id, found.description) == (ids[0], job.principal_id, "r")
    assert found.role_definition_id.endswith("974c5e8b-45b9-4653-ba55-5f855dd0fb88")

    assert server.ctx is not None
    ctx = server.ctx
    account = next(a for a in ctx.state.storage_accounts.values() if a.name == made.account)

    def may(method: str, rest: str, **query: str) -> bool:
        return allows(ctx, server.tokens.object_id, job.principal_id or "", account, method, rest, query)

    assert not may("GET", "acagpu-q1/messages")  # accepted, not yet in effect
    wait_for(  # each assignment is in effect PROPAGATION_S after its own grant: the second's later
        lambda: may("GET", "acagpu-q1/messages") and may("POST", "acagpu-q1-results/messages"),
        what=f"{PROPAGATION_S:g} emulated s of propagation",
    )
    assert may("GET", "acagpu-q1/messages") and may("PUT", "acagpu-q1/messages/m1")  # receive, renew
    assert may("DELETE", "acagpu-q1/messages/m1") and may("POST", "acagpu-q1/messages")
    assert may("POST", "acagpu-q1-results/messages") and not may("GET", "acagpu-q1-results/messages")
    assert not may("GET", "acagpu-other/messages") and not may("POST", "acagpu-q1-poison/messages")
    assert may("GET", "acagpu-other", comp="metadata")  # a queue-level call is not checked
    for assignment in ids:
        cloud.delete_role_assignment(assignment)
        cloud.delete_role_assignment(assignment)  # already gone: no error
    assert cloud.queue_role_assignments("rg-acagpu-t1", made.account, "acagpu-q1") == []
    assert not may("GET", "acagpu-q1/messages")

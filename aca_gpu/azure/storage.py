"""Storage accounts and Azure Files shares (`azure-mgmt-storage`), and the environment storage that
lets an environment's jobs mount a share.

The account key is read (listKeys) and sent (the environment storage's PUT) inside one function
here: it never reaches a workflow, a record, a document or a log line. Bodies are REST-shaped dicts
wrapped in SDK models, as in app_bodies.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aca_gpu.azure.clients import Clients
from aca_gpu.azure.resources import as_json, props
from aca_gpu.azure.translate import or_none, retrying
from aca_gpu.errors import CloudError
from aca_gpu.models import ShareMount, StorageAccountInfo

SKU = "Standard_LRS"
KIND = "StorageV2"


def account_info(obj: Any, rg: str) -> StorageAccountInfo:
    doc = as_json(obj)
    return StorageAccountInfo(
        name=str(doc.get("name", "")),
        resource_group=rg,
        location=str(doc.get("location", "")),
        tags={str(k): str(v) for k, v in (doc.get("tags") or {}).items()},
        provisioning_state=props(doc).get("provisioningState"),
    )


def get_storage_account(clients: Clients, rg: str, name: str) -> StorageAccountInfo | None:
    found = or_none(
        "read storage account", name, lambda: clients.storage.storage_accounts.get_properties(rg, name)
    )
    return None if found is None else account_info(found, rg)


def account_body(location: str, tags: Mapping[str, str]) -> dict[str, Any]:
    """Standard_LRS StorageV2 (Azure Files' general-purpose kind), HTTPS and TLS 1.2 only, no
    anonymous blob access: the account exists for its file shares."""
    return {
        "location": location,
        "tags": dict(tags),
        "sku": {"name": SKU},
        "kind": KIND,
        "properties": {
            "supportsHttpsTrafficOnly": True,
            "minimumTlsVersion": "TLS1_2",
            "allowBlobPublicAccess": False,
        },
    }


def create_storage_account(
    clients: Clients, rg: str, name: str, location: str, tags: Mapping[str, str]
) -> StorageAccountInfo:
    """PUT and wait for the create's LRO (tens of seconds on Azure); a PUT is idempotent."""
    from azure.mgmt.storage.models import StorageAccountCreateParameters

    body = StorageAccountCreateParameters(account_body(location, tags))

    def put() -> StorageAccountInfo:
        poller = clients.storage.storage_accounts.begin_create(rg, name, body)
        return account_info(poller.result(), rg)

    return retrying("create storage account", name, put)


def file_share_exists(clients: Clients, rg: str, account: str, share: str) -> bool:
    found = or_none(
        "read file share", f"{account}/{share}", lambda: clients.storage.file_shares.get(rg, account, share)
    )
    return found is not None


def create_file_share(clients: Clients, rg: str, account: str, share: str, quota_gib: int) -> None:
    from azure.mgmt.storage.models import FileShare

    body = FileShare({"properties": {"shareQuota": quota_gib}})
    retrying(
        "create file share",
        f"{account}/{share}",
        lambda: clients.storage.file_shares.create(rg, account, share, body),
    )


def set_environment_file_storage(
    clients: Clients, rg: str, environment: str, storage: str, mount: ShareMount
) -> None:
    """The environment storage `storage` on the mount's account and share, with the account's first
    key (read here, sent here, dropped here)."""
    from azure.mgmt.appcontainers.models import ManagedEnvironmentStorage

    listed = retrying(
        "list storage account keys",
        mount.account,
        lambda: clients.storage.storage_accounts.list_keys(mount.account_group, mount.account),
    )
    keys = [k for k in (as_json(listed).get("keys") or []) if k.get("value")]
    if not keys:
        raise CloudError(f"storage account {mount.account} answered no key", code="StorageAccountKeyMissing")
    body = ManagedEnvironmentStorage(
        {
            "properties": {
                "azureFile": {
                    "accountName": mount.account,
                    "accountKey": str(keys[0]["value"]),
                    "shareName": mount.share,
                    "accessMode": mount.access_mode,
                }
            }
        }
    )
    del keys, listed
    retrying(
        "create environment storage",
        storage,
        lambda: clients.apps.managed_environments_storages.create_or_update(rg, environment, storage, body),
    )

"""Storage accounts and Azure Files shares: the rules, on the shared state.

As the Storage resource provider does: an account name is 3-24 lowercase letters and digits and
unique across every subscription (another holder gets 409 StorageAccountAlreadyTaken); a create
takes a while (an LRO polled at the location's asyncoperations URL), a second PUT of a finished
account answers at once; a share name is 3-63 lowercase letters, digits and single hyphens. The
keys are made once per account and answered only by listKeys. An account goes with its group.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
from typing import Any

from aca_gpu.emulator.arm import ArmError, ConflictError, NotFoundError, iso_z, resource_not_found, utc_now
from aca_gpu.emulator.catalog import normalize_location
from aca_gpu.emulator.context import Ctx
from aca_gpu.emulator.dataplane import queues
from aca_gpu.emulator.providers.resources import models as rg_models
from aca_gpu.emulator.share_folders import share_folder
from aca_gpu.emulator.state import StorageAccount, key

NS = "Microsoft.Storage"
ACCOUNT_RE = re.compile(r"^[a-z0-9]{3,24}$")
SHARE_RE = re.compile(r"^(?!.*--)[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")
SKUS = ("Standard_LRS", "Standard_GRS", "Standard_RAGRS", "Standard_ZRS", "Premium_LRS", "Premium_ZRS")
KINDS = ("StorageV2", "Storage", "BlobStorage", "FileStorage", "BlockBlobStorage")
CREATE_S = 20.0  # an account's create, as seen on Azure: ~15-25 s of 202 polls
DEFAULT_QUOTA_GIB = 5120
MAX_QUOTA_GIB = 102400


def _new_key() -> str:
    return base64.b64encode(os.urandom(64)).decode()


def account_id(ctx: Ctx, account: StorageAccount) -> str:
    return (
        f"/subscriptions/{ctx.subscription}/resourceGroups/{account.rg}/providers/{NS}/storageAccounts/"
        f"{account.name}"
    )


def find(ctx: Ctx, rg: str, name: str) -> StorageAccount:
    account = ctx.state.storage_accounts.get(key(rg, name))
    if account is None:
        raise resource_not_found(f"{NS}/storageAccounts", name, rg)
    return account


def ready(ctx: Ctx, account: StorageAccount) -> bool:
    return ctx.clock.now() >= account.ready_at


def _holder(ctx: Ctx, name: str) -> tuple[Ctx, StorageAccount] | None:
    """Who holds an account name, in any emulated subscription (the names are global)."""
    for sub in (ctx.fleet or {ctx.subscription: ctx}).values():
        for account in sub.state.storage_accounts.values():
            if account.name == name:
                return sub, account
    return None


def put_account(ctx: Ctx, rg: str, name: str, body: dict[str, Any]) -> tuple[StorageAccount, bool]:
    """(the account, whether this PUT started a create); a finished one is updated in place (tags)."""
    if not ACCOUNT_RE.match(name):
        raise ArmError(
            f"{name} is not a valid storage account name. Storage account name must be between 3 and 24 "
            "characters in length and use numbers and lower-case letters only.",
            code="AccountNameInvalid",
        )
    group = rg_models.live_rg(ctx, rg)
    held = _holder(ctx, name)
    if held is not None and (held[0] is not ctx or held[1].rg.lower() != rg.lower()):
        raise ConflictError(
            f"The storage account named {name} is already taken.", code="StorageAccountAlreadyTaken"
        )
    location = str(body.get("location") or "")
    if not location:
        raise ArmError("The 'location' property is required.", code="LocationRequired")
    if not rg_models.known_location(location):
        raise ArmError(f"The location '{location}' is invalid.", code="LocationNotAvailableForResourceType")
    sku = str((body.get("sku") or {}).get("name") or "")
    if sku not in SKUS:
        raise ArmError(f"The SKU '{sku}' is not valid: one of {', '.join(SKUS)}.", code="InvalidSkuName")
    kind = str(body.get("kind") or "")
    if kind not in KINDS:
        raise ArmError(f"The kind '{kind}' is not valid: one of {', '.join(KINDS)}.", code="InvalidKind")
    tags = {str(k): str(v) for k, v in (body.get("tags") or {}).items()}
    if held is not None:
        account = held[1]
        if normalize_location(location) != account.location:
            raise ConflictError(
                f"The storage account {name} exists in {account.location}; its location cannot change.",
                code="StorageAccountLocationMismatch",
            )
        account.tags, account.sku = tags, sku
        return account, False
    account = StorageAccount(
        rg=group.name,
        name=name,
        location=normalize_location(location),
        tags=tags,
        sku=sku,
        kind=kind,
        created=utc_now(),
        ready_at=ctx.clock.after_seconds(CREATE_S),
        keys=(_new_key(), _new_key()),
    )
    ctx.state.storage_accounts[key(rg, name)] = account
    return account, True


def account_body(ctx: Ctx, account: StorageAccount) -> dict[str, Any]:
    """The account as GET answers it: never its keys."""
    done = ready(ctx, account)
    services = ("blob", "file", "queue", "table")
    endpoints = {s: f"https://{account.name}.{s}.core.windows.net/" for s in services}
    if ctx.endpoint:  # the emulator serves the File service itself, path-style (dataplane/files.py)
        endpoints["file"] = f"{ctx.endpoint}/{account.name}/"
    if ctx.endpoint:  # Azurite serves the queues behind the emulator; without it, the emulator
        # answers them 501, naming `--storage azurite` (an unresolvable Azure host cost 86 s of retries)
        endpoints["queue"] = queues.endpoint_of(ctx.endpoint, account.name)
    return {
        "id": account_id(ctx, account),
        "name": account.name,
        "type": f"{NS}/storageAccounts",
        "location": account.location,
        "tags": dict(account.tags),
        "sku": {"name": account.sku, "tier": account.sku.split("_")[0]},
        "kind": account.kind,
        "properties": {
            "provisioningState": "Succeeded" if done else "Creating",
            "creationTime": iso_z(account.created),
            "primaryLocation": account.location,
            "statusOfPrimary": "available",
            "primaryEndpoints": endpoints if done else {},
            "supportsHttpsTrafficOnly": True,
            "minimumTlsVersion": "TLS1_2",
            "allowBlobPublicAccess": False,
            "accessTier": "Hot",
        },
    }


def _drop_files(ctx: Ctx, account: StorageAccount, share: str) -> None:
    """A share's files go with it: a later account or share of the same name starts empty."""
    if ctx.storages is not None:
        shutil.rmtree(share_folder(ctx.storages, account.name, share), ignore_errors=True)


def delete_account(ctx: Ctx, rg: str, name: str) -> bool:
    account = ctx.state.storage_accounts.pop(key(rg, name), None)
    if account is None:
        return False
    for share in account.shares:
        _drop_files(ctx, account, share)
    return True


def delete_in_group(ctx: Ctx, rg: str) -> None:
    """A group's delete takes its storage accounts (and their shares) with it."""
    for found in [k for k, a in ctx.state.storage_accounts.items() if a.rg.lower() == rg.lower()]:
        account = ctx.state.storage_accounts.pop(found)
        for share in account.shares:
            _drop_files(ctx, account, share)


def list_keys(ctx: Ctx, rg: str, name: str) -> dict[str, Any]:
    account = _provisioned(ctx, rg, name)
    when = iso_z(account.created)
    return {
        "keys": [
            {"keyName": f"key{i}", "value": value, "permissions": "FULL", "creationTime": when}
            for i, value in enumerate(account.keys, start=1)
        ]
    }


def _provisioned(ctx: Ctx, rg: str, name: str) -> StorageAccount:
    account = find(ctx, rg, name)
    if not ready(ctx, account):
        raise ConflictError(
            f"The storage account {name} is not provisioned yet: retry once its create has finished.",
            code="StorageAccountIsNotProvisioned",
        )
    return account


def share_body(ctx: Ctx, account: StorageAccount, share: str) -> dict[str, Any]:
    stored = account.shares[share]
    return {
        "id": f"{account_id(ctx, account)}/fileServices/default/shares/{share}",
        "name": share,
        "type": f"{NS}/storageAccounts/fileServices/shares",
        "properties": {
            "shareQuota": stored["shareQuota"],
            "accessTier": "TransactionOptimized",
            "enabledProtocols": "SMB",
            "lastModifiedTime": stored["lastModifiedTime"],
        },
    }


def put_share(ctx: Ctx, rg: str, name: str, share: str, body: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    account = _provisioned(ctx, rg, name)
    if not SHARE_RE.match(share):
        raise ArmError(
            f"The share name '{share}' is invalid: 3-63 lowercase letters, digits and single hyphens, "
            "starting and ending with a letter or digit.",
            code="InvalidResourceName",
        )
    props = body.get("properties") or {}
    quota = props.get("shareQuota", DEFAULT_QUOTA_GIB)
    if not isinstance(quota, int) or not 1 <= quota <= MAX_QUOTA_GIB:
        raise ArmError(f"shareQuota must be 1 to {MAX_QUOTA_GIB} GiB.", code="InvalidHeaderValue")
    created = share not in account.shares
    if created:
        _drop_files(ctx, account, share)
    account.shares[share] = {"shareQuota": quota, "lastModifiedTime": iso_z()}
    return share_body(ctx, account, share), created


def get_share(ctx: Ctx, rg: str, name: str, share: str) -> dict[str, Any]:
    account = find(ctx, rg, name)
    if share not in account.shares:
        raise NotFoundError("The specified share does not exist.", code="ShareNotFound")
    return share_body(ctx, account, share)

"""`run --env NAME --mount SHARE:/path --create-share`: an Azure Files share for a warm environment,
made on request when the environment has no storage SHARE yet.

What is made stays with the environment and goes when `acagpu env delete` removes its group: one
storage account per environment (Standard_LRS StorageV2, in the environment's own group, named from
the subscription and the environment so a second run finds it again and another subscription's
environment of the same name gets another one: account names are global), a file share SHARE in it,
and the environment storage SHARE on that share (ReadWrite). Each piece is read before it is made,
so a second run, or one resumed after a failure, makes only what is missing. The account key goes
from listKeys to the environment storage's PUT inside the Azure layer and is never seen here.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aca_gpu import naming
from aca_gpu.models import Cloud, ShareMount

ACCOUNT_PREFIX = "acagpu"
HASH_CHARS = 8
MAX_ACCOUNT = 24  # Azure: 3-24 lowercase letters and digits, unique across Azure
SHARE_QUOTA_GIB = 100
# a warm environment's group tags that change with every run; the account keeps the rest
VOLATILE_TAGS = (naming.TAG_LAST_USED, naming.TAG_EXPIRES_AT)


def account_name(subscription: str, env_name: str) -> str:
    """`acagpu` + the environment's letters and digits + 8 hex of a hash of the subscription and
    the environment: deterministic (found again by every run) and valid for Azure (3-24 lowercase
    letters and digits), with the hash keeping it apart from other subscriptions' same-named ones."""
    digest = hashlib.sha256(f"{subscription.lower()}/{env_name.lower()}".encode()).hexdigest()[:HASH_CHARS]
    middle = re.sub(r"[^a-z0-9]", "", env_name.lower())[: MAX_ACCOUNT - len(ACCOUNT_PREFIX) - HASH_CHARS]
    return f"{ACCOUNT_PREFIX}{middle}{digest}"


def account_tags(group_tags: Mapping[str, str]) -> dict[str, str]:
    """The environment's tags (managed, kind=env, its name, owner), less those each run renews."""
    tags = {k: v for k, v in group_tags.items() if k not in VOLATILE_TAGS}
    tags[naming.TAG_MANAGED] = "true"
    return tags


@dataclass
class Made:
    """What `ensure` found and made, for the document (names only: never a key)."""

    account: str
    resource_group: str
    created: list[str] = field(default_factory=list)  # "storage account X", "file share Y", ...

    def as_dict(self) -> dict[str, Any]:
        return {"account": self.account, "resource_group": self.resource_group, "created": list(self.created)}


def ensure(
    cloud: Cloud,
    *,
    env_name: str,
    resource_group: str,
    environment: str,
    location: str,
    group_tags: Mapping[str, str],
    shares: Sequence[str],
    say: Callable[[str], None] = lambda _text: None,
) -> Made:
    """Make what is missing of the account, each share and each environment storage (get first)."""
    name = account_name(cloud.subscription_id, env_name)
    made = Made(name, resource_group)
    account = cloud.get_storage_account(resource_group, name)
    if account is None or (account.provisioning_state or "Succeeded") != "Succeeded":
        say(f"creating storage account {name} in {resource_group} (Standard_LRS)")
        cloud.create_storage_account(resource_group, name, location, account_tags(group_tags))
        made.created.append(f"storage account {name}")
    have = set(cloud.environment_storages(resource_group, environment))
    for share in dict.fromkeys(shares):
        if not cloud.file_share_exists(resource_group, name, share):
            say(f"creating file share {share} ({SHARE_QUOTA_GIB} GiB) in {name}")
            cloud.create_file_share(resource_group, name, share, SHARE_QUOTA_GIB)
            made.created.append(f"file share {share}")
        if share not in have:
            say(f"adding environment storage {share} to {environment}")
            mount = ShareMount(account_group=resource_group, account=name, share=share)
            cloud.set_environment_file_storage(resource_group, environment, share, mount)
            made.created.append(f"environment storage {share}")
    return made

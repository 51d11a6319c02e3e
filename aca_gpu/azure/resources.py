"""Subscription-level calls: resource groups, provider registration, profile types, usages.

SDK models since azure-mgmt 5.x/26.x are dict-like views of the REST JSON, so responses are read
through `as_json` with REST field names: the same code reads SDK results and raw `send_request` JSON.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from aca_gpu.azure.clients import Clients
from aca_gpu.azure.translate import or_none, retrying, translate_errors
from aca_gpu.errors import PreflightRefused, TeardownIncomplete, WaitTimedOut
from aca_gpu.models import ProfileOffer, ResourceGroupInfo, UsageInfo
from aca_gpu.naming import TAG_MANAGED, is_managed

RG_DELETE_TIMEOUT_S = 1800.0


def as_json(obj: Any) -> dict[str, Any]:
    """REST-shaped plain dict from an SDK hybrid model, a Mapping, or None."""
    if obj is None:
        return {}
    as_dict = getattr(obj, "as_dict", None)
    if callable(as_dict):
        value = as_dict()
        if isinstance(value, dict):
            return value
    if isinstance(obj, Mapping):
        return {str(k): v for k, v in obj.items()}
    return {}


def props(doc: Mapping[str, Any]) -> dict[str, Any]:
    value = doc.get("properties")
    return dict(value) if isinstance(value, Mapping) else {}


def rg_info(obj: Any) -> ResourceGroupInfo:
    doc = as_json(obj)
    return ResourceGroupInfo(
        name=str(doc.get("name", "")),
        location=str(doc.get("location", "")),
        tags=dict(doc.get("tags") or {}),
        provisioning_state=props(doc).get("provisioningState"),
    )


def _quote(value: str) -> str:
    return value.replace("'", "''")


def tag_filter(tag_name: str | None, tag_value: str | None) -> str | None:
    if not tag_name:
        return None
    text = f"tagName eq '{_quote(tag_name)}'"
    if tag_value is not None:
        text += f" and tagValue eq '{_quote(tag_value)}'"
    return text


def create_resource_group(
    clients: Clients, name: str, location: str, tags: Mapping[str, str]
) -> ResourceGroupInfo:
    body = {"location": location, "tags": dict(tags)}
    return retrying(
        "create resource group",
        name,
        lambda: rg_info(clients.resources.resource_groups.create_or_update(name, body)),
    )


def get_resource_group(clients: Clients, name: str) -> ResourceGroupInfo | None:
    found = or_none("read resource group", name, lambda: clients.resources.resource_groups.get(name))
    return None if found is None else rg_info(found)


def list_resource_groups(
    clients: Clients, tag_name: str | None = None, tag_value: str | None = None
) -> list[ResourceGroupInfo]:
    odata = tag_filter(tag_name, tag_value)
    groups = retrying(
        "list resource groups",
        f"tag {tag_name}" if tag_name else "",
        lambda: [rg_info(g) for g in clients.resources.resource_groups.list(filter=odata)],
    )
    if tag_name:  # the service applies the filter; re-check so a proxy that ignores it cannot widen it
        groups = [
            g for g in groups if tag_name in g.tags and (tag_value is None or g.tags[tag_name] == tag_value)
        ]
    return groups


def delete_resource_group(
    clients: Clients,
    name: str,
    *,
    wait: bool = True,
    timeout: float = RG_DELETE_TIMEOUT_S,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Delete a group this tool made; refuse any group without `acagpu:managed=true`.

    The tag check lives here as well as in the workflows so no caller can delete a foreign group.
    With wait, deletion is verified by reading the group until ARM answers 404.
    """
    current = get_resource_group(clients, name)
    if current is None:
        return
    if not is_managed(dict(current.tags)):
        raise PreflightRefused(
            f"refusing to delete resource group {name}: it lacks the tag {TAG_MANAGED}=true",
            code="NotManaged",
        )
    deadline = clock() + timeout
    with translate_errors("delete resource group", name):
        if not wait:
            clients.resources.resource_groups.begin_delete(name, polling=False)
            return
        poller = clients.resources.resource_groups.begin_delete(name)
        poller.result(timeout=max(1.0, timeout))
    interval = max(0.05, clients.settings.polling_interval)
    while get_resource_group(clients, name) is not None:
        if clock() >= deadline:
            raise TeardownIncomplete(
                f"resource group {name} still exists {timeout:.0f}s after deletion started",
                code="DeleteNotDone",
            )
        sleep(interval)


def provider_registered(clients: Clients, namespace: str) -> bool:
    doc = retrying("read provider", namespace, lambda: as_json(clients.resources.providers.get(namespace)))
    return str(doc.get("registrationState", "")).lower() == "registered"


def register_provider(
    clients: Clients,
    namespace: str,
    *,
    timeout: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Register and wait until ARM reports Registered (registration takes minutes on a new subscription)."""
    deadline = clock() + timeout
    # registering is idempotent (ARM answers Registering or Registered again): a register whose answer
    # a connection reset took away is sent again, not reported as a failure
    doc = retrying(
        "register provider", namespace, lambda: as_json(clients.resources.providers.register(namespace))
    )
    interval = max(0.05, clients.settings.polling_interval)
    while str(doc.get("registrationState", "")).lower() != "registered":
        if clock() >= deadline:
            state = doc.get("registrationState") or "unknown"
            raise WaitTimedOut(
                f"provider {namespace} still {state} after {timeout:.0f}s", code="ProviderRegistrationTimeout"
            )
        sleep(interval)
        with translate_errors("read provider", namespace):
            doc = as_json(clients.resources.providers.get(namespace))


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def available_profiles(clients: Clients, location: str) -> list[ProfileOffer]:
    items = retrying(
        "list workload profile types in",
        location,
        lambda: [as_json(i) for i in clients.apps.available_workload_profiles.get(location)],
    )
    offers = []
    for doc in items:
        p = props(doc)
        offers.append(
            ProfileOffer(
                name=str(doc.get("name", "")),
                category=p.get("category"),
                cores=_int(p.get("cores")),
                memory_gib=_int(p.get("memoryGiB")),
                gpus=_int(p.get("gpus")),
                display_name=p.get("displayName"),
            )
        )
    return offers


def usages(clients: Clients, location: str) -> list[UsageInfo]:
    items = retrying(
        "list usages in", location, lambda: [as_json(i) for i in clients.apps.usages.list(location)]
    )
    return usage_infos(items)


def usage_infos(items: list[dict[str, Any]]) -> list[UsageInfo]:
    """Usage documents (a region's or an environment's: the same shape) as UsageInfo."""
    result = []
    for doc in items:
        name = doc.get("name")
        label = name.get("value") if isinstance(name, Mapping) else name
        display = name.get("localizedValue") if isinstance(name, Mapping) else None
        current = doc.get("currentValue", doc.get("usage", 0))
        result.append(
            UsageInfo(
                name=str(label or ""),
                current=float(current or 0),
                limit=float(doc.get("limit") or 0),
                unit=doc.get("unit"),
                display_name=str(display) if display else None,
            )
        )
    return result

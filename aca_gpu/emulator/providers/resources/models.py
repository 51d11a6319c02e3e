"""Resource groups and provider registration: the rules, on the shared state."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from aca_gpu.emulator.catalog import REGIONS, normalize_location
from aca_gpu.emulator.context import Ctx
from aca_gpu.emulator.providers.resources.exceptions import (
    MSG_RESOURCE_FILTER,
    InvalidFilter,
    LocationRequired,
    MissingSubscriptionRegistration,
    ResourceGroupBeingDeleted,
    ResourceGroupNotFound,
)
from aca_gpu.emulator.state import Provider, ResourceGroup

_FILTER_RE = re.compile(
    r"^\s*tagName\s+eq\s+'(?P<name>[^']*)'(\s+and\s+tagValue\s+eq\s+'(?P<value>[^']*)')?\s*$", re.IGNORECASE
)


def provider(ctx: Ctx, namespace: str) -> Provider:
    prov = ctx.state.provider(namespace)
    if (
        prov.state == "Registering"
        and prov.registered_at is not None
        and ctx.clock.now() >= prov.registered_at
    ):
        prov.state = "Registered"
    return prov


# Microsoft.Storage counts as registered: nearly every subscription has it (any storage account,
# Cloud Shell or diagnostics setting registered it), and azure-mgmt-core registers it where not;
# Microsoft.ContainerRegistry likewise (UNCONFIRMED that a fresh subscription has it).
# Microsoft.OperationalInsights likewise (UNCONFIRMED; the Azure CLI's `containerapp env create`
# makes a workspace by default, and azure-mgmt-core registers the namespace where it is missing).
ALWAYS_REGISTERED = frozenset(
    {
        "microsoft.authorization",
        "microsoft.resources",
        "microsoft.resourcegraph",
        "microsoft.storage",
        "microsoft.operationalinsights",
        "microsoft.containerregistry",
    }
)


def require_registered(ctx: Ctx, namespace: str) -> None:
    if namespace.lower() in ALWAYS_REGISTERED:
        return
    if provider(ctx, namespace).state != "Registered":
        raise MissingSubscriptionRegistration(namespace)


def register(ctx: Ctx, namespace: str) -> Provider:
    prov = provider(ctx, namespace)
    if prov.state == "NotRegistered":
        prov.state = "Registering"
        prov.registered_at = ctx.clock.after("provider_register")
    return prov


def get_rg(ctx: Ctx, name: str) -> ResourceGroup:
    rg = ctx.state.rgs.get(name.lower())
    if rg is None:
        raise ResourceGroupNotFound(name)
    return rg


def live_rg(ctx: Ctx, name: str) -> ResourceGroup:
    """A resource group that new resources may be created in."""
    rg = get_rg(ctx, name)
    if rg.deleting:
        raise ResourceGroupBeingDeleted(rg.name)
    return rg


def create_or_update_rg(ctx: Ctx, name: str, body: dict[str, Any]) -> tuple[ResourceGroup, bool]:
    location = body.get("location")
    if not location:
        raise LocationRequired()
    tags = {str(k): str(v) for k, v in (body.get("tags") or {}).items()}
    existing = ctx.state.rgs.get(name.lower())
    if existing is not None:
        if existing.deleting:
            raise ResourceGroupBeingDeleted(existing.name)
        existing.tags = tags
        return existing, False
    rg = ResourceGroup(name=name, location=normalize_location(str(location)), tags=tags)
    ctx.state.rgs[name.lower()] = rg
    return rg, True


def seed_groups(ctx: Ctx, groups: list[tuple[str, str, dict[str, str]]]) -> None:
    """Many groups at once (benchmark and test set-up), through the same rules as a PUT."""
    for name, location, tags in groups:
        create_or_update_rg(ctx, name, {"location": location, "tags": tags})


def update_tags(ctx: Ctx, name: str, body: dict[str, Any]) -> ResourceGroup:
    rg = live_rg(ctx, name)
    if body.get("tags") is not None:
        rg.tags = {str(k): str(v) for k, v in body["tags"].items()}
    return rg


def begin_delete_rg(ctx: Ctx, name: str) -> ResourceGroup:
    """Everything inside goes: environments take their own (minutes-long) delete, then the group."""
    rg = get_rg(ctx, name)
    if rg.deleting:
        return rg
    rg.deleting = True
    from aca_gpu.emulator.providers.app import models as app_models  # the app provider builds on this one
    from aca_gpu.emulator.providers.registry import models as registry_models  # and this one
    from aca_gpu.emulator.providers.storage import models as storage_models  # so does this one

    storage_models.delete_in_group(ctx, name)  # storage accounts go at once, as ARM deletes them
    registry_models.delete_in_group(ctx, name)  # so do registries

    for env in [e for e in ctx.state.envs.values() if e.rg.lower() == name.lower()]:
        app_models.begin_delete_env(ctx, env)
    for app in [a for a in ctx.state.apps.values() if a.rg.lower() == name.lower()]:
        ctx.runtime.stop_app_replicas(app)
    return rg


def list_rgs(ctx: Ctx, filter_text: str | None) -> list[ResourceGroup]:
    groups = list(ctx.state.rgs.values())
    if not filter_text:
        return groups
    m = _FILTER_RE.match(filter_text)
    if not m:
        raise InvalidFilter(filter_text)
    tag, value = m.group("name"), m.group("value")
    return [
        g
        for g in groups
        if any(k.lower() == tag.lower() and (value is None or v == value) for k, v in g.tags.items())
    ]


_CLAUSE_RE = re.compile(r"^\s*(?P<field>\w+)\s+eq\s+'(?P<value>[^']*)'\s*$", re.IGNORECASE)
_RESOURCE_FIELDS = ("resourcegroup", "resourcetype", "tagname", "tagvalue", "name", "location")
Keep = Callable[[str, dict[str, Any]], bool]


def resource_filter(filter_text: str | None) -> Keep:
    """`Resources - List` `$filter`: `field eq 'value'` clauses joined by `and`, over resourceGroup,
    resourceType, name, location and tagName [+ tagValue] (what `az resource list` sends)."""
    if not filter_text:
        return lambda group, body: True
    wanted: dict[str, str] = {}
    for clause in re.split(r"\s+and\s+", filter_text.strip(), flags=re.IGNORECASE):
        m = _CLAUSE_RE.match(clause)
        if not m or m.group("field").lower() not in _RESOURCE_FIELDS:
            raise InvalidFilter(filter_text, supported=MSG_RESOURCE_FILTER)
        wanted[m.group("field").lower()] = m.group("value")
    if "tagvalue" in wanted and "tagname" not in wanted:
        raise InvalidFilter(filter_text, supported=MSG_RESOURCE_FILTER)

    def keep(group: str, body: dict[str, Any]) -> bool:
        checks = {
            "resourcegroup": group,
            "resourcetype": body["type"],
            "name": body["name"],
            "location": normalize_location(str(body["location"])),
        }
        for field, value in wanted.items():
            if (
                field in checks
                and checks[field].lower()
                != (normalize_location(value) if field == "location" else value).lower()
            ):
                return False
        if "tagname" in wanted:
            tags = {k.lower(): v for k, v in (body.get("tags") or {}).items()}
            tag = wanted["tagname"].lower()
            if tag not in tags or ("tagvalue" in wanted and tags[tag] != wanted["tagvalue"]):
                return False
        return True

    return keep


def known_location(location: str) -> bool:
    return normalize_location(location) in REGIONS

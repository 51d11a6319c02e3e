"""Microsoft.Resources handlers: parse the request, call the models, shape ARM's responses."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from aca_gpu.emulator import versions
from aca_gpu.emulator.arm import (
    APP_DEFAULT_VERSION,
    empty_response,
    json_response,
    new_op_id,
    read_json,
    utc_now,
)
from aca_gpu.emulator.catalog import REGIONS
from aca_gpu.emulator.context import Ctx, Params
from aca_gpu.emulator.providers.resources import models
from aca_gpu.emulator.state import Operation, ResourceGroup

RG_DELETE_RETRY_AFTER_S = 15.0


def rg_body(ctx: Ctx, rg: ResourceGroup) -> dict[str, Any]:
    return {
        "id": f"/subscriptions/{ctx.subscription}/resourceGroups/{rg.name}",
        "name": rg.name,
        "type": "Microsoft.Resources/resourceGroups",
        "location": rg.location,
        "tags": rg.tags,
        "properties": {"provisioningState": "Deleting" if rg.deleting else "Succeeded"},
    }


async def resource_groups_create_or_update(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    rg, created = models.create_or_update_rg(ctx, p["rg"], read_json(await req.read()))
    return json_response(rg_body(ctx, rg), status=201 if created else 200)


async def resource_groups_get(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    return json_response(rg_body(ctx, models.get_rg(ctx, p["rg"])))


async def resource_groups_check_existence(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    return empty_response(204 if p["rg"].lower() in ctx.state.rgs else 404)


async def resource_groups_update(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    return json_response(rg_body(ctx, models.update_tags(ctx, p["rg"], read_json(await req.read()))))


async def resource_groups_delete(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    rg = models.begin_delete_rg(ctx, p["rg"])
    name = rg.name.lower()
    op_id = new_op_id()
    ctx.state.operations[op_id] = Operation(
        id=op_id,
        kind="resourcegroups",
        location=rg.location,
        started=utc_now(),
        check=lambda: "InProgress" if name in ctx.state.rgs else "Succeeded",
        final_status=200,
    )
    version = req.query.get("api-version", "2025-04-01")
    location = (
        f"{ctx.endpoint}/subscriptions/{ctx.subscription}/operationresults/{op_id}?api-version={version}"
    )
    return empty_response(202, {"Location": location, **retry_after(ctx)})


def retry_after(ctx: Ctx) -> dict[str, str]:
    """ARM asks for 15 s between polls of a group delete. `Retry-After` stays whole seconds (the SDK
    reads it as an int); `retry-after-ms`, which azure-core prefers, carries the scaled-clock wait."""
    scaled = ctx.clock.scaled(RG_DELETE_RETRY_AFTER_S)
    return {"Retry-After": str(max(1, round(scaled))), "retry-after-ms": str(max(1, round(scaled * 1000)))}


async def resource_groups_operation_result(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    op = ctx.state.operations.get(p["op"])
    if op is None:
        return empty_response(404)
    if op.check() == "InProgress":
        return empty_response(202, {"Location": str(req.url), **retry_after(ctx)})
    return empty_response(op.final_status)


async def resource_groups_list(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    groups = models.list_rgs(ctx, req.query.get("$filter"))
    top = req.query.get("$top")
    if top and top.isdigit():
        groups = groups[: int(top)]
    return json_response({"value": [rg_body(ctx, g) for g in groups]})


def _generic(ctx: Ctx, kind: str, rg: str, name: str, location: str, tags: dict[str, str]) -> dict[str, Any]:
    return {
        "id": f"/subscriptions/{ctx.subscription}/resourceGroups/{rg}/providers/{kind}/{name}",
        "name": name,
        "type": kind,
        "location": location,
        "tags": tags,
    }


def generic_resources(ctx: Ctx) -> list[tuple[str, dict[str, Any]]]:
    """(resource group, generic resource body) for every live resource, as `Resources - List` shows it."""
    out: list[tuple[str, dict[str, Any]]] = []
    for kind, items in (
        ("Microsoft.App/managedEnvironments", list(ctx.state.envs.values())),
        ("Microsoft.App/containerApps", [a for a in ctx.state.apps.values() if not a.deleting]),
        ("Microsoft.App/jobs", [j for j in ctx.state.jobs.values() if not j.deleting]),
    ):
        for x in items:
            out.append((x.rg, _generic(ctx, kind, x.rg, x.name, x.location, x.tags)))
    return out


async def resources_list_by_resource_group(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    rg = models.get_rg(ctx, p["rg"])
    keep = models.resource_filter(req.query.get("$filter"))
    value = [
        body
        for group, body in generic_resources(ctx)
        if group.lower() == rg.name.lower() and keep(group, body)
    ]
    return json_response({"value": value})


async def resources_list(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    keep = models.resource_filter(req.query.get("$filter"))
    value = [body for group, body in generic_resources(ctx) if keep(group, body)]
    top = req.query.get("$top")
    if top and top.isdigit():
        value = value[: int(top)]
    return json_response({"value": value})


def subscription_body(ctx: Ctx) -> dict[str, Any]:
    return {
        "id": f"/subscriptions/{ctx.subscription}",
        "authorizationSource": "RoleBased",
        "managedByTenants": [],
        "subscriptionId": ctx.subscription,
        "tenantId": ctx.tenant,
        "displayName": "acagpu emulator",
        "state": "Enabled",
        "subscriptionPolicies": {
            "locationPlacementId": "Public_2014-09-01",
            "quotaId": "PayAsYouGo_2014-09-01",
            "spendingLimit": "Off",
        },
    }


async def subscriptions_list(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    subs = [subscription_body(c) for c in (ctx.fleet or {ctx.subscription: ctx}).values()]
    return json_response({"value": subs, "count": {"type": "Total", "value": len(subs)}})


async def subscriptions_get(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    return json_response(subscription_body(ctx))


async def tenants_list(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    tenant = {
        "id": f"/tenants/{ctx.tenant}",
        "tenantId": ctx.tenant,
        "tenantCategory": "Home",
        "countryCode": "US",
        "displayName": "acagpu emulator",
        "domains": ["acagpu.emulator.local"],
        "defaultDomain": "acagpu.emulator.local",
        "tenantType": "AAD",
    }
    return json_response({"value": [tenant]})


_MOVABLE = "CrossResourceGroupResourceMove, CrossSubscriptionResourceMove"
_CAPABILITIES = {  # as recorded
    t: f"{_MOVABLE}, SystemAssignedResourceIdentity, SupportsTags, SupportsLocation"
    for t in ("managedEnvironments", "containerApps", "jobs")
}


def provider_body(ctx: Ctx, namespace: str) -> dict[str, Any]:
    prov = models.provider(ctx, namespace)
    types = [
        "managedEnvironments",
        "containerApps",
        "jobs",
        "locations",
        "locations/managedEnvironmentOperationStatuses",
        "locations/managedEnvironmentOperationResults",
        "locations/containerappOperationStatuses",
        "locations/containerappOperationResults",
        "locations/containerappsjobOperationStatuses",
        "locations/containerappsjobOperationResults",
        "locations/availableManagedEnvironmentsWorkloadProfileTypes",
        "locations/usages",
    ]
    resource_types = (
        [
            {
                "resourceType": t,
                "locations": sorted(REGIONS.values()),
                "apiVersions": list(reversed(versions.app_versions(t))),  # newest first, as recorded
                "defaultApiVersion": APP_DEFAULT_VERSION,
                "capabilities": _CAPABILITIES.get(t, "None"),
            }
            for t in types
        ]
        if prov.namespace.lower() == "microsoft.app"
        else []
    )
    return {
        "id": f"/subscriptions/{ctx.subscription}/providers/{prov.namespace}",
        "namespace": prov.namespace,
        "registrationState": prov.state,
        "registrationPolicy": "RegistrationRequired",
        "resourceTypes": resource_types,
    }


async def providers_get(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    return json_response(provider_body(ctx, _canonical(p["namespace"])))


async def providers_register(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    models.register(ctx, _canonical(p["namespace"]))
    return json_response(provider_body(ctx, _canonical(p["namespace"])))


async def providers_list(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    return json_response({"value": [provider_body(ctx, "Microsoft.App")]})


def _canonical(namespace: str) -> str:
    return "Microsoft.App" if namespace.lower() == "microsoft.app" else namespace

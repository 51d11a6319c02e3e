"""Microsoft.Resources handlers: parse the request, call the models, shape ARM's responses."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from aca_gpu.emulator import versions
from aca_gpu.emulator.arm import empty_response, json_response, new_op_id, read_json, utc_now
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


async def resources_list_by_resource_group(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    rg = models.get_rg(ctx, p["rg"])
    base = f"/subscriptions/{ctx.subscription}/resourceGroups/{rg.name}/providers/Microsoft.App"
    value: list[dict[str, Any]] = []
    for env in ctx.state.envs.values():
        if env.rg.lower() == rg.name.lower():
            value.append(
                {
                    "id": f"{base}/managedEnvironments/{env.name}",
                    "name": env.name,
                    "type": "Microsoft.App/managedEnvironments",
                    "location": env.location,
                    "tags": env.tags,
                }
            )
    for app in ctx.state.apps.values():
        if app.rg.lower() == rg.name.lower():
            value.append(
                {
                    "id": f"{base}/containerApps/{app.name}",
                    "name": app.name,
                    "type": "Microsoft.App/containerApps",
                    "location": app.location,
                    "tags": app.tags,
                }
            )
    for job in ctx.state.jobs.values():
        if job.rg.lower() == rg.name.lower():
            value.append(
                {
                    "id": f"{base}/jobs/{job.name}",
                    "name": job.name,
                    "type": "Microsoft.App/jobs",
                    "location": job.location,
                    "tags": job.tags,
                }
            )
    return json_response({"value": value})


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
                "apiVersions": list(reversed(versions.APP_VERSIONS)),
                "capabilities": "None",
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

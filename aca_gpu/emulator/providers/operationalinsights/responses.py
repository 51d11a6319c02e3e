"""Microsoft.OperationalInsights handlers: parse, apply models.py, shape the answer.

A workspace's create answers 200 with `provisioningState: Succeeded` at once (Azure's takes seconds;
its exact LRO shape is UNCONFIRMED here); `sharedKeys` is a POST, as `az monitor log-analytics
workspace get-shared-keys` sends it; a delete answers 200 (`force=true` skips the soft delete).
"""

from __future__ import annotations

from aiohttp import web

from aca_gpu.emulator.arm import empty_response, json_response, read_json
from aca_gpu.emulator.context import Ctx, Params
from aca_gpu.emulator.providers.operationalinsights import models


async def workspaces_create(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    ws, created = models.put(ctx, p["rg"], p["workspace"], read_json(await req.read()))
    return json_response(models.body(ctx, ws), status=201 if created else 200)


async def workspaces_get(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    return json_response(models.body(ctx, models.find(ctx, p["rg"], p["workspace"])))


async def workspaces_delete(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    return empty_response(200 if models.delete(ctx, p["rg"], p["workspace"]) else 204)


async def shared_keys(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    ws = models.find(ctx, p["rg"], p["workspace"])
    return json_response({"primarySharedKey": ws.shared_key, "secondarySharedKey": ws.shared_key[::-1]})

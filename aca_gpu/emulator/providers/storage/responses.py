"""Microsoft.Storage handlers: parse, apply the rules in models.py, shape the answer.

An account's create answers 202 with a `Location` at the location's asyncoperations (polled with
`Retry-After`, 202 until done, then 200 with the account), as the Storage provider does.
"""

from __future__ import annotations

from aiohttp import web

from aca_gpu.emulator.arm import empty_response, json_response, new_op_id, read_json
from aca_gpu.emulator.context import Ctx, Params
from aca_gpu.emulator.providers.storage import models
from aca_gpu.emulator.state import Operation, key

RETRY_AFTER_S = 17  # what the Storage provider asks between polls of a create


def _retry_after(ctx: Ctx) -> dict[str, str]:
    scaled = ctx.clock.scaled(RETRY_AFTER_S)
    return {"Retry-After": str(max(1, round(scaled))), "retry-after-ms": str(max(1, round(scaled * 1000)))}


async def accounts_create(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    account, started = models.put_account(ctx, p["rg"], p["account"], read_json(await req.read()))
    if not started and models.ready(ctx, account):
        return json_response(models.account_body(ctx, account))
    op_id = new_op_id()
    ctx.state.operations[op_id] = Operation(
        id=op_id,
        kind="storageaccounts",
        location=account.location,
        started=account.created,
        check=lambda: "Succeeded" if models.ready(ctx, account) else "InProgress",
        final_status=200,
        result=lambda: ctx.state.storage_accounts.get(key(account.rg, account.name)),
    )
    version = req.query.get("api-version", "")
    location = (
        f"{ctx.endpoint}/subscriptions/{ctx.subscription}/providers/Microsoft.Storage/locations/"
        f"{account.location}/asyncoperations/{op_id}?monitor=true&api-version={version}"
    )
    return empty_response(202, {"Location": location, **_retry_after(ctx)})


async def async_operation(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    op = ctx.state.operations.get(p["op"])
    if op is None or op.kind != "storageaccounts":
        return empty_response(404)
    if op.check() == "InProgress":
        return empty_response(202, {"Location": str(req.url), **_retry_after(ctx)})
    account = op.result() if op.result is not None else None
    if account is None:  # deleted (or its group) while it was being made
        return empty_response(404)
    return json_response(models.account_body(ctx, account))


async def accounts_get(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    return json_response(models.account_body(ctx, models.find(ctx, p["rg"], p["account"])))


async def accounts_delete(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    return empty_response(200 if models.delete_account(ctx, p["rg"], p["account"]) else 204)


async def accounts_list_keys(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    return json_response(models.list_keys(ctx, p["rg"], p["account"]))


async def shares_create(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    body, created = models.put_share(ctx, p["rg"], p["account"], p["share"], read_json(await req.read()))
    return json_response(body, status=201 if created else 200)


async def shares_get(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    return json_response(models.get_share(ctx, p["rg"], p["account"], p["share"]))

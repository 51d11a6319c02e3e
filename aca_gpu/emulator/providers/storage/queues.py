"""A storage account's queues as ARM resources (`.../queueServices/default/queues/{queue}`), and the
role assignments made at one queue's scope.

ARM's Queue_Get and Queue_Delete reach the same queues the data plane serves: Azurite's (the
emulator's `--storage azurite`), answered in ARM's shape (`properties.metadata`,
`approximateMessageCount`). That is what the guard's script uses, which holds an ARM token and no
storage key. Role assignments at a queue's scope are kept with the others (authorization/models.py)
under that scope; the data-plane proxy (dataplane/queue_rbac.py) honours them. Whether ARM refuses
an assignment at the scope of a queue that does not exist is not known: the emulator checks the
account only (UNCONFIRMED, docs/emulator.md).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from aca_gpu.emulator.arm import ArmError, empty_response, json_response, read_json
from aca_gpu.emulator.context import ADMIN, CALLER, Ctx, Params
from aca_gpu.emulator.providers.authorization import models as authz
from aca_gpu.emulator.providers.storage import models

QUEUE_TYPE = "Microsoft.Storage/storageAccounts/queueServices/queues"


def queue_id(ctx: Ctx, rg: str, account: str, queue: str) -> str:
    found = models.find(ctx, rg, account)
    return f"{models.account_id(ctx, found)}/queueServices/default/queues/{queue}"


def _served(ctx: Ctx) -> Any:
    if ctx.queues is None:
        raise ArmError(
            "this emulator serves Storage queues only when started with `acagpu emulator serve --storage "
            "azurite`",
            code="NotImplemented",
            status=501,
        )
    return ctx.queues


def _not_found(queue: str) -> ArmError:
    return ArmError("The specified queue does not exist.", code="QueueNotFound", status=404)


async def queue_get(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    ident = queue_id(ctx, p["rg"], p["account"], p["queue"])
    found = await _served(ctx).queue_metadata(p["queue"])
    if found is None:
        raise _not_found(p["queue"])
    metadata, count = found
    return json_response(
        {
            "id": ident,
            "name": p["queue"],
            "type": QUEUE_TYPE,
            "properties": {"metadata": metadata, "approximateMessageCount": count},
        }
    )


async def queue_delete(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    queue_id(ctx, p["rg"], p["account"], p["queue"])  # the account must exist
    gone = await _served(ctx).delete_queue(p["queue"])
    return empty_response(200 if gone else 204)


async def assignment_create(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    scope = queue_id(ctx, p["rg"], p["account"], p["queue"])
    existed = p["id"].lower() in ctx.state.role_assignments
    body = read_json(await req.read())
    doc = authz.put_assignment(ctx, p["id"], body, req.get(CALLER) or "", req.get(ADMIN) or "", scope=scope)
    return json_response(doc, status=200 if existed else 201)


def _here(ctx: Ctx, p: Params) -> dict[str, Any]:
    doc = ctx.state.role_assignments.get(p["id"].lower())
    scope = queue_id(ctx, p["rg"], p["account"], p["queue"]).lower()
    if doc is None or str(doc["properties"].get("scope") or "").lower() != scope:
        raise ArmError("The role assignment was not found.", code="RoleAssignmentNotFound", status=404)
    return doc


async def assignment_get(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    return json_response(_here(ctx, p))


async def assignment_delete(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    try:
        doc = _here(ctx, p)
    except ArmError:
        return empty_response(204)
    ctx.state.role_assignments.pop(doc["name"], None)
    ctx.state.role_assignments_effective.pop(doc["name"], None)
    return json_response(doc)


async def assignments_list(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    """`$filter=atScope()`: those at the queue's scope and above it (its account, group, subscription)."""
    scope = queue_id(ctx, p["rg"], p["account"], p["queue"]).lower()
    found = []
    for doc in authz.assignments(ctx):
        at = str(doc["properties"].get("scope") or "").rstrip("/").lower()
        if scope == at or scope.startswith(at + "/"):
            found.append(doc)
    return json_response({"value": found})

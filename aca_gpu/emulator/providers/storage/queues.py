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

from aca_gpu.emulator.arm import ArmError, empty_response, json_response
from aca_gpu.emulator.context import Ctx, Params
from aca_gpu.emulator.providers.authorization import scoped
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


def _scope(ctx: Ctx, p: Params) -> str:
    """The queue's id from the path alone (its assignments outlive it, and its account)."""
    return (
        f"/subscriptions/{ctx.subscription}/resourceGroups/{p['rg']}/providers/Microsoft.Storage/"
        f"storageAccounts/{p['account']}/queueServices/default/queues/{p['queue']}"
    )


# the account must exist for a create (the queue need not: UNCONFIRMED, the module doc)
assignment_create, assignment_get, assignment_delete, assignments_list = scoped.handlers(
    _scope, lambda ctx, p: models.find(ctx, p["rg"], p["account"])
)

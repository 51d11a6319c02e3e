"""Which data action a queue request needs, and whether the caller's role assignments grant it.

A job's worker calls the queue data plane with its managed identity's token; on Azure, Storage
then checks the identity's data roles at the queue's scope or above it. The emulator does the
same for message operations, with the propagation delay of any new assignment
(authorization/models.PROPAGATION_S, emulated seconds):

    Put Message               .../queues/messages/add/action
    Get Messages              .../queues/messages/process/action   (peekonly=true: .../read)
    Delete Message            .../queues/messages/process/action
    Update Message            .../queues/messages/write
    Clear Messages            .../queues/messages/delete

The operation-to-action table follows the queue SAS permissions (add, process = get and delete,
update, read = peek) and is UNCONFIRMED against Microsoft's table of data actions per operation;
the roles acagpu grants (Contributor on the items queue, Message Sender on the two others) hold
every action either reading would need. Operations on the queue itself (create, delete, metadata)
with a token are not checked: acagpu makes them with the account key, the workers never do.
"""

from __future__ import annotations

from collections.abc import Mapping

from aca_gpu.emulator.context import Ctx
from aca_gpu.emulator.providers.authorization import models as authz
from aca_gpu.emulator.providers.storage import models as storage
from aca_gpu.emulator.state import StorageAccount

MESSAGES = authz.QUEUE_MESSAGES


def data_action(method: str, rest: str, query: Mapping[str, str]) -> str | None:
    """The data action of a request on `{queue}/messages[/{id}]`; None for a queue-level operation."""
    parts = [p for p in rest.split("/") if p]
    if len(parts) < 2 or parts[1] != "messages":
        return None
    single = len(parts) >= 3
    if method == "POST":
        return f"{MESSAGES}/add/action"
    if method == "GET":
        peek = str(query.get("peekonly", "")).lower() == "true"
        return f"{MESSAGES}/read" if peek else f"{MESSAGES}/process/action"
    if method == "DELETE":
        return f"{MESSAGES}/process/action" if single else f"{MESSAGES}/delete"
    if method == "PUT":
        return f"{MESSAGES}/write"
    return None


def allows(
    fleet: Ctx,
    admin: str,
    principal: str,
    account: StorageAccount,
    method: str,
    rest: str,
    query: Mapping[str, str],
) -> bool:
    """Whether `principal` may make this message call (the emulator's own identity always may)."""
    action = data_action(method, rest, query)
    if action is None or principal == admin:
        return True
    for ctx in (fleet.fleet or {fleet.subscription: fleet}).values():
        if any(a is account for a in ctx.state.storage_accounts.values()):
            queue = rest.split("/", 1)[0]
            scope = f"{storage.account_id(ctx, account)}/queueServices/default/queues/{queue}"
            return authz.data_allowed(ctx, principal, scope, action, now=ctx.clock.now())
    return False

"""Role assignments at a resource's own scope (`{resource id}/providers/Microsoft.Authorization/
roleAssignments/{id}`): RoleAssignments_Create, _Get, _Delete and _ListForScope for one kind of
resource, given how its scope is read from the path.

A create needs the resource (ARM answers 404 for a scope that does not exist: the emulator's
`find` raises it); a read, delete or listing does not, because Azure keeps an assignment after its
resource is gone and whoever made it deletes it afterwards (a queue run's job and queues go first,
billing first, their assignments after them).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from aca_gpu.emulator.arm import ArmError, empty_response, json_response, read_json
from aca_gpu.emulator.context import ADMIN, CALLER, Ctx, Params
from aca_gpu.emulator.providers.authorization import models as authz

Handler = Callable[[Ctx, web.Request, Params], Awaitable[web.StreamResponse]]


def handlers(
    scope_of: Callable[[Ctx, Params], str], find: Callable[[Ctx, Params], Any]
) -> tuple[Handler, Handler, Handler, Handler]:
    """(create, get, delete, list) at the scope `scope_of` names; `find` raises ARM's 404 for a
    resource that does not exist."""

    def here(ctx: Ctx, p: Params) -> dict[str, Any]:
        doc = ctx.state.role_assignments.get(p["id"].lower())
        if doc is None or str(doc["properties"].get("scope") or "").lower() != scope_of(ctx, p).lower():
            raise ArmError("The role assignment was not found.", code="RoleAssignmentNotFound", status=404)
        return doc

    async def create(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
        find(ctx, p)
        existed = p["id"].lower() in ctx.state.role_assignments
        body = read_json(await req.read())
        doc = authz.put_assignment(
            ctx, p["id"], body, req.get(CALLER) or "", req.get(ADMIN) or "", scope=scope_of(ctx, p)
        )
        return json_response(doc, status=200 if existed else 201)

    async def get(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
        return json_response(here(ctx, p))

    async def delete(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
        try:
            doc = here(ctx, p)
        except ArmError:
            return empty_response(204)
        ctx.state.role_assignments.pop(doc["name"], None)
        ctx.state.role_assignments_effective.pop(doc["name"], None)
        return json_response(doc)

    async def listing(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
        """`$filter=atScope()`: those at the scope and above it (its group, its subscription)."""
        scope = scope_of(ctx, p)
        found = [
            doc
            for doc in authz.assignments(ctx)
            if authz.within(scope, str(doc["properties"].get("scope") or authz.sub_scope(ctx)))
        ]
        return json_response({"value": found})

    return create, get, delete, listing

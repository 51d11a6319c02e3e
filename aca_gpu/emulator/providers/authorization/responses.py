"""Microsoft.Authorization handlers: parse, apply the rules in models.py, shape the answer.

`$filter` supports what the Azure CLI and acagpu send: `roleName eq '…'`, `type eq 'CustomRole'`,
`principalId eq '…'` and `atScope()`.
"""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web

from aca_gpu.emulator.arm import ArmError, empty_response, json_response, read_json
from aca_gpu.emulator.context import ADMIN, CALLER, Ctx, Params
from aca_gpu.emulator.providers.authorization import models

_CLAUSE = re.compile(r"^\s*(?P<field>\w+)\s+eq\s+'(?P<value>[^']*)'\s*$", re.IGNORECASE)


def _filters(req: web.Request, fields: tuple[str, ...]) -> dict[str, str]:
    text = req.query.get("$filter", "").strip()
    wanted: dict[str, str] = {}
    if not text:
        return wanted
    for clause in re.split(r"\s+and\s+", text, flags=re.IGNORECASE):
        if clause.strip().lower() in ("atscope()", "assignedto('')"):
            continue
        m = _CLAUSE.match(clause)
        if not m or m.group("field").lower() not in fields:
            raise ArmError(f"The filter '{text}' is not supported.", code="UnsupportedQuery")
        wanted[m.group("field").lower()] = m.group("value")
    return wanted


def _caller(req: web.Request) -> str:
    return req.get(CALLER) or ""


def _admin(req: web.Request) -> str:
    return req.get(ADMIN) or ""


async def role_definitions_list(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    wanted = _filters(req, ("rolename", "type"))
    found = [
        d
        for d in models.definitions(ctx)
        if ("rolename" not in wanted or d["properties"]["roleName"].lower() == wanted["rolename"].lower())
        and ("type" not in wanted or d["properties"]["type"].lower() == wanted["type"].lower())
    ]
    return json_response({"value": found})


async def role_definitions_get(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    return json_response(models.get_definition(ctx, p["id"]))


async def role_definitions_create_or_update(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    doc, created = models.put_definition(ctx, p["id"], read_json(await req.read()), _caller(req))
    return json_response(doc, status=201 if created else 200)


async def role_definitions_delete(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    gone = models.delete_definition(ctx, p["id"])
    return json_response(gone) if gone else empty_response(204)


async def role_assignments_list(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    wanted = _filters(req, ("principalid",))
    found = [
        a
        for a in models.assignments(ctx)
        if "principalid" not in wanted or a["properties"]["principalId"] == wanted["principalid"]
    ]
    return json_response({"value": found})


async def role_assignments_get(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    found = ctx.state.role_assignments.get(p["id"].lower())
    if found is None:
        raise ArmError(
            f"The role assignment '{p['id']}' is not found.", code="RoleAssignmentNotFound", status=404
        )
    return json_response(found)


async def role_assignments_create(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    existed = p["id"].lower() in ctx.state.role_assignments
    doc = models.put_assignment(ctx, p["id"], read_json(await req.read()), _caller(req), _admin(req))
    return json_response(doc, status=200 if existed else 201)


async def role_assignments_delete(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    gone = ctx.state.role_assignments.pop(p["id"].lower(), None)
    return json_response(gone) if gone else empty_response(204)


async def permissions_list(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    if any(
        f.param("permissions", "") == "hidden"
        and f.param("subscription", ctx.subscription).lower() == ctx.subscription
        for f in ctx.faults.all("deny")
    ):
        raise ArmError(
            f"No HTTP resource was found that matches the request URI '{req.url}'.",
            code="InvalidResourceType",
            status=404,
        )
    value: list[dict[str, Any]] = models.permissions_of(ctx, _caller(req), _admin(req))
    return json_response({"value": value})

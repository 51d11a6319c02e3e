"""Resource Graph's `resources` query over every emulated subscription the caller may read.

Tables: `resourcecontainers` (subscriptions and resource groups) and `resources` (environments,
apps, jobs), with Resource Graph's lowercased `type`. Scope: the request's `subscriptions`, its
`managementGroups` (the emulator has one, the tenant root group, named by the tenant id), or, with
neither, every subscription the caller can read (tenant scope, what `--all-subscriptions` uses).
Pages: at most `$top` rows (1..1000, default 1000) and a `$skipToken` while rows remain.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from typing import Any

from aiohttp import web

from aca_gpu.emulator.arm import ArmError, json_response, read_json, utc_now
from aca_gpu.emulator.context import ADMIN, CALLER, Ctx, Params
from aca_gpu.emulator.providers.authorization import models as authz
from aca_gpu.emulator.providers.graph.kql import KqlError, Row, compile_query
from aca_gpu.emulator.providers.resources.responses import generic_resources

MAX_PAGE = 1000
READ = "Microsoft.Resources/subscriptions/resourceGroups/read"


def _containers(ctx: Ctx) -> list[Row]:
    sub = ctx.subscription
    rows: list[Row] = [
        {
            "id": f"/subscriptions/{sub}",
            "name": "acagpu emulator",
            "type": "microsoft.resources/subscriptions",
            "tenantId": ctx.tenant,
            "subscriptionId": sub,
            "resourceGroup": "",
            "location": "",
            "tags": {},
            "properties": {"state": "Enabled"},
        }
    ]
    for rg in ctx.state.rgs.values():
        rows.append(
            {
                "id": f"/subscriptions/{sub}/resourceGroups/{rg.name}",
                "name": rg.name,
                "type": "microsoft.resources/subscriptions/resourcegroups",
                "tenantId": ctx.tenant,
                "subscriptionId": sub,
                "resourceGroup": rg.name.lower(),
                "location": rg.location,
                "tags": dict(rg.tags),
                "properties": {"provisioningState": "Deleting" if rg.deleting else "Succeeded"},
            }
        )
    return rows


def _resources(ctx: Ctx) -> list[Row]:
    rows = []
    for group, body in generic_resources(ctx):
        rows.append(
            {
                **body,
                "type": str(body["type"]).lower(),
                "tenantId": ctx.tenant,
                "subscriptionId": ctx.subscription,
                "resourceGroup": group.lower(),
                "properties": {"provisioningState": "Succeeded"},
            }
        )
    return rows


def _scope(ctx: Ctx, body: dict[str, Any], caller: str, admin: str) -> list[Ctx]:
    subs = [str(s).lower() for s in body.get("subscriptions") or []]
    groups = [str(g) for g in body.get("managementGroups") or []]
    for group in groups:
        if group.lower() != ctx.tenant.lower():
            raise ArmError(
                f"The management group '{group}' could not be found or you do not have access to it.",
                code="AuthorizationFailed",
                status=403,
            )
    chosen = [ctx.fleet[s] for s in subs if s in ctx.fleet] if subs else list(ctx.fleet.values())
    return [c for c in chosen if authz.allowed(authz.permissions_of(c, caller, admin), READ)]


def _refusal(query: str, exc: KqlError) -> web.Response:
    line = query.count("\n", 0, exc.position) + 1
    column = exc.position - (query.rfind("\n", 0, exc.position) + 1)
    body = {
        "error": {
            "code": "BadRequest",
            "message": "Please provide below info when asking for support: "
            f"timestamp = {utc_now().isoformat()}, correlationId = {uuid.uuid4()}.",
            "details": [
                {
                    "code": "InvalidQuery",
                    "message": "Query is invalid. Please refer to the documentation for the Azure Resource "
                    "Graph service and fix the error before retrying.",
                },
                {
                    "code": "ParserFailure",
                    "message": str(exc),
                    "line": line,
                    "characterPositionInLine": column,
                },
            ],
        }
    }
    return json_response(body, status=400)


def _token(query: str, offset: int) -> str:
    digest = hashlib.sha256(query.encode()).hexdigest()[:16]
    return base64.urlsafe_b64encode(json.dumps({"o": offset, "q": digest}).encode()).decode()


def _offset(query: str, token: str | None) -> int:
    if not token:
        return 0
    try:
        doc = json.loads(base64.urlsafe_b64decode(token.encode()))
        if doc["q"] == hashlib.sha256(query.encode()).hexdigest()[:16]:
            return int(doc["o"])
    except (ValueError, KeyError, TypeError):
        pass
    raise ArmError("The skip token is invalid or does not belong to this query.", code="InvalidSkipToken")


async def resources_query(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    body = read_json(await req.read())
    query = str(body.get("query") or "")
    if not query.strip():
        raise ArmError("The query is required.", code="BadRequest")
    try:
        run = compile_query(query)
    except KqlError as exc:
        return _refusal(query, exc)
    options = body.get("options") or {}
    top = options.get("$top")
    if top is not None and not (isinstance(top, int) and 1 <= top <= MAX_PAGE):
        raise ArmError(f"$top must be between 1 and {MAX_PAGE}.", code="BadRequest")
    if options.get("resultFormat", "objectArray") != "objectArray":
        raise ArmError("Only resultFormat objectArray is supported by this emulator.", code="BadRequest")
    scope = _scope(ctx, body, req[CALLER], req[ADMIN])

    def tables(name: str) -> list[Row]:
        make = _containers if name == "resourcecontainers" else _resources
        return [row for c in scope for row in make(c)]

    rows = run(tables)
    start = _offset(query, options.get("$skipToken")) + int(options.get("$skip") or 0)
    page = rows[start : start + (top or MAX_PAGE)]
    doc: dict[str, Any] = {
        "totalRecords": len(rows),
        "count": len(page),
        "data": page,
        "facets": [],
        "resultTruncated": "false",
    }
    if start + len(page) < len(rows):
        doc["$skipToken"] = _token(query, start + len(page))
    return json_response(doc)

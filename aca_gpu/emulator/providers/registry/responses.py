"""Microsoft.ContainerRegistry handlers: parse, apply the rules in models.py, shape the answer.

A registry's create answers 201 with `Azure-AsyncOperation` (polled until Succeeded, then the SDK
reads the registry); importImage answers 202 with a `Location` polled until the copy is done (200
with `{"status": "Succeeded"}`),
or failed (an ARM error at the poll: UNCONFIRMED, the failure's wire form was not recorded); a
registry's delete answers 200. A role assignment on a registry is served here (its scope is the
registry) by the Authorization rules.
"""

from __future__ import annotations

from aiohttp import web

from aca_gpu.emulator.arm import ArmError, empty_response, json_response, new_op_id, read_json
from aca_gpu.emulator.context import ADMIN, CALLER, Ctx, Params
from aca_gpu.emulator.providers.authorization import models as authz
from aca_gpu.emulator.providers.registry import models
from aca_gpu.emulator.state import Operation, key

RETRY_AFTER_S = 5


def _op_url(ctx: Ctx, req: web.Request, rg: str, name: str, op_id: str) -> str:
    version = req.query.get("api-version", "")
    return (
        f"{ctx.endpoint}/subscriptions/{ctx.subscription}/resourceGroups/{rg}/providers/"
        f"{models.NS}/registries/{name}/operationStatuses/{op_id}?api-version={version}"
    )


def _retry_after(ctx: Ctx) -> dict[str, str]:
    """ACR's pause between polls (UNCONFIRMED: 5 s), on the scaled clock. Retry-After is whole
    seconds: where the scaled pause is under one, none is sent and the client polls at its own
    interval, as a header of 1 would make every poll wait longer than the operation itself lasts."""
    scaled = ctx.clock.scaled(RETRY_AFTER_S)
    return {"Retry-After": str(round(scaled))} if scaled >= 1 else {}


async def check_name(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    return json_response(models.check_name(ctx, read_json(await req.read())))


async def registries_create(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    reg, created = models.put_registry(ctx, p["rg"], p["registry"], read_json(await req.read()))
    if not created and models.ready(ctx, reg):
        return json_response(models.registry_body(ctx, reg))
    op_id = new_op_id()
    ctx.state.operations[op_id] = Operation(
        id=op_id,
        kind="registries",
        location=reg.location,
        started=reg.created,
        check=lambda: "Succeeded" if models.ready(ctx, reg) else "InProgress",
    )
    headers = {"Azure-AsyncOperation": _op_url(ctx, req, reg.rg, reg.name, op_id), **_retry_after(ctx)}
    return json_response(models.registry_body(ctx, reg), status=201, headers=headers)


async def registries_get(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    return json_response(models.registry_body(ctx, models.find(ctx, p["rg"], p["registry"])))


async def registries_delete(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    return empty_response(200 if models.delete_registry(ctx, p["rg"], p["registry"]) else 204)


async def import_image(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    reg = models.find(ctx, p["rg"], p["registry"])
    done, _targets, failure = models.begin_import(ctx, reg, read_json(await req.read()))
    op_id = new_op_id()

    def check() -> str:
        if ctx.clock.now() < done:
            return "InProgress"
        return "Failed" if failure else "Succeeded"

    ctx.state.operations[op_id] = Operation(
        id=op_id,
        kind="registryimport",
        location=reg.location,
        started=reg.created,
        check=check,
        result=lambda: failure,
    )
    return empty_response(202, {"Location": _op_url(ctx, req, reg.rg, reg.name, op_id), **_retry_after(ctx)})


async def operation_status(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    op = ctx.state.operations.get(p["op"])
    if op is None or op.kind not in ("registries", "registryimport"):
        return empty_response(404)
    status = op.check()
    if op.kind == "registries":
        return json_response({"status": status})
    if status == "InProgress":
        return empty_response(202, {"Location": str(req.url), **_retry_after(ctx)})
    if status == "Failed":
        why = op.result() if op.result is not None else "the import failed"
        raise ArmError(f"Image import failed: {why}", code="InvalidParameters")
    return json_response({"status": "Succeeded"})  # UNCONFIRMED: the final poll's body


async def assignment_create(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    reg = models.find(ctx, p["rg"], p["registry"])
    scope = models.registry_id(ctx, reg)
    body = read_json(await req.read())
    doc = authz.put_assignment(ctx, p["id"], body, req.get(CALLER) or "", req.get(ADMIN) or "", scope=scope)
    return json_response(doc, status=201)


async def assignment_get(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    doc = ctx.state.role_assignments.get(p["id"].lower())
    reg = ctx.state.registries.get(key(p["rg"], p["registry"]))
    if doc is None or reg is None:
        raise ArmError("The role assignment was not found.", code="RoleAssignmentNotFound", status=404)
    return json_response(doc)

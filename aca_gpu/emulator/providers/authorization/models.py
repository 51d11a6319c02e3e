"""Microsoft.Authorization at subscription scope: role definitions (built-in and custom), role
assignments, and the check ARM makes before a managed identity's call.

Enough to create and check `acagpu guard`: a custom role is PUT once (a second role with the same
name is refused, as ARM does), assigned to a job's system-assigned identity, and from then on every
ARM call that identity makes is allowed only if an assignment's role grants its action (`actions`
minus `notActions`, `*` wildcards, case-insensitive). The emulator's own credentials stay Owner,
except for actions a `deny` fault takes away (to try a caller who may not assign roles).
"""

from __future__ import annotations

import fnmatch
import uuid
from typing import Any

from aca_gpu.emulator.arm import ArmError, iso_z
from aca_gpu.emulator.context import Ctx

NS = "Microsoft.Authorization"
# built-in roles at subscription scope (their real ids); what they allow, trimmed to what matters here
BUILT_IN: dict[str, tuple[str, list[str], list[str]]] = {
    "8e3af657-a8ff-443c-a75c-2fe8c4bcb635": ("Owner", ["*"], []),
    "b24988ac-6180-42a0-ab88-20f7382dd24c": (
        "Contributor",
        ["*"],
        [
            "Microsoft.Authorization/*/Delete",
            "Microsoft.Authorization/*/Write",
            "Microsoft.Authorization/elevateAccess/Action",
        ],
    ),
    "acdd72a7-3385-48ef-bd42-f606fba81ae7": ("Reader", ["*/read"], []),
    "18d7d88d-d35e-4fb5-a5c3-7773c20a72d9": (
        "User Access Administrator",
        ["*/read", "Microsoft.Authorization/*"],
        [],
    ),
    "f58310d9-a9f6-439a-9e8d-f62e7b41a168": (
        "Role Based Access Control Administrator",
        ["Microsoft.Authorization/roleAssignments/*", "*/read"],
        [],
    ),
    "7f951dda-4ed3-4680-a7ca-43fe172d538d": (
        "AcrPull",
        ["Microsoft.ContainerRegistry/registries/pull/read"],
        [],
    ),
    # Storage's queue data roles: no control-plane action here, their data actions below
    "974c5e8b-45b9-4653-ba55-5f855dd0fb88": ("Storage Queue Data Contributor", [], []),
    "c6a89b2d-59bc-44d0-9896-0f6e12d7b80a": ("Storage Queue Data Message Sender", [], []),
    "8a0f0c08-91a1-4084-bc3d-661d67233fed": ("Storage Queue Data Message Processor", [], []),
    "19e7f393-937e-4f77-808e-94535e297925": ("Storage Queue Data Reader", [], []),
}
QUEUE_MESSAGES = "Microsoft.Storage/storageAccounts/queueServices/queues/messages"
# what each built-in data role grants on Azure Storage's data plane (Microsoft's built-in roles list)
DATA_ACTIONS: dict[str, list[str]] = {
    "8e3af657-a8ff-443c-a75c-2fe8c4bcb635": [],  # Owner: control plane only (no data action)
    "974c5e8b-45b9-4653-ba55-5f855dd0fb88": [
        f"{QUEUE_MESSAGES}/{a}" for a in ("delete", "read", "write", "process/action", "add/action")
    ],
    "c6a89b2d-59bc-44d0-9896-0f6e12d7b80a": [f"{QUEUE_MESSAGES}/add/action"],
    "8a0f0c08-91a1-4084-bc3d-661d67233fed": [f"{QUEUE_MESSAGES}/read", f"{QUEUE_MESSAGES}/process/action"],
    "19e7f393-937e-4f77-808e-94535e297925": [f"{QUEUE_MESSAGES}/read"],
}


class AuthorizationFailed(ArmError):
    status = 403
    code = "AuthorizationFailed"


class RoleDefinitionDoesNotExist(ArmError):
    status = 404
    code = "RoleDefinitionDoesNotExist"


def sub_scope(ctx: Ctx) -> str:
    return f"/subscriptions/{ctx.subscription}"


def definition_id(ctx: Ctx, guid: str) -> str:
    return f"{sub_scope(ctx)}/providers/{NS}/roleDefinitions/{guid}"


def _built_in(ctx: Ctx, guid: str) -> dict[str, Any]:
    name, actions, not_actions = BUILT_IN[guid]
    return {
        "id": definition_id(ctx, guid),
        "name": guid,
        "type": f"{NS}/roleDefinitions",
        "properties": {
            "roleName": name,
            "type": "BuiltInRole",
            "description": name,
            "assignableScopes": ["/"],
            "permissions": [
                {
                    "actions": actions,
                    "notActions": not_actions,
                    "dataActions": list(DATA_ACTIONS.get(guid, [])),
                    "notDataActions": [],
                }
            ],
        },
    }


def _visible(ctx: Ctx, doc: dict[str, Any]) -> dict[str, Any] | None:
    """A custom role as seen from this subscription: only where it is assignable, with this
    subscription's id (custom roles are the tenant's; the emulated subscriptions share them)."""
    scopes = [str(s).rstrip("/").lower() for s in doc["properties"]["assignableScopes"]]
    if sub_scope(ctx).lower() not in scopes:
        return None
    return {**doc, "id": definition_id(ctx, doc["name"])}


def definitions(ctx: Ctx) -> list[dict[str, Any]]:
    custom = [_visible(ctx, d) for d in ctx.state.role_definitions.values()]
    return [_built_in(ctx, g) for g in BUILT_IN] + [d for d in custom if d is not None]


def get_definition(ctx: Ctx, guid: str) -> dict[str, Any]:
    if guid.lower() in BUILT_IN:
        return _built_in(ctx, guid.lower())
    stored = ctx.state.role_definitions.get(guid.lower())
    found = None if stored is None else _visible(ctx, stored)
    if found is None:
        raise RoleDefinitionDoesNotExist(f"The specified role definition with ID '{guid}' does not exist.")
    return found


def put_definition(ctx: Ctx, guid: str, body: dict[str, Any], caller: str) -> tuple[dict[str, Any], bool]:
    props = body.get("properties") or {}
    name = str(props.get("roleName") or "").strip()
    if not name:
        raise ArmError("The role definition name cannot be empty.", code="InvalidRoleDefinition")
    scopes = [str(s) for s in props.get("assignableScopes") or []]
    tenant_subs = {f"/subscriptions/{s}" for s in (ctx.fleet or {ctx.subscription: ctx})}
    if sub_scope(ctx).lower() not in {s.rstrip("/").lower() for s in scopes} or any(
        s.rstrip("/").lower() not in tenant_subs for s in scopes
    ):
        raise ArmError(
            f"The assignable scopes must include this subscription ({sub_scope(ctx)}) and name only "
            "subscriptions of this tenant.",
            code="InvalidAssignableScope",
        )
    if guid.lower() in BUILT_IN:
        raise ArmError("Built-in role definitions cannot be changed.", code="RoleDefinitionNotUpdatable")
    for other in [*(_built_in(ctx, g) for g in BUILT_IN), *ctx.state.role_definitions.values()]:
        if other["name"] != guid.lower() and other["properties"]["roleName"].lower() == name.lower():
            raise ArmError(
                "A custom role with the same name already exists in this directory. Use a different name.",
                code="RoleDefinitionWithSameNameExists",
                status=409,
            )
    permissions = [
        {
            "actions": [str(a) for a in p.get("actions") or []],
            "notActions": [str(a) for a in p.get("notActions") or []],
            "dataActions": [str(a) for a in p.get("dataActions") or []],
            "notDataActions": [str(a) for a in p.get("notDataActions") or []],
        }
        for p in props.get("permissions") or []
    ]
    created = guid.lower() not in ctx.state.role_definitions
    now = iso_z()
    doc = {
        "id": definition_id(ctx, guid.lower()),
        "name": guid.lower(),
        "type": f"{NS}/roleDefinitions",
        "properties": {
            "roleName": name,
            "type": "CustomRole",
            "description": str(props.get("description") or ""),
            "assignableScopes": scopes,
            "permissions": permissions,
            "createdOn": now,
            "updatedOn": now,
            "createdBy": caller,
            "updatedBy": caller,
        },
    }
    ctx.state.role_definitions[guid.lower()] = doc
    return doc, created


def delete_definition(ctx: Ctx, guid: str) -> dict[str, Any] | None:
    if any(a["properties"]["roleDefinitionId"].lower().endswith(guid.lower()) for a in assignments(ctx)):
        raise ArmError(
            "There are existing role assignments referencing role (code: RoleDefinitionHasAssignments).",
            code="RoleDefinitionHasAssignments",
            status=409,
        )
    return ctx.state.role_definitions.pop(guid.lower(), None)


# A new role assignment grants its role only this many emulated seconds after ARM accepted it
# (UNCONFIRMED figure: Microsoft's RBAC troubleshooting guide says assignment changes can take
# minutes to take effect; 120 s is a typical wait, not the documented worst case). Listing and reading
# the assignment work at once; the managed identity's calls are refused (403) until then.
PROPAGATION_S = 120.0


def assignments(ctx: Ctx) -> list[dict[str, Any]]:
    return list(ctx.state.role_assignments.values())


def known_principal(ctx: Ctx, principal: str, admin: str) -> bool:
    return principal == admin or principal in ctx.state.principals


def put_assignment(
    ctx: Ctx, guid: str, body: dict[str, Any], caller: str, admin: str, scope: str | None = None
) -> dict[str, Any]:
    """An assignment at subscription scope, or at `scope` (a resource: a registry's AcrPull)."""
    scope = scope or sub_scope(ctx)
    props = body.get("properties") or {}
    role_id = str(props.get("roleDefinitionId") or "")
    principal = str(props.get("principalId") or "")
    try:
        uuid.UUID(guid)
    except ValueError:
        raise ArmError(
            f"The role assignment ID '{guid}' is not valid. It must be a GUID.",
            code="InvalidRoleAssignmentId",
        ) from None
    role_guid = role_id.rstrip("/").rsplit("/", 1)[-1]
    get_definition(ctx, role_guid)  # RoleDefinitionDoesNotExist
    if not known_principal(ctx, principal, admin):
        raise ArmError(
            f"Principal {principal.replace('-', '')} does not exist in the directory {ctx.tenant}. "
            "Check that you have the correct principal ID. If you are creating this principal and then "
            "immediately assigning a role, this error might be related to a replication delay.",
            code="PrincipalNotFound",
        )
    for other in assignments(ctx):
        p = other["properties"]
        if (
            other["name"] != guid.lower()
            and p["principalId"] == principal
            and p["roleDefinitionId"].lower() == definition_id(ctx, role_guid.lower()).lower()
            and str(p.get("scope") or "").lower() == scope.lower()
        ):
            raise ArmError("The role assignment already exists.", code="RoleAssignmentExists", status=409)
    now = iso_z()
    doc = {
        "id": f"{scope}/providers/{NS}/roleAssignments/{guid.lower()}",
        "name": guid.lower(),
        "type": f"{NS}/roleAssignments",
        "properties": {
            "roleDefinitionId": definition_id(ctx, role_guid.lower()),
            "principalId": principal,
            "principalType": str(props.get("principalType") or "ServicePrincipal"),
            "scope": scope,
            **({"description": str(props["description"])} if props.get("description") else {}),
            "createdOn": now,
            "updatedOn": now,
            "createdBy": caller,
            "updatedBy": caller,
        },
    }
    if guid.lower() not in ctx.state.role_assignments:
        ctx.state.role_assignments_effective[guid.lower()] = ctx.clock.after_seconds(PROPAGATION_S)
    ctx.state.role_assignments[guid.lower()] = doc
    return doc


def within(path: str, scope: str) -> bool:
    """Whether the resource `path` is `scope` or below it (whole path segments, any case)."""
    target, at = path.rstrip("/").lower(), scope.rstrip("/").lower()
    return target == at or target.startswith(at + "/")


def permissions_of(
    ctx: Ctx, principal: str, admin: str, *, now: float | None = None, at: str | None = None
) -> list[dict[str, list[str]]]:
    """What `principal` may do in this subscription: one entry per role it holds (the admin is Owner,
    less what a `deny` fault takes away). With `now` (ARM checking a call), an assignment that has not
    propagated yet (PROPAGATION_S) grants nothing; with `at` (the call's path), only an assignment at
    that resource's scope or above it counts (a job's role on itself reaches no other resource)."""
    if principal == admin:
        denied = [
            f.param("action", "")
            for f in ctx.faults.all("deny")
            if f.param("subscription", ctx.subscription).lower() == ctx.subscription
        ]
        return [{"actions": ["*"], "notActions": denied, "dataActions": [], "notDataActions": []}]
    found = []
    for assignment in assignments(ctx):
        p = assignment["properties"]
        if p["principalId"] != principal:
            continue
        if now is not None and now < ctx.state.role_assignments_effective.get(assignment["name"], 0.0):
            continue  # accepted, not yet effective
        if at is not None and not within(at, str(p.get("scope") or sub_scope(ctx))):
            continue  # assigned elsewhere: it grants nothing here
        try:
            role = get_definition(ctx, p["roleDefinitionId"].rstrip("/").rsplit("/", 1)[-1])
        except RoleDefinitionDoesNotExist:
            continue
        found.extend(role["properties"]["permissions"])
    return found


def data_allowed(ctx: Ctx, principal: str, scope: str, action: str, *, now: float) -> bool:
    """Whether `principal` holds a role granting the data action `action` on the resource `scope`:
    an effective assignment at that scope or above it (its account, group, subscription)."""
    for assignment in assignments(ctx):
        p = assignment["properties"]
        if p["principalId"] != principal:
            continue
        if now < ctx.state.role_assignments_effective.get(assignment["name"], 0.0):
            continue  # accepted, not yet effective
        if not within(scope, str(p.get("scope") or sub_scope(ctx))):
            continue
        try:
            role = get_definition(ctx, p["roleDefinitionId"].rstrip("/").rsplit("/", 1)[-1])
        except RoleDefinitionDoesNotExist:
            continue
        for perm in role["properties"]["permissions"]:
            if any(_match(action, a) for a in perm.get("dataActions", [])) and not any(
                _match(action, n) for n in perm.get("notDataActions", [])
            ):
                return True
    return False


def _match(action: str, pattern: str) -> bool:
    return fnmatch.fnmatchcase(action.lower(), pattern.lower())


def allowed(permissions: list[dict[str, list[str]]], action: str) -> bool:
    return any(
        any(_match(action, a) for a in p.get("actions", []))
        and not any(_match(action, n) for n in p.get("notActions", []))
        for p in permissions
    )


def action_of(method: str, path: str) -> str | None:
    """The RBAC action an ARM call needs (None: operation polls, which whoever started them may read)."""
    verb = {"GET": "read", "HEAD": "read", "PUT": "write", "PATCH": "write", "DELETE": "delete"}.get(method)
    parts = [p for p in path.split("/") if p]
    lowered = [p.lower() for p in parts]
    if len(parts) < 2 or lowered[0] != "subscriptions":
        return None
    rest, low = parts[2:], lowered[2:]
    if any(p.endswith(("operationresults", "operationstatuses")) for p in low):
        return None
    if not rest:
        return f"Microsoft.Resources/subscriptions/{verb or 'read'}"
    if low[0] == "resourcegroups":
        if len(rest) <= 2:
            return f"Microsoft.Resources/subscriptions/resourceGroups/{verb or 'action'}"
        if low[2] == "resources":
            return "Microsoft.Resources/subscriptions/resourceGroups/resources/read"
        if low[2] == "providers" and len(rest) >= 5:
            return _provider_action(rest[3], rest[4:], method, verb)
        return None
    if low[0] == "providers":
        if len(rest) <= 2:
            return (
                "Microsoft.Resources/subscriptions/providers/read"
                if len(rest) == 1 or verb
                else (f"{rest[1]}/register/action")
            )
        if low[1:2] == ["microsoft.resources"]:
            return None
        return _provider_action(rest[1], rest[2:], method, verb)
    if low[0] == "resources":
        return "Microsoft.Resources/subscriptions/resources/read"
    return None


def _provider_action(namespace: str, parts: list[str], method: str, verb: str | None) -> str:
    low = [p.lower() for p in parts]
    if "providers" in low and len(parts) > low.index("providers") + 2:  # an extension resource
        at = low.index("providers")  # (a role assignment on a registry is Microsoft.Authorization's)
        return _provider_action(parts[at + 1], parts[at + 2 :], method, verb)
    if method == "POST" and len(parts) % 2 == 1 and len(parts) >= 3:
        types = parts[0:-1:2]
        return f"{namespace}/{'/'.join(types)}/{parts[-1]}/action"
    types = parts[0::2]
    return f"{namespace}/{'/'.join(types)}/{verb or 'action'}"


def refuse(ctx: Ctx, principal: str, action: str) -> AuthorizationFailed:
    return AuthorizationFailed(
        f"The client '{principal}' with object id '{principal}' does not have authorization to perform "
        f"action '{action}' over scope '{sub_scope(ctx)}' or the scope is invalid. If access was recently "
        "granted, please refresh your credentials."
    )

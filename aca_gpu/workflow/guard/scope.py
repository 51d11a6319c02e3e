"""`guard install --scope`: one guard, the same least-privilege role at every subscription it sweeps.

A custom role belongs to the tenant and lists the scopes it may be assigned at, so there is one
"acagpu runner" role whose `AssignableScopes` are all the guarded subscriptions (widened when a
scope is added), and one assignment of it per subscription to the guard job's identity. Before
anything is created the caller's rights are read in every subscription; where it may not assign
roles (or widen the role), install stops and prints the exact commands an administrator runs, one
per subscription. Management groups are refused for now: name their subscriptions instead.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aca_gpu.config import GUID_RE
from aca_gpu.errors import BadInput, PreflightRefused
from aca_gpu.workflow.ci.ci_init import ROLE_NAME, role_definition

if TYPE_CHECKING:
    from aca_gpu.azure.clients import Clients

ASSIGN = "Microsoft.Authorization/roleAssignments/write"
DEFINE = "Microsoft.Authorization/roleDefinitions/write"
ADMIN_ROLES = ("Owner", "User Access Administrator", "Role Based Access Control Administrator")
_SUB_SCOPE = re.compile(r"^/?subscriptions/(?P<sub>[^/]+)/?$", re.IGNORECASE)
_MG_SCOPE = re.compile(r"^/?providers/microsoft\.management/managementgroups/[^/]+/?$", re.IGNORECASE)


def parse_scopes(home: str, scopes: Sequence[str]) -> tuple[str, ...]:
    """The guarded subscriptions, the guard's own first: `/subscriptions/<id>` or a bare id."""
    found = [home.lower()]
    for scope in scopes:
        text = scope.strip()
        if _MG_SCOPE.match(text):
            raise BadInput(
                f"--scope {text}: management groups are not supported yet; pass each of its "
                "subscriptions as --scope /subscriptions/<id>"
            )
        m = _SUB_SCOPE.match(text)
        sub = m.group("sub") if m else text
        if not GUID_RE.fullmatch(sub):
            raise BadInput(f"--scope {scope!r}: expected /subscriptions/<subscription id>")
        found.append(sub.lower())
    return tuple(dict.fromkeys(found))


def scope_of(sub: str) -> str:
    return f"/subscriptions/{sub}"


def allowed(permissions: Sequence[Mapping[str, Sequence[str]]], action: str) -> bool:
    """Whether any permission entry grants `action` and none of its notActions takes it back."""

    def match(pattern: str) -> bool:
        return fnmatch.fnmatchcase(action.lower(), pattern.lower())

    return any(
        any(match(a) for a in p.get("actions", [])) and not any(match(n) for n in p.get("notActions", []))
        for p in permissions
    )


def role_document(subs: Sequence[str]) -> dict[str, Any]:
    """The one role, assignable at every guarded subscription."""
    return {**role_definition(subs[0]), "AssignableScopes": [scope_of(s) for s in subs]}


def admin_commands(
    missing: Mapping[str, Sequence[str]],
    who: tuple[str | None, str | None],
    subs: Sequence[str],
    role: Mapping[str, Any] | None = None,
) -> list[str]:
    """What an administrator runs so that this caller can install the guard over `subs`: the right
    to assign roles at each subscription that lacks it, and the role itself when it must be made or
    widened (the same JSON, with its id when it exists). `who` is the caller's (object id, principal
    type): an application in CI is a ServicePrincipal; an unknown type is left for `az` to look up."""
    oid = who[0] or "<your object id: az ad signed-in-user show --query id -o tsv>"
    kind = f" --assignee-principal-type {who[1]}" if who[1] else ""
    lines = [
        f'az role assignment create --role "Role Based Access Control Administrator" '
        f'--scope {scope_of(sub)} --assignee-object-id "{oid}"{kind}'
        for sub, actions in missing.items()
        if actions
    ]
    if any(DEFINE in actions for actions in missing.values()):
        document = role_document(subs)
        if role is None:
            lines.append(f"az role definition create --role-definition '{_compact(document)}'")
        else:
            scopes = [str(s) for s in role["properties"].get("assignableScopes") or []]
            wide = list(dict.fromkeys([*scopes, *(scope_of(s) for s in subs)]))
            document = {"Id": role["name"], **document, "AssignableScopes": wide}
            lines.append(f"az role definition update --role-definition '{_compact(document)}'")
    return lines


def _compact(doc: Mapping[str, Any]) -> str:
    return json.dumps(doc, separators=(",", ":"))


def refusal(
    missing: Mapping[str, Sequence[str]],
    who: tuple[str | None, str | None],
    subs: Sequence[str],
    done: str,
    role: Mapping[str, Any] | None = None,
) -> PreflightRefused:
    rights = {ASSIGN: "assign roles", DEFINE: "define roles"}
    where = "; ".join(
        f"{' or '.join(rights[a] for a in actions)} ({', '.join(actions)}) on {scope_of(sub)}"
        for sub, actions in missing.items()
        if actions
    )
    return PreflightRefused(
        f"you may not {where}, which installing the guard needs; {done}. An administrator "
        f"({' or '.join(ADMIN_ROLES[:2])}) can run `acagpu guard install` instead, or run the commands "
        "below and you run it again",
        code="AuthorizationFailed",
        hint=" && ".join(admin_commands(missing, who, subs, role)),
    )


@dataclass
class ScopePlan:
    """What the preflight found: clients per subscription, the role (if it exists), what is lacking."""

    subs: tuple[str, ...]
    clients: dict[str, Clients]
    role: dict[str, Any] | None
    missing: dict[str, list[str]] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)  # subscriptions whose permissions ARM did not list

    @property
    def role_needs_scopes(self) -> list[str]:
        if self.role is None:
            return list(self.subs)
        have = {str(s).rstrip("/").lower() for s in self.role["properties"].get("assignableScopes") or []}
        return [s for s in self.subs if scope_of(s) not in have]


def preflight(home: Clients, subs: Sequence[str]) -> ScopePlan:
    """Read the caller's rights in every subscription before anything is created."""
    from aca_gpu.azure import guard as az
    from aca_gpu.azure.clients import Clients

    clients = {s: home if s == home.subscription_id.lower() else Clients(home.settings, s) for s in subs}
    plan = ScopePlan(tuple(subs), clients, az.find_role(home, ROLE_NAME))
    widen = bool(plan.role_needs_scopes)
    for sub in subs:
        permissions = az.caller_permissions(clients[sub])
        if permissions is None:
            plan.unknown.append(sub)
            continue
        needed = [ASSIGN] + ([DEFINE] if widen and (sub == subs[0] or sub in plan.role_needs_scopes) else [])
        lacking = [a for a in needed if not allowed(permissions, a)]
        if lacking:
            plan.missing[sub] = lacking
    return plan


def ensure_role(plan: ScopePlan) -> str:
    """The role's id as the guard's home subscription names it; created or widened when needed."""
    from aca_gpu.azure import guard as az

    home = plan.clients[plan.subs[0]]
    if plan.role is None:
        plan.role = az.create_role(home, role_document(plan.subs))
    elif plan.role_needs_scopes:
        scopes = [str(s) for s in plan.role["properties"].get("assignableScopes") or []]
        wanted = list(dict.fromkeys([*scopes, *(scope_of(s) for s in plan.subs)]))
        document = {**role_document(plan.subs), "AssignableScopes": wanted}
        plan.role = az.create_role(home, document, guid=str(plan.role["name"]))
    return str(plan.role["id"])


def assign_everywhere(plan: ScopePlan, principal_id: str) -> list[str]:
    """One assignment of the role per subscription (idempotent names); their ids."""
    from aca_gpu.azure import guard as az

    assert plan.role is not None
    guid = str(plan.role["name"])
    done = []
    for sub in plan.subs:
        role_id = f"{scope_of(sub)}/providers/Microsoft.Authorization/roleDefinitions/{guid}"
        done.append(az.assign_role(plan.clients[sub], role_id, principal_id))
    return done


def unassign_everywhere(home: Clients, subs: Sequence[str], principal_id: str) -> list[str]:
    """Every assignment of the principal in every guarded subscription, removed; their ids."""
    from aca_gpu.azure import guard as az
    from aca_gpu.azure.clients import Clients

    removed: list[str] = []
    for sub in subs:
        clients = home if sub == home.subscription_id.lower() else Clients(home.settings, sub)
        for assignment in az.assignments_of(clients, principal_id):
            az.delete_assignment(clients, str(assignment["id"]))
            removed.append(str(assignment["id"]))
    return removed

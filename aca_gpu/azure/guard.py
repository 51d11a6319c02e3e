"""What `acagpu guard` needs from Azure beyond a run: the caller's permissions, a custom role and its
assignment (Microsoft.Authorization, over ARM's REST API through the SDK's own pipeline), a
Consumption-only environment, and a schedule-triggered job with a system-assigned identity.

Role assignments are PUT under a name derived from (principal, role), so installing twice changes
nothing; a PrincipalNotFound right after the identity was created is Entra ID's replication delay
and is retried for a while, as Microsoft's docs advise.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from aca_gpu.azure.app_records import execution_info
from aca_gpu.azure.clients import ARM_SCOPE, Clients
from aca_gpu.azure.resources import as_json, props
from aca_gpu.azure.translate import arm_error_fields, make_error, or_none, translate_errors
from aca_gpu.errors import AcaGpuError, BadInput, NotFound
from aca_gpu.models import ExecutionInfo

AUTH_API = "2022-04-01"
AUTH = "/providers/Microsoft.Authorization"
PRINCIPAL_WAIT_S = 120.0
ASSIGNMENT_NAMESPACE = uuid.UUID("7d3a4f36-5c1b-4f0e-9a55-acabad9e0a11")


@dataclass(frozen=True)
class ScheduledJob:
    id: str
    principal_id: str | None
    cron: str | None
    tags: Mapping[str, str]
    provisioning_state: str | None


def _sub(clients: Clients) -> str:
    return f"/subscriptions/{quote(clients.subscription_id, safe='')}"


def _call(clients: Clients, method: str, url: str, action: str, target: str, body: Any = None) -> Any:
    """One ARM call through the SDK pipeline (auth, retries, endpoint override); errors translated."""
    from azure.core.rest import HttpRequest

    request = HttpRequest(method, url, json=body) if body is not None else HttpRequest(method, url)
    with translate_errors(action, target):
        response = clients.resources.send_request(request)
        text = response.text()
    status = int(response.status_code)
    if status >= 400:
        code, message = arm_error_fields(text)
        raise make_error(action, target, code, status, message)
    return json.loads(text) if text and text.strip() else None


# ---- who is calling, and what may they do ------------------------------------------------------


def caller_permissions(clients: Clients) -> list[dict[str, list[str]]] | None:
    """What the caller may do in the subscription, or None when ARM does not say.

    The documented Permissions list is per resource group and per resource; the same path at
    subscription scope is what is read here (UNCONFIRMED against live Azure: if ARM answers 400 or
    404 the caller's rights are unknown, and the role assignment itself is the test)."""
    url = f"{_sub(clients)}{AUTH}/permissions?api-version={AUTH_API}"
    try:
        doc = _call(clients, "GET", url, "read your permissions on", clients.subscription_id) or {}
    except (NotFound, BadInput):
        return None
    return [
        {k: [str(a) for a in entry.get(k) or []] for k in ("actions", "notActions")}
        for entry in doc.get("value") or []
    ]


def caller_object_id(clients: Clients) -> str | None:
    """The signed-in principal's object id, read from its ARM token (no Graph call needed)."""
    return caller(clients)[0]


def caller(clients: Clients) -> tuple[str | None, str | None]:
    """(object id, principal type for `az role assignment create`) of the signed-in principal, from
    its ARM token: `User` for a person, `ServicePrincipal` for an application (idtyp=app, or an app
    id without a user name), None when the token does not say."""
    try:
        token = clients.credential.get_token(ARM_SCOPE).token
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except Exception:  # a credential failure or an opaque token: the caller simply stays unnamed
        return None, None
    if not isinstance(claims, dict):
        return None, None
    oid = str(claims["oid"]) if claims.get("oid") else None
    user = any(claims.get(k) for k in ("upn", "unique_name", "preferred_username"))
    if claims.get("idtyp") == "app" or (not user and (claims.get("appid") or claims.get("azp"))):
        return oid, "ServicePrincipal"
    return oid, "User" if user else None


# ---- the custom role and its assignment --------------------------------------------------------


def find_role(clients: Clients, name: str) -> dict[str, Any] | None:
    flt = quote(f"roleName eq '{name}'", safe="")
    url = f"{_sub(clients)}{AUTH}/roleDefinitions?$filter={flt}&api-version={AUTH_API}"
    doc = _call(clients, "GET", url, "look up role", name) or {}
    found = [d for d in doc.get("value") or [] if props(d).get("roleName") == name]
    return found[0] if found else None


def create_role(clients: Clients, definition: Mapping[str, Any], guid: str | None = None) -> dict[str, Any]:
    """PUT a custom role from the `az role definition create` JSON shape (ci_init.role_definition);
    with `guid`, the existing role of that id is updated (its assignable scopes widened)."""
    guid = guid or str(uuid.uuid4())
    body = {
        "properties": {
            "roleName": definition["Name"],
            "description": definition.get("Description", ""),
            "type": "CustomRole",
            "assignableScopes": list(definition["AssignableScopes"]),
            "permissions": [
                {
                    "actions": list(definition.get("Actions", [])),
                    "notActions": list(definition.get("NotActions", [])),
                    "dataActions": list(definition.get("DataActions", [])),
                    "notDataActions": list(definition.get("NotDataActions", [])),
                }
            ],
        }
    }
    url = f"{_sub(clients)}{AUTH}/roleDefinitions/{guid}?api-version={AUTH_API}"
    created: dict[str, Any] = _call(clients, "PUT", url, "create role", str(definition["Name"]), body)
    return created


def assignment_name(principal_id: str, role_id: str) -> str:
    return str(uuid.uuid5(ASSIGNMENT_NAMESPACE, f"{principal_id}|{role_id.lower()}"))


def assign_role(
    clients: Clients,
    role_id: str,
    principal_id: str,
    *,
    wait_s: float = PRINCIPAL_WAIT_S,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Assign the role to a service principal at subscription scope; the assignment's id."""
    name = assignment_name(principal_id, role_id)
    url = f"{_sub(clients)}{AUTH}/roleAssignments/{name}?api-version={AUTH_API}"
    body = {
        "properties": {
            "roleDefinitionId": role_id,
            "principalId": principal_id,
            "principalType": "ServicePrincipal",
        }
    }
    end = time.monotonic() + wait_s
    while True:
        try:
            doc = _call(clients, "PUT", url, "assign role to", principal_id, body)
            return str((doc or {}).get("id") or f"{_sub(clients)}{AUTH}/roleAssignments/{name}")
        except AcaGpuError as exc:
            if (exc.code or "").lower() == "roleassignmentexists":
                return f"{_sub(clients)}{AUTH}/roleAssignments/{name}"
            if (exc.code or "").lower() != "principalnotfound" or time.monotonic() >= end:
                raise
        sleep(5.0)


def assignments_of(clients: Clients, principal_id: str) -> list[dict[str, Any]]:
    flt = quote(f"principalId eq '{principal_id}'", safe="")
    url = f"{_sub(clients)}{AUTH}/roleAssignments?$filter={flt}&api-version={AUTH_API}"
    doc = _call(clients, "GET", url, "list role assignments of", principal_id) or {}
    return [dict(a) for a in doc.get("value") or []]


def delete_assignment(clients: Clients, assignment_id: str) -> None:
    _call(
        clients, "DELETE", f"{assignment_id}?api-version={AUTH_API}", "delete role assignment", assignment_id
    )


# ---- the guard's environment and scheduled job -------------------------------------------------


def create_consumption_environment(
    clients: Clients, rg: str, name: str, location: str, tags: Mapping[str, str]
) -> str:
    """A Consumption-only environment (no workload profiles, no GPU): nothing bills while it idles."""
    from azure.mgmt.appcontainers.models import ManagedEnvironment

    body = ManagedEnvironment({"location": location, "tags": dict(tags), "properties": {}})
    with translate_errors("create environment", name):
        env = clients.apps.managed_environments.begin_create_or_update(rg, name, body).result()
    return str(as_json(env).get("id"))


def create_scheduled_job(
    clients: Clients,
    rg: str,
    name: str,
    *,
    location: str,
    environment_id: str,
    cron: str,
    image: str,
    command: list[str],
    env: Mapping[str, str],
    tags: Mapping[str, str],
    replica_timeout_s: int,
    secret_env: Mapping[str, str] | None = None,
) -> ScheduledJob:
    """`secret_env` (variable -> value) travels as job secrets the container's env references, so a
    GET of the job (and `guard status`) never shows the value, as a webhook URL must not be."""
    from azure.mgmt.appcontainers.models import Job

    secret_names = {k: k.lower().replace("_", "-") for k in (secret_env or {})}
    env_items: list[dict[str, str]] = [{"name": k, "value": v} for k, v in env.items()]
    env_items += [{"name": k, "secretRef": ref} for k, ref in secret_names.items()]
    body = Job(
        {
            "location": location,
            "tags": dict(tags),
            "identity": {"type": "SystemAssigned"},
            "properties": {
                "environmentId": environment_id,
                "configuration": {
                    "triggerType": "Schedule",
                    "replicaTimeout": replica_timeout_s,
                    "replicaRetryLimit": 0,
                    "secrets": [{"name": secret_names[k], "value": v} for k, v in (secret_env or {}).items()],
                    "scheduleTriggerConfig": {
                        "cronExpression": cron,
                        "parallelism": 1,
                        "replicaCompletionCount": 1,
                    },
                },
                "template": {
                    "containers": [
                        {
                            "name": "guard",
                            "image": image,
                            "command": list(command),
                            "env": env_items,
                            "resources": {"cpu": 0.25, "memory": "0.5Gi"},
                        }
                    ]
                },
            },
        }
    )
    with translate_errors("create job", name):
        job = clients.apps.jobs.begin_create_or_update(rg, name, body).result()
    return _scheduled(job)


def _scheduled(obj: Any) -> ScheduledJob:
    doc = as_json(obj)
    p = props(doc)
    schedule = (p.get("configuration") or {}).get("scheduleTriggerConfig") or {}
    identity = doc.get("identity") or {}
    return ScheduledJob(
        id=str(doc.get("id", "")),
        principal_id=identity.get("principalId"),
        cron=schedule.get("cronExpression"),
        tags={str(k): str(v) for k, v in (doc.get("tags") or {}).items()},
        provisioning_state=p.get("provisioningState"),
    )


def get_scheduled_job(clients: Clients, rg: str, name: str) -> ScheduledJob | None:
    found = or_none("read job", name, lambda: clients.apps.jobs.get(rg, name))
    return None if found is None else _scheduled(found)


def executions(clients: Clients, rg: str, job: str) -> list[ExecutionInfo]:
    try:
        with translate_errors("list executions of", job):
            return [execution_info(e) for e in clients.apps.jobs_executions.list(rg, job)]
    except NotFound:
        return []

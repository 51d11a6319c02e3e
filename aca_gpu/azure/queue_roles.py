"""Role assignments at one Storage queue's scope (and one job's): what a queue run's workers may
do, and no more.

A worker signs in with its Event job's system-assigned identity (no key in any template), so that
identity needs a data role on the run's queues. It is granted at each queue's own scope
(`.../storageAccounts/{account}/queueServices/default/queues/{queue}`, a scope Azure Storage
supports for its queue data roles), never at the account, its group or the subscription: a worker
of one run cannot read another run's items.

A run with a warm floor (`--warm K`) also gets Contributor at its Event job's own scope: the worker
that ends the floor's idle window sets the job's minExecutions back to 0 itself, so the floor goes
with no client; that role reaches that job and nothing else.

Each assignment's name is derived from (principal, scope, role), so a run resumed or retried sends
the same PUT; its `description` names the run (`acagpu:run-id=<run>`), the mark teardown checks
before it deletes one, since role assignments carry no tags. A PrincipalNotFound right after the
job was made is Entra ID's replication delay: the PUT is sent again for a while (as the guard's own
assignment is, azure/guard.py).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from aca_gpu.azure.clients import Clients
from aca_gpu.azure.guard import AUTH, AUTH_API, PRINCIPAL_WAIT_S, _call
from aca_gpu.errors import AcaGpuError, NotFound
from aca_gpu.models import RoleAssignmentInfo

# built-in roles (their ids are the same in every tenant)
QUEUE_DATA_CONTRIBUTOR = "974c5e8b-45b9-4653-ba55-5f855dd0fb88"  # receive, update, delete, add
QUEUE_MESSAGE_SENDER = "c6a89b2d-59bc-44d0-9896-0f6e12d7b80a"  # add only
CONTRIBUTOR = "b24988ac-6180-42a0-ab88-20f7382dd24c"  # at one job's scope: that job, nothing else
ROLES = {"contributor": QUEUE_DATA_CONTRIBUTOR, "sender": QUEUE_MESSAGE_SENDER, "job": CONTRIBUTOR}
NAMESPACE = uuid.UUID("5b0e8c57-61d2-4a3f-9c0e-acabad9e0a39")


def queue_scope(subscription: str, resource_group: str, account: str, queue: str) -> str:
    return (
        f"/subscriptions/{quote(subscription, safe='')}/resourceGroups/{quote(resource_group, safe='')}"
        f"/providers/Microsoft.Storage/storageAccounts/{quote(account, safe='')}"
        f"/queueServices/default/queues/{quote(queue, safe='')}"
    )


def job_scope(subscription: str, resource_group: str, job: str) -> str:
    return (
        f"/subscriptions/{quote(subscription, safe='')}/resourceGroups/{quote(resource_group, safe='')}"
        f"/providers/Microsoft.App/jobs/{quote(job, safe='')}"
    )


def assignment_name(principal_id: str, scope: str, role: str) -> str:
    return str(uuid.uuid5(NAMESPACE, f"{principal_id}|{scope.lower()}|{role.lower()}"))


def grant(
    clients: Clients,
    scope: str,
    role: str,
    principal_id: str,
    description: str,
    *,
    wait_s: float = PRINCIPAL_WAIT_S,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """`role` (a key of ROLES) for the principal at `scope` alone; the assignment's id."""
    name = assignment_name(principal_id, scope, role)
    assignment = f"{scope}{AUTH}/roleAssignments/{name}"
    subscription = quote(clients.subscription_id, safe="")
    definition = f"/subscriptions/{subscription}{AUTH}/roleDefinitions/{ROLES[role]}"
    body = {
        "properties": {
            "roleDefinitionId": definition,
            "principalId": principal_id,
            "principalType": "ServicePrincipal",
            "description": description,
        }
    }
    target = scope.rsplit("/", 1)[-1]
    end = time.monotonic() + wait_s
    while True:
        try:
            url = f"{assignment}?api-version={AUTH_API}"
            doc = _call(clients, "PUT", url, "grant a role on", target, body)
            return str((doc or {}).get("id") or assignment)
        except AcaGpuError as exc:
            code = (exc.code or "").lower()
            if code == "roleassignmentexists":
                return assignment
            if code != "principalnotfound" or time.monotonic() >= end:
                raise
        sleep(5.0)


def assignments_at(clients: Clients, scope: str) -> list[RoleAssignmentInfo]:
    """The assignments made at `scope` itself (ARM's `atScope()` also answers those above it: the
    account's, the group's, the subscription's, which are not the run's and are left out here)."""
    flt = quote("atScope()", safe="")
    url = f"{scope}{AUTH}/roleAssignments?$filter={flt}&api-version={AUTH_API}"
    try:
        doc = _call(clients, "GET", url, "list the role assignments of", scope.rsplit("/", 1)[-1]) or {}
    except NotFound:
        return []
    found = [_info(a) for a in doc.get("value") or []]
    return [a for a in found if a.scope.rstrip("/").lower() == scope.rstrip("/").lower()]


def delete(clients: Clients, assignment_id: str) -> None:
    try:
        _call(clients, "DELETE", f"{assignment_id}?api-version={AUTH_API}", "delete role assignment",
              assignment_id.rsplit("/", 1)[-1])  # fmt: skip
    except NotFound:
        return


def _info(doc: Any) -> RoleAssignmentInfo:
    props = dict(doc.get("properties") or {})
    return RoleAssignmentInfo(
        id=str(doc.get("id") or ""),
        principal_id=str(props.get("principalId") or ""),
        role_definition_id=str(props.get("roleDefinitionId") or ""),
        scope=str(props.get("scope") or ""),
        description=props.get("description"),
    )

"""Container registries over ARM (`azure-mgmt-containerregistry`): the name check, the registry,
ARM's server-side image import (no Docker), the `AcrPull` assignment that lets an environment's
managed identity pull, and that identity itself.

Nothing here enables the admin user or reads a password: pulls go through a managed identity (ACA's
`registries: [{server, identity}]`). Bodies are REST-shaped dicts, as in app_bodies.py and storage.py.
"""

from __future__ import annotations

import fnmatch
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aca_gpu.azure.clients import Clients
from aca_gpu.azure.guard import ASSIGNMENT_NAMESPACE, AUTH, AUTH_API, _call, caller_object_id
from aca_gpu.azure.resources import as_json, props
from aca_gpu.azure.translate import or_none, retrying, translate_errors
from aca_gpu.errors import AcaGpuError, BadInput, NotFound, WaitTimedOut

# an import whose operation failed on its source: ACR answers InvalidParameters (UNCONFIRMED: the
# failure's wire form was not recorded) with the registry's words (`manifest unknown`)
IMPORT_SOURCE_CODES = frozenset({"InvalidParameters", "ImportSourceNotFound"})
_NOISE = re.compile(r"^Image import failed:\s*|\s*\((?:InvalidParameters|ImportSourceNotFound)\)$")
# how long one import may run: ACR copies a multi-GB image in minutes (the emulator's model: ~60 MB/s,
# so 30 GB in ~9 min); past this the import is reported still running, exit 4
IMPORT_DEADLINE_S = 3600.0
ACR_PULL = "7f951dda-4ed3-4680-a7ca-43fe172d538d"  # built-in AcrPull
ASSIGN_ACTION = "Microsoft.Authorization/roleAssignments/write"


@dataclass(frozen=True)
class RegistryInfo:
    name: str
    resource_group: str
    id: str
    location: str
    sku: str
    login_server: str
    provisioning_state: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)


def _info(obj: Any, rg: str) -> RegistryInfo:
    doc = as_json(obj)
    return RegistryInfo(
        name=str(doc.get("name", "")),
        resource_group=rg,
        id=str(doc.get("id", "")),
        location=str(doc.get("location", "")),
        sku=str((doc.get("sku") or {}).get("name") or ""),
        login_server=str(props(doc).get("loginServer") or ""),
        provisioning_state=props(doc).get("provisioningState"),
        tags={str(k): str(v) for k, v in (doc.get("tags") or {}).items()},
    )


def name_available(clients: Clients, name: str) -> tuple[bool, str]:
    """(available, ARM's reason) for a registry name: the names are global across Azure."""
    doc = as_json(
        retrying(
            "check registry name",
            name,
            lambda: clients.registry.registries.check_name_availability(
                {"name": name, "type": "Microsoft.ContainerRegistry/registries"}
            ),
        )
    )
    return bool(doc.get("nameAvailable")), str(doc.get("message") or doc.get("reason") or "")


def get_registry(clients: Clients, rg: str, name: str) -> RegistryInfo | None:
    found = or_none("read registry", name, lambda: clients.registry.registries.get(rg, name))
    return None if found is None else _info(found, rg)


def registry_body(location: str, sku: str, tags: Mapping[str, str]) -> dict[str, Any]:
    """No admin user (pulls use a managed identity), no anonymous pull."""
    return {
        "location": location,
        "tags": dict(tags),
        "sku": {"name": sku},
        "properties": {"adminUserEnabled": False, "anonymousPullEnabled": False},
    }


def put_registry(
    clients: Clients, rg: str, name: str, location: str, sku: str, tags: Mapping[str, str]
) -> RegistryInfo:
    """PUT and wait (a create is an LRO; a PUT of an existing registry updates its tags)."""

    def put() -> RegistryInfo:
        poller = clients.registry.registries.begin_create(rg, name, registry_body(location, sku, tags))
        return _info(poller.result(), rg)

    return retrying("create registry", name, put)


def delete_registry(clients: Clients, rg: str, name: str) -> None:
    with translate_errors("delete registry", name):
        clients.registry.registries.begin_delete(rg, name).result()


def import_image(
    clients: Clients, rg: str, name: str, source_registry: str, source_image: str, target: str
) -> None:
    """ARM's import: the registry copies the image server-side; waits for the copy (an LRO polled
    until it ends, empty 202s and all, or until IMPORT_DEADLINE_S passes: exit 4, the copy may still land)."""
    body = {
        "source": {"registryUri": source_registry, "sourceImage": source_image},
        "targetTags": [target],
        "mode": "Force",
    }
    try:
        with translate_errors("import image into", name):
            poller = clients.registry.registries.begin_import_image(rg, name, body)
            poller.result(timeout=IMPORT_DEADLINE_S)
            if not poller.done():
                raise WaitTimedOut(
                    f"import of {source_image} into {name}: still running after {IMPORT_DEADLINE_S:.0f} s",
                    hint="staging again follows a new import; `acagpu env show` lists what arrived",
                )
    except AcaGpuError as exc:
        if exc.code not in IMPORT_SOURCE_CODES:
            raise
        # the copy's operation failed on its source (a name or tag that does not exist, a registry
        # that refuses it): the image the user named is the thing to fix
        why = _NOISE.sub("", str(exc).split(f"{name}: ", 1)[-1]).strip() or "its operation failed"
        raise BadInput(
            f"image {source_image} from {source_registry}: registry {name} could not import it ({why})",
            code=exc.code,
            hint="check the image's name and tag, or stage without --no-inspect (it reads images first)",
        ) from None


def may_assign_roles(clients: Clients, rg: str) -> bool | None:
    """Whether the caller may write role assignments in the group (None: ARM did not say).
    Permissions_ListForResourceGroup, the spec's own scope for this read."""
    group = f"/subscriptions/{clients.subscription_id}/resourceGroups/{rg}"
    url = f"{group}{AUTH}/permissions?api-version={AUTH_API}"
    try:
        doc = _call(clients, "GET", url, "read your permissions in", rg) or {}
    except (NotFound, BadInput):
        return None
    permissions = [
        {k: [str(a) for a in entry.get(k) or []] for k in ("actions", "notActions")}
        for entry in doc.get("value") or []
    ]

    def grants(pattern: str) -> bool:
        return fnmatch.fnmatchcase(ASSIGN_ACTION.lower(), pattern.lower())

    return any(
        any(grants(a) for a in p.get("actions", [])) and not any(grants(n) for n in p.get("notActions", []))
        for p in permissions
    )


def assign_acr_pull(clients: Clients, registry_id: str, principal_id: str) -> str:
    """AcrPull for the principal on the registry alone; the assignment's name is derived from both,
    so staging twice changes nothing."""
    name = str(uuid.uuid5(ASSIGNMENT_NAMESPACE, f"{principal_id}|{registry_id.lower()}|acrpull"))
    url = f"{registry_id}{AUTH}/roleAssignments/{name}?api-version={AUTH_API}"
    role = f"/subscriptions/{clients.subscription_id}{AUTH}/roleDefinitions/{ACR_PULL}"
    body = {
        "properties": {
            "roleDefinitionId": role,
            "principalId": principal_id,
            "principalType": "ServicePrincipal",
        }
    }
    try:
        _call(clients, "PUT", url, "assign AcrPull on", registry_id.rsplit("/", 1)[-1], body)
    except AcaGpuError as exc:
        if (exc.code or "").lower() != "roleassignmentexists":
            raise
    return name


def environment_identity(clients: Clients, rg: str, environment: str) -> str:
    """The environment's system-assigned identity's principal id, turned on when it has none
    (an environment update: the identity is what pulls staged images)."""
    found = as_json(
        retrying(
            "read environment", environment, lambda: clients.apps.managed_environments.get(rg, environment)
        )
    )
    principal = str((found.get("identity") or {}).get("principalId") or "")
    if principal:
        return principal
    from azure.mgmt.appcontainers.models import ManagedEnvironment

    patch = ManagedEnvironment({"identity": {"type": "SystemAssigned"}})
    with translate_errors("turn on the managed identity of", environment):
        poller = clients.apps.managed_environments.begin_update(rg, environment, patch)
        doc = as_json(poller.result())
    return str((doc.get("identity") or {}).get("principalId") or "")


__all__ = [
    "ASSIGN_ACTION",
    "RegistryInfo",
    "assign_acr_pull",
    "caller_object_id",
    "delete_registry",
    "environment_identity",
    "get_registry",
    "import_image",
    "may_assign_roles",
    "name_available",
    "put_registry",
]

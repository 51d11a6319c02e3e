"""Managed identities of apps and jobs: a principal per system-assigned identity, and what its
containers see (IDENTITY_ENDPOINT + IDENTITY_HEADER, as ACA sets them, and the platform's trust store).

The header's secret belongs to one identity, so the token endpoint mints a token for that principal
and ARM then grants it only what its role assignments allow (providers/authorization).
"""

from __future__ import annotations

import secrets
import uuid
from typing import Any

from aca_gpu.emulator.context import Ctx
from aca_gpu.emulator.identity import IDENTITY_PATH
from aca_gpu.emulator.state import Principal


def _type(raw: dict[str, Any] | None) -> str:
    text = str((raw or {}).get("type") or "None")
    known = {"none": "None", "systemassigned": "SystemAssigned", "userassigned": "UserAssigned"}
    known["systemassigned,userassigned"] = "SystemAssigned,UserAssigned"
    return known.get(text.replace(" ", "").lower(), text)


def assign_identity(
    ctx: Ctx, raw: dict[str, Any] | None, resource_id: str, existing: dict[str, Any] | None
) -> dict[str, Any]:
    """The identity block ARM answers; a system-assigned identity keeps its principal across updates."""
    kind = _type(raw)
    old = (existing or {}).get("principalId")
    if "SystemAssigned" not in kind:
        if old:
            ctx.state.principals.pop(str(old), None)
        return {"type": kind}
    principal = ctx.state.principals.get(str(old)) if old else None
    if principal is None:
        principal = Principal(str(uuid.uuid4()), secrets.token_urlsafe(24), resource_id)
        ctx.state.principals[principal.principal_id] = principal
    return {"type": kind, "principalId": principal.principal_id, "tenantId": ctx.tenant}


def identity_env(ctx: Ctx, identity: dict[str, Any]) -> dict[str, str]:
    """Environment variables a container of a resource with this identity gets."""
    principal = ctx.state.principals.get(str(identity.get("principalId") or ""))
    if principal is None:
        return {}
    env = {"IDENTITY_ENDPOINT": ctx.endpoint + IDENTITY_PATH, "IDENTITY_HEADER": principal.secret}
    if ctx.ca_bundle:
        env["SSL_CERT_FILE"] = ctx.ca_bundle  # the emulator's CA is this platform's trust store
    return env


def principal_for_secret(ctx: Ctx, secret: str) -> Principal | None:
    for principal in ctx.state.principals.values():
        if secrets.compare_digest(principal.secret, secret):
            return principal
    return None

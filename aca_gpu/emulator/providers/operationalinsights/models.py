"""Log Analytics workspaces and their `ContainerAppConsoleLogs_CL` rows, on the shared state.

An environment whose `appLogsConfiguration` names a workspace (`destination: log-analytics`, its
`customerId`) sends every console line of its apps and jobs there. A row becomes queryable only
`log_ingestion` emulated seconds after its line was printed (timing.py): Microsoft documents a
typical ingestion latency of 20 s to 3 min; the figure the emulator uses is UNCONFIRMED. Rows
outlive the replica that printed them (that is the point of the table). A workspace goes with its
group. The shared key is made once and answered only by `sharedKeys`.
"""

from __future__ import annotations

import base64
import os
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from aca_gpu.emulator.arm import ArmError, iso_z, resource_not_found, utc_now
from aca_gpu.emulator.catalog import normalize_location
from aca_gpu.emulator.context import Ctx
from aca_gpu.emulator.providers.operationalinsights.ingest import ConsoleRow
from aca_gpu.emulator.providers.resources import models as rg_models
from aca_gpu.emulator.state import key

NS = "Microsoft.OperationalInsights"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{2,61}[A-Za-z0-9]$")
TABLE = "ContainerAppConsoleLogs_CL"
SYSTEM_TABLE = "ContainerAppSystemLogs_CL"


@dataclass
class Workspace:
    rg: str
    name: str
    location: str
    tags: dict[str, str]
    customer_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    shared_key: str = field(default_factory=lambda: base64.b64encode(os.urandom(64)).decode())
    created: datetime = field(default_factory=utc_now)
    sku: str = "PerGB2018"
    retention_days: int = 30
    rows: list[ConsoleRow] = field(default_factory=list)  # ContainerAppConsoleLogs_CL
    system_rows: list[ConsoleRow] = field(default_factory=list)  # ContainerAppSystemLogs_CL


def workspaces(ctx: Ctx) -> dict[tuple[str, str], Workspace]:
    """The subscription's workspaces, kept beside the rest of its state."""
    found: dict[tuple[str, str], Workspace] = ctx.state.log_workspaces
    return found


def _alive(ctx: Ctx, ws: Workspace) -> bool:
    return ws.rg.lower() in ctx.state.rgs  # a workspace goes with its group


def find(ctx: Ctx, rg: str, name: str) -> Workspace:
    ws = workspaces(ctx).get(key(rg, name))
    if ws is None or not _alive(ctx, ws):
        raise resource_not_found(f"{NS}/workspaces", name, rg)
    return ws


def by_customer_id(ctx: Ctx, customer_id: str) -> Workspace | None:
    for sub in (ctx.fleet or {ctx.subscription: ctx}).values():
        for ws in workspaces(sub).values():
            if ws.customer_id.lower() == customer_id.lower() and _alive(sub, ws):
                return ws
    return None


def put(ctx: Ctx, rg: str, name: str, body: dict[str, Any]) -> tuple[Workspace, bool]:
    """(the workspace, whether it was created); a second PUT updates tags, sku and retention."""
    if not NAME_RE.match(name):
        raise ArmError(
            f"Workspace name '{name}' is not valid: 4-63 letters, digits or hyphens, starting and "
            "ending with a letter or digit.",
            code="InvalidParameter",
        )
    rg_models.live_rg(ctx, rg)
    location = body.get("location")
    if not isinstance(location, str) or not location:
        raise ArmError("The 'location' property is required.", code="LocationRequired")
    props = body.get("properties") or {}
    found = workspaces(ctx).get(key(rg, name))
    created = found is None or not _alive(ctx, found)
    ws = Workspace(rg, name, normalize_location(location), {}) if created else found
    assert ws is not None
    ws.tags = {str(k): str(v) for k, v in (body.get("tags") or {}).items()}
    ws.sku = str((props.get("sku") or {}).get("name") or ws.sku)
    ws.retention_days = int(props.get("retentionInDays") or ws.retention_days)
    workspaces(ctx)[key(rg, name)] = ws
    return ws, created


def delete(ctx: Ctx, rg: str, name: str) -> bool:
    ws = workspaces(ctx).pop(key(rg, name), None)
    return ws is not None


def body(ctx: Ctx, ws: Workspace) -> dict[str, Any]:
    return {
        "id": f"/subscriptions/{ctx.subscription}/resourceGroups/{ws.rg}/providers/{NS}/workspaces/{ws.name}",
        "name": ws.name,
        "type": f"{NS}/workspaces",
        "location": ws.location,
        "tags": dict(ws.tags),
        "properties": {
            "provisioningState": "Succeeded",
            "customerId": ws.customer_id,
            "sku": {"name": ws.sku},
            "retentionInDays": ws.retention_days,
            "createdDate": iso_z(ws.created),
            "publicNetworkAccessForIngestion": "Enabled",
            "publicNetworkAccessForQuery": "Enabled",
        },
    }


def visible_rows(ctx: Ctx, ws: Workspace, table: str = TABLE) -> list[dict[str, Any]]:
    now = ctx.clock.now()
    rows = ws.system_rows if table == SYSTEM_TABLE else ws.rows
    return [row.columns for row in rows if row.visible_at <= now]

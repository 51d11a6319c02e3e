"""`/_emulator/*`: inventory (what is alive), billing (GPU-seconds per replica and run), reset, faults."""

from __future__ import annotations

from typing import Any

from aca_gpu.emulator.context import Ctx
from aca_gpu.emulator.providers.app import models as app_models


def inventory(ctx: Ctx) -> dict[str, Any]:
    s = ctx.state
    replicas = [
        {
            "name": r.name,
            "kind": r.kind,
            "owner": r.owner,
            "parent": r.parent,
            "phase": r.phase,
            "profile_type": r.profile_type,
        }
        for r in s.replicas()
        if not r.gone
    ]
    executions = [
        {"job": j.name, "name": e.name, "status": e.status}
        for j in s.jobs.values()
        for e in j.executions.values()
    ]
    doc: dict[str, Any] = {
        "subscription": ctx.subscription,
        "throttled": ctx.throttle.throttled,  # requests answered 429 by the `throttle` fault
        "resource_groups": [
            {"name": g.name, "location": g.location, "tags": g.tags, "deleting": g.deleting}
            for g in s.rgs.values()
        ],
        "environments": [
            {
                "resource_group": e.rg,
                "name": e.name,
                "location": e.location,
                "state": app_models.env_state(ctx, e),
            }
            for e in s.envs.values()
        ],
        "apps": [
            {
                "resource_group": a.rg,
                "name": a.name,
                "environment": a.env,
                "profile_type": a.profile_type,
                "deleting": a.deleting,
            }
            for a in s.apps.values()
        ],
        "jobs": [
            {
                "resource_group": j.rg,
                "name": j.name,
                "environment": j.env,
                "profile_type": j.profile_type,
                "deleting": j.deleting,
            }
            for j in s.jobs.values()
        ],
        "replicas": replicas,
        "executions": executions,
        # every role assignment below the subscription's own scope (a registry's, a queue's): Azure
        # keeps one after its resource or principal is gone, so whoever made it must delete it
        "role_assignments": [
            {
                "name": a["name"],
                "scope": a["properties"].get("scope"),
                "principal_id": a["properties"].get("principalId"),
                "description": a["properties"].get("description"),
            }
            for a in s.role_assignments.values()
            if str(a["properties"].get("scope") or "").rstrip("/").lower()
            != f"/subscriptions/{ctx.subscription}"
        ],
    }
    doc["empty"] = not any(doc[k] for k in ("resource_groups", "environments", "apps", "jobs", "replicas"))
    return doc


# the one clock every money figure is on (docs/emulator.md "Costs and clocks")
BILLING_CLOCK = (
    "wall seconds: the clock of ARM's timestamps, of Cost Management and of any client's own "
    "measure; a simulated replica's `emulated_seconds` (wall / time scale) is what its life stands "
    "for on Azure's one-speed clock, never billed; a real process (a `sh -c` line, a Podman "
    "container, the host's GPU work) lives in real seconds, so its two figures are equal"
)


def billing(ctx: Ctx) -> dict[str, Any]:
    """Each replica's billed life and GPU-seconds, on the one clock Cost Management prices
    (wall seconds), so the ledger, the bill and acagpu's own figure are the same number; the
    emulated seconds a simulated life stands for are beside it, labelled, for a reader who wants
    Azure-sized figures."""
    now = ctx.clock.now()
    rows: list[dict[str, Any]] = []
    runs: dict[str, dict[str, Any]] = {}
    for rec in ctx.state.billing:
        wall = (rec.ended_wall if rec.ended_wall is not None else now) - rec.started_wall
        emulated = wall if rec.real_time else ctx.clock.emulated(wall)
        gpu_seconds = round(wall * rec.gpus, 3)
        rows.append(
            {
                "run_id": rec.run_id,
                "kind": rec.kind,
                "resource": rec.resource,
                "parent": rec.parent,
                "replica": rec.replica,
                "profile_type": rec.profile_type,
                "location": rec.location,
                "gpus": rec.gpus,
                "lived": "real process" if rec.real_time else "simulated (scaled clock)",
                "wall_seconds": round(wall, 4),
                "seconds": round(wall, 3),
                "gpu_seconds": gpu_seconds,
                "emulated_seconds": round(emulated, 3),
                "emulated_gpu_seconds": round(emulated * rec.gpus, 3),
                "running": rec.ended_wall is None,
            }
        )
        run = runs.setdefault(
            rec.run_id or "-", {"gpu_seconds": 0.0, "emulated_gpu_seconds": 0.0, "replicas": 0}
        )
        run["gpu_seconds"] = round(run["gpu_seconds"] + gpu_seconds, 3)
        run["emulated_gpu_seconds"] = round(run["emulated_gpu_seconds"] + emulated * rec.gpus, 3)
        run["replicas"] += 1
    return {
        "time_scale": ctx.clock.scale,
        "clock": BILLING_CLOCK,
        "replicas": rows,
        "runs": runs,
        "total_gpu_seconds": round(sum(r["gpu_seconds"] for r in rows), 3),
    }

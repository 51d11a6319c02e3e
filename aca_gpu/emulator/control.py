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
    }
    doc["empty"] = not any(doc[k] for k in ("resource_groups", "environments", "apps", "jobs", "replicas"))
    return doc


def billing(ctx: Ctx) -> dict[str, Any]:
    now = ctx.clock.now()
    rows: list[dict[str, Any]] = []
    runs: dict[str, dict[str, Any]] = {}
    for rec in ctx.state.billing:
        wall = (rec.ended_wall if rec.ended_wall is not None else now) - rec.started_wall
        seconds = wall if rec.real_time else ctx.clock.emulated(wall)
        gpu_seconds = round(seconds * rec.gpus, 3)
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
                "wall_seconds": round(wall, 4),
                "seconds": round(seconds, 3),
                "gpu_seconds": gpu_seconds,
                "running": rec.ended_wall is None,
            }
        )
        run = runs.setdefault(rec.run_id or "-", {"gpu_seconds": 0.0, "replicas": 0})
        run["gpu_seconds"] = round(run["gpu_seconds"] + gpu_seconds, 3)
        run["replicas"] += 1
    return {
        "time_scale": ctx.clock.scale,
        "replicas": rows,
        "runs": runs,
        "total_gpu_seconds": round(sum(r["gpu_seconds"] for r in rows), 3),
    }

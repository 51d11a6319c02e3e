"""Find the replica or resource a data-plane path names, and check the bearer JWT opens it."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from aca_gpu.emulator.auth import TokenRejected, allows
from aca_gpu.emulator.context import Ctx, Params
from aca_gpu.emulator.state import Replica, key


@dataclass
class Target:
    replica: Replica
    container: str
    revision: str


def _authorize(ctx: Ctx, req: web.Request, p: Params, *, app: str | None, environment: str | None) -> None:
    try:
        claims = ctx.minter.verify(req.headers.get("Authorization"))
    except TokenRejected as exc:
        raise web.HTTPUnauthorized(text=f"Unauthorized: {exc}") from exc
    if p["sub"].lower() != ctx.subscription.lower() or not allows(
        claims, subscription=ctx.subscription, resource_group=p["rg"], app=app, environment=environment
    ):
        raise web.HTTPUnauthorized(text="Unauthorized: token is not valid for this resource")


def replica_target(ctx: Ctx, req: web.Request, p: Params) -> Target:
    if "job" in p:
        job = ctx.state.jobs.get(key(p["rg"], p["job"]))
        _authorize(ctx, req, p, app=job.name if job else p["job"], environment=job.env if job else None)
        ex = job.executions.get(p["execution"]) if job else None
        rep = ex.replicas.get(p["replica"]) if ex else None
    else:
        app = ctx.state.apps.get(key(p["rg"], p["app"]))
        _authorize(ctx, req, p, app=app.name if app else p["app"], environment=app.env if app else None)
        rev = app.revisions.get(p["rev"]) if app else None
        rep = rev.replicas.get(p["replica"]) if rev else None
    if rep is None or rep.gone or p["container"] not in {s.name for s in rep.specs}:
        raise web.HTTPNotFound(text="Replica or container not found")
    return Target(rep, p["container"], rep.parent)


def event_scope(ctx: Ctx, req: web.Request, p: Params) -> tuple[str | None, str | None]:
    """(app, environment) an event stream covers; jobs' streams live under containerApps/{job} too."""
    if "env" in p:
        env = ctx.state.envs.get(key(p["rg"], p["env"]))
        _authorize(ctx, req, p, app=None, environment=env.name if env else p["env"])
        if env is None:
            raise web.HTTPNotFound(text="Environment not found")
        return None, env.name
    app = ctx.state.apps.get(key(p["rg"], p["app"]))
    job = ctx.state.jobs.get(key(p["rg"], p["app"]))
    owner = app or job
    _authorize(ctx, req, p, app=owner.name if owner else p["app"], environment=owner.env if owner else None)
    if owner is None:
        raise web.HTTPNotFound(text="Container app not found")
    return owner.name, owner.env

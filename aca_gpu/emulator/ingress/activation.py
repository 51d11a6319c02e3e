"""What ACA's HTTP ingress does between a request and a replica: wake a revision at zero, hold the
request while its replica starts, pass it on once the replica's probe answers, give up at the
ingress timeout, and let the revision scale back to zero a cooldown after the last request.

Clocks: the platform's phases (placement, pull, container create), the 240 s cut-off and the
cooldown are emulated seconds, scaled by `--time-scale`; the replica's own process (a model that
loads) runs in real seconds. docs/emulator.md says which behaviours are UNCONFIRMED.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from aca_gpu.emulator.arm import utc_now
from aca_gpu.emulator.context import Ctx
from aca_gpu.emulator.ingress import scaler
from aca_gpu.emulator.ingress.probes import StartupProbes, probe_of, probe_passes, probe_window_s
from aca_gpu.emulator.providers.app import models
from aca_gpu.emulator.state import App, Replica, Revision

# ACA's ingress gives up on a request after 240 s by default (reference aca-2026 §12)
REQUEST_TIMEOUT_S = 240.0
DEFAULT_COOLDOWN_S = 300.0  # Scale.cooldownPeriod's default
LOOK_S = 0.05  # wall seconds between looks at a held request's replica (UNCONFIRMED: ACA's own pace)
# wall seconds between probes of an app's replicas that have not answered yet, however many requests
# wait (each probe is a connection to the replica: 20 a second for a minute-long load cost CPU)
PROBE_EVERY_S = 0.1
# Wall-clock floor of the cooldown: scaled, 300 s is 1.5 wall s at 0.005 and a short cooldown a
# few ms, less than a real client's pause before it sends again; the replica its first request woke
# would be gone before the retry came, which no client on Azure sees (the clocks would meet).
COOLDOWN_FLOOR_S = 1.0
# what a held request gets at the cut-off, and a request to a stopped or deleted app (UNCONFIRMED:
# Envoy's own answers; no recording shows ACA's)
CUTOFF_STATUS, CUTOFF_TEXT = 504, "upstream request timeout"
STOPPED_STATUS, STOPPED_TEXT = 404, "Error 404 - This Container App is stopped or does not exist."


@dataclass
class Held:
    """One app's requests in flight, and the replicas whose probe answered once."""

    inflight: int = 0
    ready: set[str] = field(default_factory=set)
    woken: int = 0  # how many times a request woke the app from zero
    looked: float = 0.0  # when `settle` last probed a replica no request was waiting for
    load: dict[str, int] = field(default_factory=dict)  # requests each replica is answering now
    fewer_since: float | None = None  # since when the scale rule has wanted fewer replicas (clock)


def active_revision(app: App) -> Revision | None:
    rev = app.revisions.get(app.latest_revision)
    return rev if rev is not None and rev.active else None


def cooldown_s(rev: Revision) -> float:
    scale = rev.template.get("scale") or {}
    try:
        return float(scale.get("cooldownPeriod") or DEFAULT_COOLDOWN_S)
    except (TypeError, ValueError):
        return DEFAULT_COOLDOWN_S


def scale_in_at(ctx: Ctx, rev: Revision) -> float:
    """When the revision goes back to zero if no request comes: the cooldown from now, on the
    scaled clock, never less than COOLDOWN_FLOOR_S wall seconds."""
    return max(ctx.clock.after_seconds(cooldown_s(rev)), ctx.clock.now() + COOLDOWN_FLOOR_S)


def scales_to_zero(rev: Revision) -> bool:
    return models.desired_replicas(rev.template)[1]


def live(ctx: Ctx, app: App) -> bool:
    """The app is still there, running and not being deleted (a reset or delete replaces it)."""
    here = ctx.state.apps.get((app.rg.lower(), app.name.lower())) is app
    return here and not app.deleting and not app.stopped


class Activation:
    """The ingress's scaler for every app it fronts (one per server: apps keyed by subscription)."""

    def __init__(self) -> None:
        self._held: dict[tuple[str, str, str], Held] = {}
        self.startup = StartupProbes()

    def of(self, ctx: Ctx, app: App) -> Held:
        return self._held.setdefault((ctx.subscription, app.rg.lower(), app.name.lower()), Held())

    def forget(self, ctx: Ctx, rg: str, name: str) -> None:
        self._held.pop((ctx.subscription, rg.lower(), name.lower()), None)

    @contextlib.contextmanager
    def holding(self, ctx: Ctx, app: App) -> Iterator[Held]:
        """A request in flight keeps its revision up; the last one out starts the cooldown (emulated
        seconds: `cooldownPeriod` from the end of the last request, UNCONFIRMED: KEDA's polling
        interval on top is not added)."""
        held = self.of(ctx, app)
        held.inflight += 1
        self._pause_scale_in(app)
        rev = active_revision(app)
        if rev is not None and rev.replicas:  # from zero the wake asks for the first one
            self.scale_out(ctx, app, rev, held)
        try:
            yield held
        finally:
            held.inflight -= 1
            rev = active_revision(app)
            if held.inflight == 0 and rev is not None and scales_to_zero(rev) and rev.replicas:
                rev.scale_in_at = scale_in_at(ctx, rev)

    @staticmethod
    @contextlib.contextmanager
    def serving(held: Held, replica: Replica) -> Iterator[None]:
        """A request forwarded to `replica`: it counts toward that replica's load until answered."""
        held.load[replica.name] = held.load.get(replica.name, 0) + 1
        try:
            yield
        finally:
            held.load[replica.name] -= 1
            if not held.load[replica.name]:
                del held.load[replica.name]

    @staticmethod
    def scale_out(ctx: Ctx, app: App, rev: Revision, held: Held) -> None:
        """The HTTP rule wants more replicas than the revision has: ask for them (scaler.py)."""
        more = scaler.wanted(rev.template, held.inflight) - scaler.counted(rev)
        if held.inflight and more > 0:
            models.add_replicas(ctx, app, rev, more)

    def scale_down(self, ctx: Ctx, rev: Revision, held: Held) -> None:
        """Replicas beyond what the rule wants (at least one: going to zero is `settle`'s) go once
        fewer have been wanted for the cooldown (scaler.py: UNCONFIRMED arithmetic)."""
        keep = max(1, scaler.wanted(rev.template, held.inflight))
        if scaler.counted(rev) <= keep:
            held.fewer_since = None
            return
        if held.fewer_since is None:
            held.fewer_since = ctx.clock.now()
        elif ctx.clock.now() >= held.fewer_since + max(ctx.clock.scaled(cooldown_s(rev)), COOLDOWN_FLOOR_S):
            held.fewer_since = None
            ctx.runtime.scale_in_replicas(rev, scaler.to_remove(rev, keep, held.ready, held.load))

    @staticmethod
    def _pause_scale_in(app: App) -> None:
        rev = active_revision(app)
        if rev is not None:
            rev.scale_in_at = None

    async def settle(self, ctx: Ctx, app: App) -> None:
        """Before each tick: a revision whose replica is still loading is not scaled in by the
        cooldown; the cooldown starts once a replica answers its probe (or after the startup probe's
        window, in real seconds: the process loads on the real clock while the cooldown runs on the
        scaled one, and a cooldown scaled to milliseconds would kill every model mid-load)."""
        rev = active_revision(app)
        if rev is None or not rev.replicas:
            return
        held = self.of(ctx, app)
        await self.startup.look(ctx, app, rev, models.served_port(app), held.ready)
        live = [r for r in rev.replicas.values() if not r.gone]
        now = time.monotonic()
        if now - held.looked >= PROBE_EVERY_S:  # a replica that answers takes requests (scaled out too)
            held.looked = now
            port, path = probe_of(rev.template, models.served_port(app))
            for rep in [r for r in live if r.phase == "Running" and r.name not in held.ready]:
                if await probe_passes(rep, port, path, app.name):
                    held.ready.add(rep.name)
        self.scale_out(ctx, app, rev, held)
        self.scale_down(ctx, rev, held)
        if not scales_to_zero(rev):
            return
        if held.inflight:
            rev.scale_in_at = None
            return
        if any(r.name in held.ready for r in live):
            if rev.scale_in_at is None:
                rev.scale_in_at = scale_in_at(ctx, rev)
            return
        window = probe_window_s(rev.template)
        loading = [
            r
            for r in live
            if r.phase != "Running"
            or r.started_at is None
            or (utc_now() - r.started_at).total_seconds() < window
        ]
        if loading:
            rev.scale_in_at = None  # held until it answers or its probe's window has passed
        elif rev.scale_in_at is None:
            rev.scale_in_at = scale_in_at(ctx, rev)

    def wake(self, ctx: Ctx, app: App, rev: Revision, held: Held) -> None:
        """A request to a revision at zero replicas: the scaler asks for one (its phases follow at
        the emulator's durations: AssigningReplica, the pull, the container's start)."""
        held.woken += 1
        models.scale_revision(ctx, app, rev)
        self._pause_scale_in(app)

    async def ready_replica(self, ctx: Ctx, app: App, held: Held, deadline: float) -> Replica | None:
        """The replica to route to, waking the app if it is at zero; None at the cut-off (`deadline`,
        the clock's monotonic time) or when the app stops or goes."""
        port = models.served_port(app)
        while ctx.clock.now() < deadline:
            if not live(ctx, app):
                return None
            rev = active_revision(app)
            if rev is not None and not rev.replicas and not rev.unplaced:
                self.wake(ctx, app, rev, held)
            running = []
            for rep in list(rev.replicas.values()) if rev is not None else []:
                if rep.gone or rep.phase != "Running":
                    held.ready.discard(rep.name)
                else:
                    running.append(rep)
            ready = [r for r in running if r.name in held.ready]
            if not ready and time.monotonic() - held.looked >= PROBE_EVERY_S:  # none answered yet
                held.looked = time.monotonic()
                probe_port, path = probe_of(rev.template if rev is not None else {}, port)
                for rep in running:
                    if await probe_passes(rep, probe_port, path, app.name):
                        held.ready.add(rep.name)
                        ready.append(rep)
            if ready:  # the least busy, as a load balancer spreads requests
                return min(ready, key=lambda r: held.load.get(r.name, 0))
            await asyncio.sleep(LOOK_S)
        return None

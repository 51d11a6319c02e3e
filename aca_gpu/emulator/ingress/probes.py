"""A served replica's probes: the look the ingress makes before it routes a request to a replica,
and the startup probe as ACA runs it, with what the platform says when it fails.

ACA runs on Kubernetes, whose prober makes a startup probe's first look `initialDelaySeconds`
after the container started and one every `periodSeconds` after it; `failureThreshold` failed
looks in a row and the container is killed and restarted. ACA's system log says each failed look
as a ReplicaUnhealthy event ("startup probe failed: connection refused") and the kill as a
StoppingContainer event ("Container NAME failed startup probe, will be restarted"), both seen in
microsoft/azure-container-apps#1561 (2025-09). The looks are wall seconds: the model in the replica
loads in real seconds, whatever the emulator's time scale (docs/emulator.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aca_gpu.emulator.arm import utc_now
from aca_gpu.emulator.context import Ctx
from aca_gpu.emulator.state import App, Replica, Revision

PROBE_TIMEOUT_S = 1.0
RELAY_REFUSAL_S = 0.2  # a TCP look through a replica's relay: closed within this means refused
REFUSED = "connection refused"
# ARM's defaults for a probe that leaves them out (the API spec's ContainerAppProbe)
DEFAULT_PERIOD_S, DEFAULT_FAILURES = 10.0, 3


def _probes(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    containers = template.get("containers") or [{}]
    found = containers[0].get("probes") or []
    return {str(p.get("type") or "").lower(): p for p in found if isinstance(p, dict)}


def probe_window_s(template: dict[str, Any]) -> float:
    """How long a replica may load before its startup probe gives up: periodSeconds x
    failureThreshold of the startup probe (ACA's defaults, 10 s x 3, without one)."""
    probe = _probes(template).get("startup")
    if probe is None:
        return DEFAULT_PERIOD_S * DEFAULT_FAILURES
    period = float(probe.get("periodSeconds") or DEFAULT_PERIOD_S)
    return period * float(probe.get("failureThreshold") or DEFAULT_FAILURES)


def probe_of(template: dict[str, Any], port: int) -> tuple[int, str | None]:
    """(port, HTTP path or None for a TCP probe) the ingress waits on before it routes to a replica:
    the readiness probe, else the startup probe, else the TCP probe on the target port that ACA adds
    to an app with ingress and no probe of its own."""
    probes = _probes(template)
    for kind in ("readiness", "startup"):
        probe = probes.get(kind)
        if probe is None:
            continue
        http = probe.get("httpGet")
        if isinstance(http, dict):
            return int(http.get("port") or port), str(http.get("path") or "/")
        tcp = probe.get("tcpSocket")
        if isinstance(tcp, dict):
            return int(tcp.get("port") or port), None
    return port, None


def reach(rep: Replica, port: int) -> tuple[str | None, int]:
    """How to reach the replica's `port`: (the Unix socket into its own network (workloads/netns.py),
    or None for a TCP port on this machine's loopback; that port: the one Podman publishes it on,
    else `port` itself)."""
    for handle in rep.handles.values():
        folder = getattr(handle, "endpoint", None)
        if folder:
            return os.path.join(folder, str(port)), port
        published = getattr(handle, "published", None) or {}
        if port in published:
            return None, int(published[port])
    return None, port


async def probe_look(port: int, path: str | None, host: str, via: str | None = None) -> str | None:
    """One look, as the platform's probe makes it (a TCP connect, or a GET answered 200-399): None
    when it passes, else why not in the prober's words. `via`: the replica's own network (reach())."""
    try:
        opening = asyncio.open_unix_connection(via) if via else asyncio.open_connection("127.0.0.1", port)
        reader, writer = await asyncio.wait_for(opening, PROBE_TIMEOUT_S)
    except TimeoutError:
        return "timeout"
    except OSError:
        return REFUSED
    try:
        if path is None and via:  # the relay closes at once a connection nothing listens for inside
            try:
                closed = await asyncio.wait_for(reader.read(1), RELAY_REFUSAL_S) == b""
            except TimeoutError:
                closed = False
            return REFUSED if closed else None
        if path is None:
            return None
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), PROBE_TIMEOUT_S)
        parts = line.decode("latin-1").split()
        if len(parts) >= 2 and parts[1].isdigit():
            code = int(parts[1])
            return None if 200 <= code < 400 else f"HTTP probe failed with statuscode: {code}"
        return REFUSED if not line else "HTTP probe failed: no status line"
    except TimeoutError:
        return "timeout"
    except (OSError, UnicodeDecodeError):
        return REFUSED
    finally:
        writer.close()
        with contextlib.suppress(OSError, asyncio.CancelledError):
            await writer.wait_closed()


async def probe_passes(rep: Replica, port: int, path: str | None, host: str) -> bool:
    """Whether the replica answers its probe now; never, under the `probe` fault."""
    via, outside = reach(rep, port)
    return not rep.probe_fault and await probe_look(outside, path, host, via) is None


@dataclass(frozen=True)
class StartupProbe:
    """A startup probe as the revision's template has it."""

    port: int
    path: str | None
    period_s: float
    failures: int
    delay_s: float


def startup_probe(template: dict[str, Any], port: int) -> StartupProbe | None:
    probe = _probes(template).get("startup")
    if probe is None:
        return None
    http, tcp = probe.get("httpGet"), probe.get("tcpSocket")
    where = http if isinstance(http, dict) else tcp if isinstance(tcp, dict) else {}
    return StartupProbe(
        port=int(where.get("port") or port),
        path=str(http.get("path") or "/") if isinstance(http, dict) else None,
        period_s=float(probe.get("periodSeconds") or DEFAULT_PERIOD_S),
        failures=int(probe.get("failureThreshold") or DEFAULT_FAILURES),
        delay_s=float(probe.get("initialDelaySeconds") or 0),
    )


@dataclass
class _Looks:
    rep: Replica
    started: datetime  # the container start these looks belong to (a restart begins again)
    made: int = 0
    failed: int = 0


class StartupProbes:
    """Every served replica's startup probe, looked at from the ticker (one per server)."""

    def __init__(self) -> None:
        self._looks: dict[str, _Looks] = {}

    async def look(self, ctx: Ctx, app: App, rev: Revision, port: int, ready: set[str]) -> None:
        """The looks that are due on the revision's running replicas not yet ready: a pass makes the
        replica ready; a failure is a ReplicaUnhealthy event, and the last one a restart."""
        probe = startup_probe(rev.template, port)
        for name in [n for n, looks in self._looks.items() if looks.rep.gone]:
            del self._looks[name]
        if probe is None:
            return
        for rep in [r for r in rev.replicas.values() if not r.gone]:
            if rep.phase != "Running" or rep.started_at is None or rep.name in ready:
                continue
            looks = self._looks.get(rep.name)
            if looks is None or looks.started != rep.started_at:
                looks = self._looks[rep.name] = _Looks(rep, rep.started_at)
            since = (utc_now() - rep.started_at).total_seconds()
            if since < probe.delay_s + looks.made * probe.period_s:
                continue
            looks.made += 1
            via, outside = reach(rep, probe.port)
            why = rep.probe_fault or await probe_look(outside, probe.path, app.name, via)
            if why is None:
                ready.add(rep.name)
                rep.unhealthy = ""
                continue
            looks.failed += 1
            rep.unhealthy = why
            ctx.runtime.emit_replica(rep, "ReplicaUnhealthy", f"startup probe failed: {why}", "Warning")
            if looks.failed >= probe.failures:
                name = rep.specs[0].name if rep.specs else "main"
                ctx.runtime.emit_replica(
                    rep, "StoppingContainer", f"Container {name} failed startup probe, will be restarted"
                )
                ctx.runtime.restart_container(rep, "failed startup probe")
                del self._looks[rep.name]

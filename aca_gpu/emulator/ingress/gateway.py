"""The emulator's HTTP ingress: every container app with external ingress gets a real loopback
listener that a real client (curl, requests, a browser) reaches, and that forwards to the port its
replica's process listens on.

On ACA an app is reached at `https://<app>.<environment's default domain>`, the FQDN its ARM answer
carries. Here that name does not resolve, so each app gets its own plain-HTTP port on 127.0.0.1
(`GET /_emulator/ingress` maps each FQDN to it); the replica sees the FQDN as its `Host` and in
`X-Forwarded-Host`, as it would behind ACA's ingress.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web

from aca_gpu.emulator.context import Ctx
from aca_gpu.emulator.ingress.activation import (
    CUTOFF_STATUS,
    CUTOFF_TEXT,
    REQUEST_TIMEOUT_S,
    STOPPED_STATUS,
    STOPPED_TEXT,
    Activation,
    live,
)
from aca_gpu.emulator.ingress.probes import reach
from aca_gpu.emulator.providers.app import models
from aca_gpu.emulator.state import App, Environment

log = logging.getLogger(__name__)

# headers that belong to one connection, never passed on by a proxy (RFC 9110 §7.6.1)
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)


def fqdn_of(ctx: Ctx, app: App) -> str:
    """`<app>.<default domain>`: the name ACA gives an app with ingress (its ARM answer's `fqdn`)."""
    env: Environment | None = ctx.state.envs.get((app.env_rg.lower(), app.env.lower()))
    domain = env.default_domain if env is not None else f"{app.location}.azurecontainerapps.io"
    return f"{app.name}.{domain}"


@dataclass
class Listener:
    ctx: Ctx
    rg: str
    name: str
    fqdn: str
    server: asyncio.AbstractServer
    handler: web.Server
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


class Ingress:
    """Listeners opened and closed by `sync` (each tick) as apps with external ingress come and go."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.activation = Activation()
        self._listeners: dict[tuple[str, str, str], Listener] = {}
        self._session: aiohttp.ClientSession | None = None
        self._unix: dict[str, aiohttp.ClientSession] = {}  # a session per replica in its own network
        self._closing: set[asyncio.Task[None]] = set()

    def describe(self) -> list[dict[str, Any]]:
        """Every app's FQDN and the loopback URL that reaches it (the control route's answer)."""
        return [
            {
                "subscription": item.ctx.subscription,
                "resource_group": item.rg,
                "app": item.name,
                "fqdn": item.fqdn,
                "url": item.url,
                "woken": self.activation.of(item.ctx, app).woken
                if (app := item.ctx.state.apps.get((item.rg.lower(), item.name.lower()))) is not None
                else 0,
            }
            for item in self._listeners.values()
        ]

    async def sync(self, fleet: Iterable[Ctx]) -> None:
        wanted: dict[tuple[str, str, str], tuple[Ctx, App]] = {}
        for ctx in fleet:
            for app in list(ctx.state.apps.values()):
                if not app.deleting and models.served_port(app):
                    wanted[(ctx.subscription, app.rg.lower(), app.name.lower())] = (ctx, app)
        for gone in [k for k in self._listeners if k not in wanted]:
            item = self._listeners.pop(gone)
            self.activation.forget(item.ctx, item.rg, item.name)
            closing = asyncio.create_task(_shut(item))  # the ticker goes on meanwhile
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)
        for k, (ctx, app) in wanted.items():
            if k not in self._listeners:
                await self._open(k, ctx, app)
            await self.activation.settle(ctx, app)
        await self._forget_gone()

    async def _open(self, k: tuple[str, str, str], ctx: Ctx, app: App) -> None:
        rg, name = app.rg, app.name

        async def handle(req: web.BaseRequest) -> web.StreamResponse:
            return await self._handle(ctx, rg, name, req)

        handler = web.Server(handle, access_log=None)
        server = await asyncio.get_running_loop().create_server(handler, self.host, 0)
        port = int(server.sockets[0].getsockname()[1])
        self._listeners[k] = Listener(ctx, rg, name, fqdn_of(ctx, app), server, handler, port)

    async def close(self) -> None:
        items = list(self._listeners.values())
        self._listeners.clear()
        for item in items:
            await _shut(item)
        if self._session is not None:
            await self._session.close()
            self._session = None
        for session in self._unix.values():
            await session.close()
        self._unix.clear()

    def _client(self, via: str | None = None) -> aiohttp.ClientSession:
        """The session to a replica: this machine's loopback, or a replica's own network's socket."""
        if via is not None:
            found = self._unix.get(via)
            if found is None or found.closed:
                found = self._unix[via] = aiohttp.ClientSession(
                    connector=aiohttp.UnixConnector(path=via), auto_decompress=False
                )
            return found
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(auto_decompress=False)
        return self._session

    async def _forget_gone(self) -> None:
        """Close the sessions to replicas that are gone (their socket went with them)."""
        for via in [v for v in self._unix if not os.path.exists(v)]:
            await self._unix.pop(via).close()

    async def _handle(self, ctx: Ctx, rg: str, name: str, req: web.BaseRequest) -> web.StreamResponse:
        app = ctx.state.apps.get((rg.lower(), name.lower()))
        if app is None or app.deleting or app.stopped:
            return web.Response(status=STOPPED_STATUS, text=STOPPED_TEXT)
        cutoff = ctx.clock.after_seconds(REQUEST_TIMEOUT_S)
        with self.activation.holding(ctx, app) as held:
            replica = await self.activation.ready_replica(ctx, app, held, cutoff)
            if replica is None:
                if not live(ctx, app):
                    return web.Response(status=STOPPED_STATUS, text=STOPPED_TEXT)
                return web.Response(status=CUTOFF_STATUS, text=CUTOFF_TEXT)
            left = max(0.05, cutoff - ctx.clock.now())
            with self.activation.serving(held, replica):
                return await self._forward(ctx, app, req, left, reach(replica, models.served_port(app)))

    async def _forward(
        self, ctx: Ctx, app: App, req: web.BaseRequest, left_s: float, where: tuple[str | None, int]
    ) -> web.StreamResponse:
        """Pass the request on to the replica's port (`where`: its own network's socket, else this
        machine's loopback port: probes.reach) and stream its answer back; the answer must come
        within what is left of the ingress timeout (the cut-off's status otherwise)."""
        via, port = where
        fqdn = fqdn_of(ctx, app)
        headers = {k: v for k, v in req.headers.items() if k.lower() not in HOP_BY_HOP}
        headers.update(
            {
                "Host": fqdn,
                # documented ingress headers (learn.microsoft.com, "Ingress in Azure Container Apps")
                "X-Forwarded-For": req.remote or "127.0.0.1",
                "X-Forwarded-Proto": req.scheme,
                "X-Forwarded-Host": fqdn,
                "X-Request-Id": str(uuid.uuid4()),  # UNCONFIRMED: Envoy's, as ACA's proxy is Envoy
            }
        )
        url = f"http://127.0.0.1:{port}{req.rel_url}"
        body = await req.read()
        try:
            upstream = await self._client(via).request(
                req.method,
                url,
                headers=headers,
                data=body or None,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=5.0, sock_read=left_s),
            )
        except TimeoutError:
            return web.Response(status=CUTOFF_STATUS, text=CUTOFF_TEXT)
        except aiohttp.ClientError as exc:  # the replica closed on us: the proxy's 502
            log.info("ingress to %s: %s", app.name, exc)
            return web.Response(status=502, text="upstream connect error or disconnect/reset before headers")
        async with upstream:
            out = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for k, v in upstream.headers.items():
                if k.lower() not in HOP_BY_HOP:
                    out.headers.add(k, v)
            await out.prepare(req)
            with contextlib.suppress(aiohttp.ClientError, ConnectionResetError, TimeoutError):
                async for chunk in upstream.content.iter_any():
                    await out.write(chunk)
            await out.write_eof()
            return out


async def _shut(item: Listener) -> None:
    """Stop listening and end the app's open connections (a held request is answered no more)."""
    item.server.close()
    with contextlib.suppress(Exception):
        await item.handler.shutdown(0.5)

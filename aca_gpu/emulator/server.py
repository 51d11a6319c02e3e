"""`EmulatorServer`: ARM + ACA data plane over HTTPS on 127.0.0.1, in a background thread or the foreground.

One aiohttp app dispatches by path: `/_emulator/*` control routes, data-plane routes (exec,
log and event streams: JWT from getAuthToken), cloud metadata, the managed-identity token endpoint
(identity.py), and ARM routes (the static JWT or a minted one, api-version, provider registration,
injected faults). A ticker advances replicas, executions and deletes.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import logging
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Coroutine
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from aiohttp import web

from aca_gpu.emulator import control, versions
from aca_gpu.emulator.arm import ArmError, json_response
from aca_gpu.emulator.auth import TokenMinter
from aca_gpu.emulator.azurite import Azurite
from aca_gpu.emulator.context import ADMIN, CALLER, Ctx, Route
from aca_gpu.emulator.dataplane import files, queue_rbac, queues
from aca_gpu.emulator.dataplane.urls import ROUTES as DATA_ROUTES
from aca_gpu.emulator.faults import Faults, FaultSpecError
from aca_gpu.emulator.identity import (
    ARM_AUDIENCES,
    IDENTITY_PATH,
    STORAGE_AUDIENCES,
    ArmTokens,
    token_endpoint,
)
from aca_gpu.emulator.ingress import Ingress
from aca_gpu.emulator.loop_thread import start_loop_thread, stop_loop_thread
from aca_gpu.emulator.providers.app import keda, schedule
from aca_gpu.emulator.providers.app.exceptions import ServerError, Throttled
from aca_gpu.emulator.providers.app.identity import principal_for_secret
from aca_gpu.emulator.providers.app.urls import ROUTES as APP_ROUTES
from aca_gpu.emulator.providers.authorization import models as authz
from aca_gpu.emulator.providers.authorization.urls import ROUTES as AUTHORIZATION_ROUTES
from aca_gpu.emulator.providers.costmanagement.urls import ROUTES as COST_ROUTES
from aca_gpu.emulator.providers.graph.urls import ROUTES as GRAPH_ROUTES
from aca_gpu.emulator.providers.operationalinsights import query as logs_query
from aca_gpu.emulator.providers.operationalinsights.urls import QUERY_PREFIX
from aca_gpu.emulator.providers.operationalinsights.urls import ROUTES as LOGS_ROUTES
from aca_gpu.emulator.providers.registry import streaming as acr_streaming
from aca_gpu.emulator.providers.registry.urls import ROUTES as REGISTRY_ROUTES
from aca_gpu.emulator.providers.resources import models as rg_models
from aca_gpu.emulator.providers.resources.urls import ROUTES as RESOURCE_ROUTES
from aca_gpu.emulator.providers.storage.urls import ROUTES as STORAGE_ROUTES
from aca_gpu.emulator.pulls import PullModel
from aca_gpu.emulator.runtime import Runtime
from aca_gpu.emulator.state import State, StorageAccount
from aca_gpu.emulator.throttle import Throttle
from aca_gpu.emulator.throttle import admit as admit_request
from aca_gpu.emulator.timing import DURATION_SETS, Clock
from aca_gpu.emulator.tls import CERT_FILE, KEY_FILE, make_tls
from aca_gpu.emulator.workloads.base import Workload
from aca_gpu.emulator.writes import Writes, is_write

log = logging.getLogger(__name__)
T = TypeVar("T")

SUBSCRIPTION = "6f1d3b2a-5c4e-4a8b-9d0f-1e2a3b4c5d6e"
ARM_ROUTES: list[Route] = [
    *APP_ROUTES,
    *RESOURCE_ROUTES,
    *AUTHORIZATION_ROUTES,
    *COST_ROUTES,
    *GRAPH_ROUTES,
    *STORAGE_ROUTES,
    *REGISTRY_ROUTES,
    *LOGS_ROUTES,
]
MAX_SUBSCRIPTIONS = 64
STORAGE_KINDS = ("none", "azurite")  # who serves the Storage queue data plane (azurite.py)


def subscription_ids(count: int) -> list[str]:
    """The emulated subscriptions: the usual one first, then stable ids for the others."""
    return [SUBSCRIPTION] + [f"6f1d3b2a-5c4e-4a8b-9d0f-{n:012d}" for n in range(2, count + 1)]


TICK_S = 0.02
# a quiet emulator (nothing made, nothing being deleted, no request for QUIET_S) ticks this often
# instead, and any request wakes it at once: an idle server otherwise costs 1.4 % of a core in loop
# wake-ups alone (benchmarks/RESULTS.md), and the suite keeps one idle per worker
IDLE_TICK_S, QUIET_S = 0.25, 1.0
METADATA_OBJECT_FORM = "2022-09-01"


def _load_workload(kind: str, driver_version: str | None, workdir: Path) -> Workload:
    package = importlib.import_module("aca_gpu.emulator.workloads")
    factory = getattr(package, "make_workload", None)
    if factory is None:
        raise RuntimeError("aca_gpu.emulator.workloads provides no make_workload()")
    workload: Workload = factory(kind, driver_version=driver_version, workdir=workdir)
    return workload


class EmulatorServer:
    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        time_scale: float = 0.02,
        workload: str = "simulated",
        driver_version: str | None = None,
        faults: str | None = None,
        workdir: Path | None = None,
        registered: bool = False,
        workload_impl: Workload | None = None,
        subscriptions: int = 1,
        durations: str = "recorded",
        pulls: str | None = None,
        storage: str = "none",
    ) -> None:
        if not 1 <= subscriptions <= MAX_SUBSCRIPTIONS:
            raise ValueError(f"subscriptions must be 1..{MAX_SUBSCRIPTIONS}")
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError("the emulator listens on loopback only")
        if time_scale <= 0:
            raise ValueError("time_scale must be > 0")
        if durations not in DURATION_SETS:
            raise ValueError(f"durations must be one of {', '.join(DURATION_SETS)}")
        self.durations = durations
        if storage not in STORAGE_KINDS:
            raise ValueError(f"storage must be one of {', '.join(STORAGE_KINDS)}")
        self.storage = storage
        self.azurite: Azurite | None = None
        self.pull_model = PullModel.parse(pulls)  # ValueError names a bad parameter
        self.host, self.port = host, port
        self._own_workdir = workdir is None
        self.workdir = Path(tempfile.mkdtemp(prefix="acagpu-emulator-")) if workdir is None else workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.tokens = ArmTokens()
        self.token = self.tokens.static
        self.subscription = SUBSCRIPTION
        self.subscriptions = subscription_ids(subscriptions)
        self.endpoint = ""
        self.ca_bundle = ""
        self._workload_kind, self._driver_version = workload, driver_version
        self._workload = workload_impl
        self._faults_spec = faults
        self._time_scale = time_scale
        self._registered = registered
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._last_request = 0.0  # time.monotonic() of the last request (the ticker's quiet test)
        self._woken: asyncio.Event | None = None  # set by every request: a quiet ticker wakes at once
        self._started = threading.Event()
        self._startup_error: BaseException | None = None
        self.ctx: Ctx | None = None
        self.ingress = Ingress(host)  # apps' HTTP endpoints (emulator/ingress/)

    # ---- lifecycle ----------------------------------------------------------------------------
    def _build(self) -> Ctx:
        workload = self._workload or _load_workload(self._workload_kind, self._driver_version, self.workdir)
        self._workload = workload
        clock = Clock(self._time_scale, durations=self.durations)
        faults = Faults(self._faults_spec)
        faults.elapsed = lambda: clock.emulated(clock.now() - clock.origin_mono)
        minter = TokenMinter(audience_host=f"https://{self.host}")
        fleet: dict[str, Ctx] = {}
        directory = State()  # the tenant's: principals and custom roles, seen from every subscription
        for sub in self.subscriptions:  # one state and runtime each; clock, faults and tokens shared
            state = _with_directory(State(), directory)
            fleet[sub] = Ctx(
                state=state,
                clock=clock,
                faults=faults,
                runtime=Runtime(state, clock, workload, faults, self.pull_model),
                minter=minter,
                subscription=sub,
                registered_default=self._registered,
                tenant=self.tokens.tenant,
                fleet=fleet,
                storages=self.workdir / "storages",
            )
            self._apply_registration(fleet[sub])
        self._link_peers(fleet)
        return fleet[self.subscription]

    @staticmethod
    def _link_peers(fleet: dict[str, Ctx]) -> None:
        """Registry names are global: a pull looks in every subscription's state."""
        for ctx in fleet.values():
            ctx.runtime.peers = [c.state for c in fleet.values()]

    def _apply_registration(self, ctx: Ctx) -> None:
        if ctx.registered_default:
            ctx.state.provider("Microsoft.App").state = "Registered"

    async def _astart(self) -> None:
        self.ctx = self._build()
        ssl_ctx, ca_path = make_tls(self.workdir)
        self.ca_bundle = str(ca_path)
        self.ctx.ca_bundle = self.ca_bundle
        proxy = await self._start_queues() if self.storage == "azurite" else None
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        app.on_response_prepare.append(_drop_default_content_type)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=ssl_ctx)
        await site.start()
        server = site._server  # the bound port when port=0
        assert server is not None
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1]
        self.endpoint = f"https://{self.host}:{self.port}"
        for ctx in self.ctx.fleet.values():
            ctx.endpoint = self.endpoint
            ctx.ca_bundle = self.ca_bundle
            ctx.queues = proxy
        self._woken = asyncio.Event()
        self._ticker = asyncio.create_task(self._tick_forever())

    async def _tick_forever(self) -> None:
        while True:
            try:
                assert self.ctx is not None
                # the ingress first: a served replica still loading is kept from this tick's scale-in
                await self.ingress.sync(self.ctx.fleet.values())
                for ctx in list(self.ctx.fleet.values()):
                    await ctx.runtime.tick()
                    schedule.fire_due(ctx)
                    await keda.poll(ctx)
            except Exception:
                log.exception("emulator tick failed")
            if self._quiet():
                assert self._woken is not None
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._woken.wait(), IDLE_TICK_S)
                self._woken.clear()
            else:
                await asyncio.sleep(TICK_S)

    def _quiet(self) -> bool:
        """Nothing a tick would move: no request lately, and in no subscription an app, a job, or an
        environment or group being deleted (what exists then changes only by a request)."""
        if time.monotonic() - self._last_request < QUIET_S or self.ctx is None:
            return False
        for ctx in self.ctx.fleet.values():
            state = ctx.state
            if state.apps or state.jobs:
                return False
            if any(e.deleting for e in state.envs.values()) or any(g.deleting for g in state.rgs.values()):
                return False
        return True

    def _wake(self) -> None:
        self._last_request = time.monotonic()
        if self._woken is not None:
            self._woken.set()

    async def _start_queues(self) -> queues.QueueProxy:
        """Azurite for the queue data plane (seconds to start: off the loop), behind the proxy."""
        azurite = await asyncio.to_thread(Azurite, cert=self.workdir / CERT_FILE, key=self.workdir / KEY_FILE)
        self.azurite = azurite
        return queues.QueueProxy(
            azurite_endpoint=azurite.endpoint,
            ca_bundle=self.ca_bundle,
            storage_token=lambda: self.tokens.mint(STORAGE_AUDIENCES[0]),
            storage_caller=self.tokens.storage_caller,
            authorize=self._queue_call_allowed,
            faults=self.ctx.faults if self.ctx is not None else None,
        )

    def _queue_call_allowed(
        self, principal: str, account: StorageAccount, method: str, rest: str, query: Any
    ) -> bool:
        assert self.ctx is not None
        return queue_rbac.allows(self.ctx, self.tokens.object_id, principal, account, method, rest, query)

    async def _astop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker  # a quiet ticker's wait_for needs a turn of the loop to end
        if self.ctx is not None:
            for ctx in self.ctx.fleet.values():
                ctx.runtime.stop_all()
            if self.ctx.queues is not None:
                await self.ctx.queues.close()
        if self.azurite is not None:
            await asyncio.to_thread(self.azurite.stop)
            self.azurite = None
        await self.ingress.close()
        if self._runner is not None:
            await self._runner.cleanup()

    def _thread_main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._astart())
        except BaseException as exc:
            self._startup_error = exc
            # what did start (the app runner) is cleaned up, and the loop closed, before start()
            # goes on: a stop() racing this thread would otherwise schedule onto a closing loop
            with contextlib.suppress(Exception):
                loop.run_until_complete(self._astop())
            loop.close()
            self._started.set()
            return
        # start() returns once the loop runs, not merely once it exists: a call right after start()
        # (reset) found `is_running()` false on a busy machine and took the emulator for stopped
        loop.call_soon(self._started.set)
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(self._astop())
            loop.close()

    def start(self) -> EmulatorServer:
        if self._thread is not None and self._thread.is_alive():
            return self
        self._thread = start_loop_thread(self._thread_main, "acagpu-emulator")
        self._started.wait()
        if self._startup_error is not None:
            raise RuntimeError(f"emulator failed to start: {self._startup_error}") from self._startup_error
        return self

    def stop(self) -> None:
        stop_loop_thread(self._loop, self._thread)
        self._thread = None
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def serve_forever(self) -> None:
        """Foreground mode: returns on Ctrl-C (or SIGTERM) after stopping everything."""
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, _raise_interrupt)
        self.start()
        try:
            while self._thread is not None and self._thread.is_alive():
                self._thread.join(timeout=0.5)
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()

    def __enter__(self) -> EmulatorServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # ---- public operations (thread-safe: they run on the server's loop) -----------------------
    def client_env(self) -> dict[str, str]:
        return {
            "ACAGPU_ARM_ENDPOINT": self.endpoint,
            "ACAGPU_CA_BUNDLE": self.ca_bundle,
            "ACAGPU_TOKEN": self.token,
            "ACAGPU_SUBSCRIPTION": self.subscription,
        }

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop is None or not self._loop.is_running():
            raise RuntimeError("the emulator is not running")
        self._loop.call_soon_threadsafe(self._wake)  # a test's own look or change counts as a request
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=30)

    async def _areset(self) -> None:
        assert self.ctx is not None
        self.ctx.faults.clear()
        await self.ingress.close()  # listeners reopen for the apps of the fresh state
        directory = State()
        for ctx in self.ctx.fleet.values():
            ctx.runtime.stop_all()
            fresh = _with_directory(State(), directory)
            ctx.state = fresh
            ctx.runtime.state = fresh
            ctx.throttle = Throttle()
            ctx.writes = Writes()
            self._apply_registration(ctx)
        shutil.rmtree(self.workdir / "storages", ignore_errors=True)  # the shares' files go with the state
        self._link_peers(self.ctx.fleet)

    async def _ainventory(self, subscription: str | None = None) -> dict[str, Any]:
        return control.inventory(self._ctx_of(subscription))

    async def _aseed(self, subscription: str, groups: list[tuple[str, str, dict[str, str]]]) -> None:
        rg_models.seed_groups(self._ctx_of(subscription), groups)

    def _ctx_of(self, subscription: str | None) -> Ctx:
        assert self.ctx is not None
        found = self.ctx.fleet.get((subscription or self.subscription).lower())
        if found is None:
            raise KeyError(f"no emulated subscription {subscription}")
        return found

    async def _abilling(self) -> dict[str, Any]:
        assert self.ctx is not None
        return control.billing(self.ctx)

    async def _afaults(self, spec: str) -> None:
        assert self.ctx is not None
        self.ctx.faults.set(spec)

    def reset(self) -> None:
        self._call(self._areset())

    def inventory(self, subscription: str | None = None) -> dict[str, Any]:
        return self._call(self._ainventory(subscription))

    def seed_groups(self, subscription: str, groups: list[tuple[str, str, dict[str, str]]]) -> None:
        """Fixture set-up: (name, location, tags) groups created directly in one subscription's state."""
        self._call(self._aseed(subscription, groups))

    def billing(self) -> dict[str, Any]:
        return self._call(self._abilling())

    def set_faults(self, spec: str) -> None:
        self._call(self._afaults(spec))

    # ---- dispatch -----------------------------------------------------------------------------
    async def _dispatch(self, req: web.Request) -> web.StreamResponse:
        assert self.ctx is not None
        self._wake()
        ctx, path = self.ctx, req.path
        if path.startswith("/_emulator/"):
            return await self._control(req, path.removeprefix("/_emulator/"))
        if path.rstrip("/") == "/metadata/endpoints":
            return json_response(self._metadata(req.query.get("api-version", "")))
        if path.rstrip("/") == IDENTITY_PATH:
            return token_endpoint(self.tokens, req, self._principal_of)
        if req.method == "POST" and path.startswith(QUERY_PREFIX) and path.endswith("/query"):
            if not self._authorized(req):  # Log Analytics takes the same Entra tokens
                return _unauthorized(req)
            return await logs_query.query(ctx, req, path.removeprefix(QUERY_PREFIX).split("/", 1)[0])
        if path.startswith(acr_streaming.PREFIX):  # a registry's data plane (its host is not ours)
            return await acr_streaming.serve(ctx, req, path)
        for route in DATA_ROUTES:
            params = route.match(req.method, path)
            if params is not None:  # the subscription the path names serves it (its tokens, replicas)
                owner = ctx.fleet.get(params.get("sub", "").lower(), ctx)
                return await route.handler(owner, req, params)
        for route in ARM_ROUTES:
            params = route.match(req.method, path)
            if params is not None:
                return await self._arm(req, route, params)
        queue_path = queues.split(path)
        if queue_path is not None:  # a storage account's queues (Azurite)
            account = files.find_account(ctx, queue_path[0])
            if account is not None and ctx.queues is None:
                return queues.not_served()
            if account is not None and ctx.queues is not None:
                return await ctx.queues.serve(req, account, queue_path[1])
        if not path.lower().startswith("/subscriptions"):  # a storage account's Azure Files share
            served = await files.serve(ctx, req, self.workdir / "storages")
            if served is not None:
                return served
        if "/providers/" in path or path.lower().startswith("/subscriptions"):
            if not self._authorized(req):
                return _unauthorized(req)
            return ArmError(
                f"No HTTP resource was found that matches the request URI '{req.url}'.",
                code="InvalidResourceType",
                status=404,
            ).response()
        return web.Response(status=404, text="not found")

    def _authorized(self, req: web.Request) -> bool:
        return self.tokens.accepts(req.headers.get("Authorization"))

    def _principal_of(self, secret: str) -> str | None:
        assert self.ctx is not None
        principal = principal_for_secret(self.ctx, secret)
        return None if principal is None else principal.principal_id

    async def _arm(self, req: web.Request, route: Route, params: dict[str, str]) -> web.StreamResponse:
        assert self.ctx is not None
        caller = self.tokens.caller(req.headers.get("Authorization"))
        if caller is None:
            return _unauthorized(req)
        req[CALLER], req[ADMIN] = caller, self.tokens.object_id
        ctx = self.ctx.fleet.get(params.get("sub", self.subscription).lower(), self.ctx)
        limits: dict[str, str] = {}
        try:
            if params.get("sub", self.subscription).lower() not in self.ctx.fleet:
                raise ArmError(
                    f"The subscription '{params['sub']}' could not be found.",
                    code="SubscriptionNotFound",
                    status=404,
                )
            action = authz.action_of(req.method, req.path)
            permissions = authz.permissions_of(
                ctx, caller, self.tokens.object_id, now=ctx.clock.now(), at=req.path
            )
            if action is not None and not authz.allowed(permissions, action):
                raise authz.refuse(ctx, caller, action)
            if "sub" in params:
                limits = admit_request(ctx, req.method, caller)
            throttle = ctx.faults.fire("429", path=req.path, method=req.method)
            if throttle is not None:
                raise Throttled(throttle.param("retry_after", "1"))
            broken = ctx.faults.fire("5xx", path=req.path, method=req.method)
            if broken is not None:
                raise ServerError(int(broken.param("status", "500")))
            app = route.namespace == "Microsoft.App"
            refusal = ctx.faults.active("apiversion")
            version = req.query.get("api-version")
            if (
                refusal is not None
                and refusal.param("version", "") == version
                and ctx.faults.fire("apiversion", path=req.path, method=req.method) is not None
            ):
                where = refusal.param("region", "eastus")
                rtype = versions.app_type(route.pattern) if app else route.pattern.rsplit("/", 2)[-2]
                raise ArmError(
                    f"No registered resource provider found for location '{where}' "
                    f"and API version '{version}' for type '{rtype}'. "
                    f"The supported api-versions are '{versions.supported(route.namespace, rtype)}'.",
                    code="NoRegisteredProviderFound",
                    status=400,
                )
            versions.check(version, namespace=route.namespace or "Microsoft.Resources")
            if app and version:
                versions.check_app_type(version, versions.app_type(route.pattern), _location(ctx, params))
            versions.REQUEST_VERSION.set(version or "")
            if route.namespace is not None:
                rg_models.require_registered(ctx, route.namespace)
            resp = await route.handler(ctx, req, params)
        except ArmError as exc:
            resp = exc.response()
        if "sub" in params and is_write(req.method):
            ctx.writes.record(
                caller, req.method, req.path, _location(ctx, params), resp.status, ctx.faults.elapsed()
            )
        for name, value in limits.items():  # a live bucket's count, not the recorded constant
            resp.headers[name] = value
        # Recorded: resource and operation answers carry api-supported-versions, usages answers do not.
        versioned = not route.pattern.endswith("/usages")
        if route.namespace == "Microsoft.App" and versioned and resp.status < 400 and not resp.prepared:
            listed = versions.supported(route.namespace, versions.app_type(route.pattern))
            resp.headers.setdefault("api-supported-versions", listed)
        return resp

    async def _control(self, req: web.Request, name: str) -> web.StreamResponse:
        assert self.ctx is not None
        if not self._authorized(req):
            return _unauthorized(req)
        if name == "inventory" and req.method == "GET":
            try:
                return json_response(control.inventory(self._ctx_of(req.query.get("subscription"))))
            except KeyError as exc:
                return json_response({"error": {"code": "NotFound", "message": str(exc)}}, status=404)
        if name == "writes" and req.method == "GET":  # ARM writes per caller and region (writes.py)
            return json_response(self.ctx.writes.describe(req.query.get("caller")))
        if name == "billing" and req.method == "GET":
            return json_response(control.billing(self.ctx))
        if name == "reset" and req.method == "POST":
            await self._areset()
            return json_response({"reset": True})
        if name == "console" and req.method == "GET":
            # a job execution's console after its replica is gone: what Log Analytics keeps on Azure
            job = self.ctx.state.jobs.get((req.query.get("rg", "").lower(), req.query.get("job", "").lower()))
            ex = job.executions.get(req.query.get("execution", "")) if job else None
            if ex is None:
                return json_response(
                    {"error": {"code": "NotFound", "message": "no such execution"}}, status=404
                )
            lines = [line.text for line in ex.console]
            for rep in ex.replicas.values():
                lines += [line.text for lines_ in rep.logs.values() for line in lines_]
            return json_response({"execution": ex.name, "status": ex.status, "lines": lines})
        if name == "ingress" and req.method == "GET":  # each app's FQDN and its loopback URL
            return json_response({"apps": self.ingress.describe()})
        if name == "faults" and req.method == "GET":
            return json_response(self.ctx.faults.describe())
        if name == "faults" and req.method in ("POST", "PUT"):
            raw = (await req.read()).decode()
            spec = raw
            if raw.lstrip().startswith("{"):
                spec = str(json.loads(raw).get("spec", ""))
            try:
                self.ctx.faults.set(spec)
            except FaultSpecError as exc:
                return json_response({"error": {"code": "InvalidFaultSpec", "message": str(exc)}}, status=400)
            return json_response(self.ctx.faults.describe())
        return web.Response(status=404, text="unknown control route")

    def identity_env(self) -> dict[str, str]:
        """App Service managed-identity variables (`az login --identity`, azure-identity) for this server."""
        return {"IDENTITY_ENDPOINT": self.endpoint + IDENTITY_PATH, "IDENTITY_HEADER": self.token}

    def _metadata(self, api_version: str) -> Any:
        """Cloud metadata: from 2022-09-01 on one object for this cloud (what `az cloud register
        --endpoint-resource-manager` reads); older versions a list of clouds (ARM_CLOUD_METADATA_URL)."""
        cloud = {
            "name": "AcaGpuEmulator",
            "portal": self.endpoint + "/",
            "resourceManager": self.endpoint + "/",
            "authentication": {
                "loginEndpoint": "https://login.microsoftonline.com/",
                "audiences": list(ARM_AUDIENCES),
                "tenant": "common",
                "identityProvider": "AAD",
            },
            "graphAudience": "https://graph.windows.net/",
            "graph": "https://graph.windows.net/",
            "microsoftGraphResourceId": "https://graph.microsoft.com/",
            "suffixes": {"storage": "core.windows.net", "keyVaultDns": "vault.azure.net"},
        }
        return cloud if api_version >= METADATA_OBJECT_FORM else [cloud]


def _with_directory(state: State, directory: State) -> State:
    """`state` sharing the tenant-level parts (Entra principals, custom role definitions) of `directory`."""
    state.principals = directory.principals
    state.role_definitions = directory.role_definitions
    return state


async def _drop_default_content_type(req: web.Request, resp: web.StreamResponse) -> None:
    """Streamed answers (event streams) go out without a Content-Type, as recorded, not aiohttp's default."""
    if resp.headers.get("Content-Type") == "application/octet-stream":
        del resp.headers["Content-Type"]


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _location(ctx: Ctx, params: dict[str, str]) -> str:
    """Where ARM says a request was routed: the path's location, else its resource group's."""
    if "location" in params:
        return params["location"]
    group = ctx.state.rgs.get(params.get("rg", "").lower())
    return group.location if group is not None else "global"


def _unauthorized(req: web.Request) -> web.Response:
    header = req.headers.get("Authorization")
    if not header:
        err = ArmError(
            "Authentication failed. The 'Authorization' header is missing.",
            code="AuthenticationFailed",
            status=401,
        )
    else:
        err = ArmError("The access token is invalid.", code="InvalidAuthenticationToken", status=401)
    return err.response()

"""What every handler needs: state, clock, faults, runtime, token minter and the server's addresses."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from aca_gpu.emulator.auth import TokenMinter
from aca_gpu.emulator.dataplane.queues import QueueProxy
from aca_gpu.emulator.faults import Faults
from aca_gpu.emulator.runtime import Runtime
from aca_gpu.emulator.state import State
from aca_gpu.emulator.throttle import Throttle
from aca_gpu.emulator.timing import Clock
from aca_gpu.emulator.writes import Writes


@dataclass
class Ctx:
    state: State
    clock: Clock
    faults: Faults
    runtime: Runtime
    minter: TokenMinter
    subscription: str
    endpoint: str = ""  # https://127.0.0.1:<port>, set once listening
    tenant: str = ""  # the `tid` of the ARM tokens
    ca_bundle: str = ""  # the CA the server's certificate chains to (the containers' trust store)
    registered_default: bool = False
    # every emulated subscription by id, this one included (one dict shared by all of them)
    fleet: dict[str, Ctx] = field(default_factory=dict)
    throttle: Throttle = field(default_factory=Throttle)  # ARM's per-subscription token buckets
    storages: Path | None = None  # where the Azure Files shares' folders live (share_folders.py)
    queues: QueueProxy | None = None  # the Storage queue data plane (Azurite behind it), when started
    writes: Writes = field(default_factory=Writes)  # ARM writes per caller and region (writes.py)

    @property
    def ws_endpoint(self) -> str:
        return "wss://" + self.endpoint.removeprefix("https://")


Params = dict[str, str]
# who called an ARM route (the token's object id) and the emulator's own principal, for handlers
CALLER = web.RequestKey("acagpu_caller", str)
ADMIN = web.RequestKey("acagpu_admin", str)
Handler = Callable[[Ctx, web.Request, Params], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Route:
    method: str
    pattern: str  # "/subscriptions/{sub}/resourcegroups/{rg}" (matched case-insensitively)
    handler: Handler
    plane: str = "arm"  # arm | data
    namespace: str | None = None  # provider that must be registered ("Microsoft.App")
    regex: re.Pattern[str] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        rx = re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", self.pattern)
        object.__setattr__(self, "regex", re.compile(rx + "/?", re.IGNORECASE))

    def match(self, method: str, path: str) -> Params | None:
        if method != self.method:
            return None
        m = self.regex.fullmatch(path)
        return m.groupdict() if m else None

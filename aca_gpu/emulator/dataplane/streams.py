"""Log stream and system event stream: line-per-record HTTP responses, optionally followed.

Console lines: `output=text` gives CRI-style `<RFC3339Nano> stdout F <line>`; `output=json` gives
`{"TimeStamp": "2026-06-03T04:45:59.2214149+00:00", "Log": "F <line>"}` (the CRI flag leads `Log`: Azure
CLI 2.91.0's containerapp log code, Azure/azure-cli#33487). A line longer than the runtime's 16 KiB
limit goes out as partial (`P`) fragments and a final `F` one, as containerd writes it. A followed
stream that stays quiet sends the heartbeat `No logs since last 60 seconds` (no CRI flag) every emulated
minute and is closed by the server after three quiet minutes, as ACA does (azure-cli#33487); the text
form of the heartbeat is UNCONFIRMED.
Every console stream opens with two lines of the service's own ("Connecting to the container 'c'..."
and "Successfully Connected to container: 'c' [Revision: 'r', Replica: 'x']"), stamped when it connects.
Event lines: the recorded shape, with the two synthetic lines first.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from aiohttp import web

from aca_gpu.emulator.arm import iso_z, utc_now
from aca_gpu.emulator.context import Ctx, Params
from aca_gpu.emulator.dataplane.resolve import Target, event_scope, replica_target
from aca_gpu.emulator.state import Event, LogLine

POLL_S = 0.05
MAX_TAIL = 300
CRI_MAX_LINE = 16 * 1024  # containerd splits longer lines into partial records
HEARTBEAT = "No logs since last 60 seconds"
HEARTBEAT_EVERY_S = 60.0  # emulated seconds of silence between heartbeats
QUIET_CLOSE_HEARTBEATS = 3  # the server closes a followed stream after three quiet minutes


def _query(req: web.Request) -> tuple[bool, int, str]:
    follow = req.query.get("follow", "false").lower() == "true"
    raw_tail = req.query.get("tailLines", "20")
    try:
        tail = int(raw_tail)
    except ValueError:
        raise web.HTTPBadRequest(text=f"tailLines must be an integer between 0 and {MAX_TAIL}") from None
    if not 0 <= tail <= MAX_TAIL:
        raise web.HTTPBadRequest(text=f"tailLines must be an integer between 0 and {MAX_TAIL}")
    output = req.query.get("output", "text").lower()
    if output not in ("text", "json"):
        raise web.HTTPBadRequest(text="output must be 'text' or 'json'")
    return follow, tail, output


def _json_stamp(at: datetime) -> str:
    """`2026-06-03T04:45:59.2214149+00:00`: seven fractional digits and an offset, as ACA sends it."""
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond:06d}0+00:00"


def cri_records(text: str) -> Iterator[tuple[str, str]]:
    """(flag, piece): `P` for each 16 KiB fragment of a long line, `F` for its last piece."""
    while len(text) > CRI_MAX_LINE:
        yield "P", text[:CRI_MAX_LINE]
        text = text[CRI_MAX_LINE:]
    yield "F", text


def format_log(line: LogLine, output: str) -> bytes:
    stamp = line.at.strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"
    out: list[str] = []
    for flag, piece in cri_records(line.text):
        if output == "json":
            out.append(json.dumps({"TimeStamp": _json_stamp(line.at), "Log": f"{flag} {piece}"}))
        else:
            out.append(f"{stamp} {line.stream} {flag} {piece}")
    return ("\n".join(out) + "\n").encode()


def _short_stamp(at: datetime) -> str:
    """`2026-09-19T07:31:35.65006`: the service's own lines carry five fractional digits, no offset."""
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 10:05d}"


def format_heartbeat(at: datetime, output: str) -> bytes:
    if output == "json":  # recorded: five fractional digits, no offset, no CRI flag
        return (json.dumps({"TimeStamp": _short_stamp(at), "Log": HEARTBEAT}) + "\n").encode()
    return f"{at.strftime('%Y-%m-%dT%H:%M:%S.%f')}000Z {HEARTBEAT}\n".encode()


def connection_notices(target: Target, output: str) -> bytes:
    """The two lines every console stream opens with (seen in ACA's streams, text and json): the
    service's own, stamped when the stream connects (after the container's older lines), no CRI flag.
    A job's names its execution where an app's names its revision (the recorded job log stream)."""
    where = "Execution" if target.replica.kind == "job" else "Revision"
    texts = (
        f"Connecting to the container '{target.container}'...",
        f"Successfully Connected to container: '{target.container}' "
        f"[{where}: '{target.revision}', Replica: '{target.replica.name}']",
    )
    out = []
    for text in texts:
        stamp = _short_stamp(utc_now())
        out.append(json.dumps({"TimeStamp": stamp, "Log": text}) if output == "json" else f"{stamp}  {text}")
    return ("\n".join(out) + "\n").encode()


async def logstream(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    follow, tail, output = _query(req)
    target = replica_target(ctx, req, p)
    rep = target.replica
    if rep.started_at is None:
        # Kubernetes' answer for a container that has not started (ACA's own is UNCONFIRMED): a
        # follower that attaches early must try again until it runs
        phase = "ContainerCreating" if rep.phase in ("Creating", "Starting") else rep.phase
        raise web.HTTPBadRequest(
            text=f'container "{target.container}" in replica "{rep.name}" is waiting to start: {phase}'
        )
    resp = web.StreamResponse(status=200, headers={"Content-Type": "text/plain; charset=utf-8"})
    await resp.prepare(req)
    await resp.write(connection_notices(target, output))
    lines = rep.logs.get(target.container, [])
    drop = ctx.faults.fire("log_drop", path=rep.name)
    budget = int(drop.param("after", "1")) if drop else None
    sent = 0
    index = max(0, len(lines) - tail)
    quiet_since, heartbeats = ctx.clock.now(), 0
    try:
        while True:
            lines = rep.logs.get(target.container, [])
            while index < len(lines):
                if budget is not None and sent >= budget:
                    _abort(req)
                    return resp
                await resp.write(format_log(lines[index], output))
                index += 1
                sent += 1
                quiet_since, heartbeats = ctx.clock.now(), 0
            if not follow or rep.gone or rep.phase == "Terminated":
                break
            quiet = ctx.clock.emulated(ctx.clock.now() - quiet_since)
            if quiet >= HEARTBEAT_EVERY_S * (heartbeats + 1):
                await resp.write(format_heartbeat(utc_now(), output))
                heartbeats += 1
                if heartbeats >= QUIET_CLOSE_HEARTBEATS:
                    break  # quiet for three minutes: the server ends the stream
            await asyncio.sleep(POLL_S)
        await resp.write_eof()
    except ConnectionResetError:
        pass  # the client hung up (it saw the line it waited for): nothing left to send
    return resp


def _abort(req: web.Request) -> None:
    """Drop the connection mid-stream, as a proxy reset would."""
    if req.transport is not None:
        req.transport.abort()


def _event_json(ev: Event) -> dict[str, Any]:
    return {
        "TimeStamp": ev.at.strftime("%Y-%m-%d %H:%M:%S +0000 UTC"),
        "Type": ev.type,
        "ContainerAppName": ev.app or "",
        "RevisionName": ev.revision,
        "ReplicaName": ev.replica,
        "Msg": ev.msg,
        "Reason": ev.reason,
        "EventSource": "ContainerAppController",
        "Count": ev.count,
    }


def _synthetic(msg: str, reason: str) -> bytes:
    line = {
        "TimeStamp": iso_z(),
        "Type": "Normal",
        "ContainerAppName": None,
        "RevisionName": None,
        "ReplicaName": None,
        "Msg": msg,
        "Reason": reason,
        "EventSource": "ContainerAppController",
        "Count": 1,
    }
    return (json.dumps(line) + "\n").encode()


async def eventstream(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    follow, tail, _ = _query(req)
    app, env = event_scope(ctx, req, p)
    rg = p["rg"].lower()

    def matching() -> list[Event]:
        # an environment's stream covers its apps and jobs in other resource groups too
        if app:
            return [e for e in ctx.state.events if e.rg.lower() == rg and e.app == app]
        return [e for e in ctx.state.events if e.env_rg.lower() == rg and e.env == env]

    resp = web.StreamResponse(status=200)
    await resp.prepare(req)
    await resp.write(_synthetic("Connecting to the events collector...", "StartingGettingEvents"))
    await resp.write(_synthetic("Successfully connected to events server", "ConnectedToEventsServer"))
    events = matching()
    seen = len(events)
    for ev in events[max(0, len(events) - tail) :] if tail else []:
        await resp.write((json.dumps(_event_json(ev)) + "\n").encode())
    while follow:
        await asyncio.sleep(POLL_S)
        events = matching()
        for ev in events[seen:]:
            await resp.write((json.dumps(_event_json(ev)) + "\n").encode())
        seen = len(events)
    await resp.write_eof()
    return resp

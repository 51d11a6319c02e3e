"""The exec websocket, framed as ACA's proxy frames it (as azure-cli's containerapp `_ssh_utils.py` reads it).

Server → client: `01`+text INFO, `00 01`+stdout / `00 02`+stderr FORWARD, `02`+JSON ERROR.
Client → server: `00 00`+stdin, `00 04`+`{"Width","Height"}` resize. The socket closes when the
process ends. No echo and plain LF by default (echo/CRLF are unconfirmed on ACA); the `tty_echo`
fault turns both on so clients can be tested against either behaviour.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from typing import Any

from aiohttp import WSMsgType, web

from aca_gpu.emulator.context import Ctx, Params
from aca_gpu.emulator.dataplane.resolve import replica_target
from aca_gpu.emulator.workloads.base import ExecNotFound

INFO, ERROR = b"\x01", b"\x02"
STDOUT, STDERR = b"\x00\x01", b"\x00\x02"
STDIN, RESIZE = b"\x00\x00", b"\x00\x04"


def cluster_exec_failure(detail: str) -> bytes:
    message = (
        "Cluster exec API returns error: Internal error occurred: error executing command in container: "
        f"failed to exec in container: failed to start exec: OCI runtime exec failed: exec failed: "
        f"unable to start container process: {detail}: unknown"
    )
    return ERROR + json.dumps({"Error": {"Code": "ClusterExecFailure", "Message": message}}).encode()


async def exec_ws(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    target = replica_target(ctx, req, p)
    rep = target.replica
    ws = web.WebSocketResponse(autoping=True, max_msg_size=4 * 1024 * 1024)
    await ws.prepare(req)
    await ws.send_bytes(INFO + f"Connecting to the container '{target.container}'...".encode())
    handle = rep.handles.get(target.container)
    if rep.phase != "Running" or handle is None:
        await ws.send_bytes(cluster_exec_failure(f"container {target.container!r} is not running"))
        await ws.close()
        return ws
    await ws.send_bytes(
        INFO
        + f"Successfully connected to container: '{target.container}'. "
        f"[ Revision: '{target.revision}', Replica: '{rep.name}']".encode()
    )
    command = req.query.get("command", "sh")
    try:
        proc = await asyncio.to_thread(handle.exec, command)
    except ExecNotFound as exc:
        await ws.send_bytes(cluster_exec_failure(exc.message))
        await ws.close()
        return ws
    tty = ctx.faults.fire("tty_echo", path=rep.name) is not None
    drop = ctx.faults.fire("ws_drop", path=rep.name)
    drop_after = int(drop.param("after", "0")) if drop else None
    await _pump(req, ws, proc, tty=tty, drop_after=drop_after)
    return ws


async def _pump(
    req: web.Request,
    ws: web.WebSocketResponse,
    proc: subprocess.Popen[bytes],
    *,
    tty: bool,
    drop_after: int | None,
) -> None:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[bytes, bytes | None]] = asyncio.Queue()
    streams = [(STDOUT, proc.stdout), (STDERR, proc.stderr)]
    fds: list[int] = []
    for prefix, pipe in streams:
        if pipe is None:
            continue
        fd = pipe.fileno()
        os.set_blocking(fd, False)
        fds.append(fd)
        loop.add_reader(fd, _on_readable, fd, prefix, queue, loop)

    async def send_output() -> None:
        open_streams, frames = len(fds), 0
        while open_streams:
            prefix, data = await queue.get()
            if data is None:
                open_streams -= 1
                continue
            if drop_after is not None and frames >= drop_after:
                _kill(proc)
                if req.transport is not None:
                    req.transport.abort()
                return
            await ws.send_bytes(prefix + (data.replace(b"\n", b"\r\n") if tty else data))
            frames += 1
        await asyncio.to_thread(proc.wait)
        await ws.close()

    sender = asyncio.create_task(send_output())
    try:
        async for msg in ws:
            if msg.type != WSMsgType.BINARY:
                continue
            frame: bytes = msg.data
            if frame.startswith(STDIN):
                if tty:  # a terminal echoes what it receives before the program reads it: the echo
                    # goes first, or a busy machine can send the program's answer (and the close) first
                    await ws.send_bytes(STDOUT + frame[2:].replace(b"\n", b"\r\n"))
                await _write_stdin(proc, frame[2:])
            elif frame.startswith(RESIZE):
                _resize(frame[2:])
        await sender
    finally:
        for fd in fds:
            loop.remove_reader(fd)
        if not sender.done():
            sender.cancel()
        _kill(proc)


def _on_readable(
    fd: int, prefix: bytes, queue: asyncio.Queue[tuple[bytes, bytes | None]], loop: asyncio.AbstractEventLoop
) -> None:
    try:
        data = os.read(fd, 65536)
    except BlockingIOError:
        return
    except OSError:
        data = b""
    if data:
        queue.put_nowait((prefix, data))
    else:
        loop.remove_reader(fd)
        queue.put_nowait((prefix, None))


async def _write_stdin(proc: subprocess.Popen[bytes], data: bytes) -> None:
    if proc.stdin is None or proc.stdin.closed:
        return

    def write() -> None:
        try:
            assert proc.stdin is not None
            proc.stdin.write(data)
            proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass

    await asyncio.to_thread(write)


def _resize(payload: bytes) -> dict[str, Any] | None:
    """Accepted and ignored: pipes have no window size. Malformed payloads are ignored too."""
    try:
        size: dict[str, Any] = json.loads(payload)
    except ValueError:
        return None
    return size


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        try:
            if pipe is not None:
                pipe.close()
        except OSError:
            pass

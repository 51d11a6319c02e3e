"""run_exec over a real websocket on 127.0.0.1, with a real `sh` behind it (TTY-style echo, CRLF)."""

from __future__ import annotations

import asyncio
import subprocess
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from aca_gpu.azure import dataplane as dp

web = pytest.importorskip("aiohttp.web")
SEEN = web.AppKey("seen", list)


async def _exec_handler(request: Any) -> Any:
    ws = web.WebSocketResponse()
    await ws.prepare(request)
    request.app[SEEN].append(
        {"auth": request.headers.get("Authorization"), "command": request.query["command"]}
    )
    await ws.send_bytes(b"\x01Connecting to the container 'c'...")
    await ws.send_bytes(b"\x01Successfully connected to container: 'c'.")
    async for msg in ws:
        data: bytes = msg.data
        if data[:2] != b"\x00\x00":
            continue  # resize
        script = data[2:].decode()
        first_line = script.split("\n", 1)[0]
        await ws.send_bytes(b"\x00\x01# " + first_line.encode() + b"\r\n")  # the TTY echo
        proc = await asyncio.to_thread(subprocess.run, ["sh"], input=script, capture_output=True, text=True)
        await ws.send_bytes(b"\x00\x01" + proc.stdout.replace("\n", "\r\n").encode())
        if proc.stderr:
            await ws.send_bytes(b"\x00\x02" + proc.stderr.encode())
        break
    await ws.close()
    return ws


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    loop = asyncio.new_event_loop()
    app = web.Application()
    app[SEEN] = []
    app.router.add_get("/subscriptions/s/containers/c/exec", _exec_handler)
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = runner.addresses[0][1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"ws://127.0.0.1:{port}/subscriptions/s/containers/c/exec", app[SEEN]
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.run_until_complete(runner.cleanup())
        loop.close()


@pytest.mark.parametrize(
    ("argv", "output", "code"),
    [
        (["echo", "hello world"], "hello world\n", 0),
        (["sh", "-c", "echo out; echo err >&2; exit 3"], "out\n", 3),
        (["printf", "%s", "no-newline"], "no-newline", 0),
    ],
)
def test_exec_round_trip(
    server: tuple[str, list[dict[str, Any]]], argv: list[str], output: str, code: int
) -> None:
    url, seen = server
    nonce = dp.new_nonce()
    transcript = dp.run_exec(url, "tok", stdin=dp.shell_script(argv, nonce), nonce=nonce, timeout=20)
    assert dp.clean_transcript(transcript.stdout, nonce) == (output, code)
    assert seen[-1] == {"auth": "Bearer tok", "command": "sh"}
    if code == 3:
        assert dp.clean_stderr(transcript.stderr) == "err\n"

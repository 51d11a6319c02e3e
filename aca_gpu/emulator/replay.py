"""`acagpu emulator replay DIR`: serve a `--record` recording as a strict fake ARM + ACA data plane.

HTTPS on loopback with its own CA, like the emulator; every request is matched against the
recording (replay_script.Script); a request the recording does not have gets 400
`ReplayMismatch` and is reported. Exec websockets are played frame by frame: each frame the client
sent in the recording is awaited (and must match, modulo generated names), each frame the server
sent is sent. `GET /_replay/status` answers the running verdict (the report). Recorded Retry-After
values are answered as 0: a replay need not wait for Azure's polling advice.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from aiohttp import WSMsgType, web

from aca_gpu.emulator.loop_thread import start_loop_thread, stop_loop_thread
from aca_gpu.emulator.replay_script import Script, load
from aca_gpu.emulator.tls import make_tls

STATUS_PATH = "/_replay/status"
FRAME_WAIT_S = 30.0
REPLAY_TOKEN = "replay-token"  # any bearer is accepted: the recording holds no credentials


_SECRET = re.compile(r"<secret-\d+>")


def _usable_secrets(text: str) -> str:
    """A recorded secret's placeholder, answered as base64 of itself: a client that signs with it
    (the storage SDK's SharedKey from a listKeys answer) needs a key that decodes; the replay checks
    no signature, and the placeholder stays recognisable once decoded."""
    return _SECRET.sub(lambda m: base64.b64encode(m.group(0).encode()).decode(), text)


class ReplayServer:
    def __init__(self, folder: Path, *, host: str = "127.0.0.1", port: int = 0) -> None:
        lines, self.meta = load(folder)
        self.script = Script(lines)
        self.host, self.port = host, port
        self.workdir = Path(tempfile.mkdtemp(prefix="acagpu-replay-"))
        self.endpoint = ""
        self.ca_bundle = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None

    @property
    def subscription(self) -> str:
        return str(self.meta.get("subscription") or "00000000-0000-0000-0000-000000000000")

    def client_env(self) -> dict[str, str]:
        return {
            "ACAGPU_ARM_ENDPOINT": self.endpoint,
            "ACAGPU_CA_BUNDLE": self.ca_bundle,
            "ACAGPU_TOKEN": REPLAY_TOKEN,
            "ACAGPU_SUBSCRIPTION": self.subscription,
            "ACAGPU_POLLING_INTERVAL": "0.05",
        }

    # ---- lifecycle ----------------------------------------------------------------------------
    async def _astart(self) -> None:
        ssl_ctx, ca_path = make_tls(self.workdir)
        self.ca_bundle = str(ca_path)
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=ssl_ctx)
        await site.start()
        server = site._server
        assert server is not None
        self.port = (getattr(server, "sockets", None) or [])[0].getsockname()[1]
        self.endpoint = f"https://{self.host}:{self.port}"

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._astart())
        except BaseException as exc:
            self._error = exc
            self._started.set()
            loop.close()
            return
        self._started.set()
        try:
            loop.run_forever()
        finally:
            if self._runner is not None:
                loop.run_until_complete(self._runner.cleanup())
            loop.close()

    def start(self) -> ReplayServer:
        self._thread = start_loop_thread(self._main, "acagpu-replay")
        self._started.wait()
        if self._error is not None:
            raise RuntimeError(f"replay server failed to start: {self._error}") from self._error
        return self

    def stop(self) -> None:
        stop_loop_thread(self._loop, self._thread)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> ReplayServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- serving ------------------------------------------------------------------------------
    async def _dispatch(self, req: web.Request) -> web.StreamResponse:
        if req.path == STATUS_PATH:
            return web.json_response(self.script.report())
        websocket = req.headers.get("Upgrade", "").lower() == "websocket"
        body: Any = None
        if req.can_read_body and not websocket:
            text = await req.text()
            try:
                body = json.loads(text) if text else None
            except ValueError:
                body = text
        method = "WEBSOCKET" if websocket else req.method
        ex = self.script.match(method, req.path, req.query_string, body)
        if ex is None:
            error = {
                "code": "ReplayMismatch",
                "message": f"{req.method} {req.path_qs} is not in the recording",
            }
            return web.json_response({"error": error}, status=400)
        if websocket:
            return await self._play_socket(req, ex.line)
        return self._answer(ex.line)

    def _answer(self, line: dict[str, Any]) -> web.Response:
        headers = {k: self.script.live_text(v, self.endpoint) for k, v in line["response_headers"].items()}
        if "retry-after" in headers:
            headers["retry-after"] = "0"
        body = line.get("response_body")
        if body in ("", None):
            text = ""
        elif isinstance(body, str):
            text = body
        else:
            text = json.dumps(body)
        content_type = headers.pop("content-type", None)
        text = _usable_secrets(self.script.live_text(text, self.endpoint))
        resp = web.Response(status=int(line["status"]), text=text)
        if content_type:
            resp.headers["Content-Type"] = content_type
        resp.headers.update(headers)
        return resp

    async def _play_socket(self, req: web.Request, line: dict[str, Any]) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(req)
        for frame in line.get("frames", []):
            if frame["dir"] == "out":
                msg = await ws.receive(timeout=FRAME_WAIT_S)
                data = msg.data if msg.type == WSMsgType.BINARY else b""
                live = data[len(frame.get("head", [])) :].decode("utf-8", "replace")
                if not self.script.frame_matches(frame.get("text", ""), live):
                    self.script.mismatch(f"exec frame {live[:80]!r} != recorded {frame['text'][:80]!r}")
                    break
            elif frame.get("opcode") == "close":
                break
            elif frame.get("opcode") == "text":
                await ws.send_str(self.script.live_text(frame["text"], self.endpoint))
            else:
                text = self.script.live_text(frame.get("text", ""), self.endpoint)
                await ws.send_bytes(bytes(frame.get("head", [])) + text.encode("utf-8"))
        await ws.close()
        return ws

"""A fault-injecting HTTPS reverse proxy that sits between acagpu and its emulator.

acagpu is pointed at the proxy (`ACAGPU_ARM_ENDPOINT`, and `ACAGPU_CA_BUNDLE` = the proxy's own
trustme CA); the proxy trusts the emulator's CA upstream. Everything acagpu talks to goes through it:
ARM calls, long-running-operation polls, the exec websocket and the log/event streams. Data-plane
URLs and LRO headers that name the emulator's host:port are rewritten to the proxy's, so a client
that follows them stays behind the proxy.

Faults are rules (a JSON document: `--rules FILE`, `ACAGPU_CHAOS_RULES`, or PUT `/_chaos/rules`):

    {"seed": 7, "rules": [
      {"fault": "status", "method": "PUT", "path": "managedEnvironments/", "count": 1,
       "status": 503, "body": "html"},
      {"fault": "throttle", "path": "/resourcegroups/", "rate": 0.3, "count": 2,
       "retry_after": 2, "retry_after_format": "date"}]}

Every rule: `fault`, `method` (default any), `path` (a case-insensitive regex searched in the path),
`count` (times it fires; 0 = no limit; default 1), `rate` (probability per eligible request, drawn
from the seeded generator; default 1), `skip` (eligible requests let through first; default 0).
Faults and their parameters:

    throttle             429 + Retry-After: `retry_after` seconds, `retry_after_format` seconds|date
    status               `status` 500/502/503/504 with `body` arm|none|html; `when` before|after
                         forwarding (after: the service did the work, the client hears the error)
    reset                connection reset (RST) `when` before|after forwarding upstream
    truncate             forward, then send half the body under the full Content-Length and close
    latency              `seconds` of delay before forwarding
    ws_close             exec websocket: after `after_messages` upstream frames, `mode` close|abort
    stream_cut           log/event stream: after `after_lines` lines, half of the next one, then cut
    lro_repeat           an operation poll that has finished is answered with its InProgress answer
    empty_200 / non_json_200   a 200 with an empty / non-JSON body, `when` before|after forwarding
    not_found_after_put  a successful PUT is followed by `gets` 404 answers to GETs of that resource
    duplicate            the request is sent upstream twice (a gateway that resent it); the client
                         hears the second answer

Each fired fault is appended as one JSON line to `--log`, and listed by GET `/_chaos/events`, so a
scenario can say which faults it met. GET `/_chaos/traffic` lists every request body and answer
(stream bodies excepted), for checks that something was never sent. Requests under `/_emulator/`
pass through untouched.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import email.utils
import json
import os
import random
import re
import shutil
import socket
import ssl
import struct
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import trustme
from aiohttp import WSMsgType, web

FAULTS = (
    "throttle",
    "status",
    "reset",
    "truncate",
    "latency",
    "ws_close",
    "stream_cut",
    "lro_repeat",
    "empty_200",
    "non_json_200",
    "not_found_after_put",
    "duplicate",
)
# faults decided before the request goes upstream (unless `when` says after)
PRE = {"throttle", "status", "latency", "reset", "empty_200", "non_json_200"}
HOP = {
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "content-encoding",
    "accept-encoding",
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-extensions",
    "sec-websocket-accept",
    "sec-websocket-protocol",
}
STREAM_PATH = re.compile(r"/(logstream|eventstream)$", re.IGNORECASE)
OPERATION_PATH = re.compile(r"operation(statuses|results)/", re.IGNORECASE)
IN_PROGRESS = {"inprogress", "running", "accepted", "creating", "deleting", "updating", "notstarted"}
HTML_BODY = b"<html><head><title>502 Bad Gateway</title></head><body><h1>Bad Gateway</h1></body></html>\n"
STATUS_CODES = {
    500: "InternalServerError",
    502: "BadGateway",
    503: "ServiceUnavailable",
    504: "GatewayTimeout",
}


class RuleError(ValueError):
    """A rule document that cannot be used."""


@dataclass
class Rule:
    index: int
    fault: str
    method: str = "*"
    path: re.Pattern[str] = field(default_factory=lambda: re.compile(""))
    count: int = 1
    rate: float = 1.0
    skip: int = 0
    params: dict[str, Any] = field(default_factory=dict)
    seen: int = 0
    fired: int = 0

    @property
    def when(self) -> str:
        default = "before" if self.fault in PRE else "after"
        return str(self.params.get("when", default))

    def exhausted(self) -> bool:
        return self.count > 0 and self.fired >= self.count

    def describe(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "fault": self.fault,
            "method": self.method,
            "path": self.path.pattern,
            "count": self.count,
            "rate": self.rate,
            "skip": self.skip,
            "fired": self.fired,
            **self.params,
        }


def parse_rules(doc: Mapping[str, Any] | list[Any]) -> tuple[int, list[Rule]]:
    """Rules from their JSON form; raises RuleError naming the bad rule."""
    raw_rules = doc if isinstance(doc, list) else doc.get("rules", [])
    seed = 0 if isinstance(doc, list) else int(doc.get("seed", 0))
    rules: list[Rule] = []
    for i, raw in enumerate(raw_rules):
        if not isinstance(raw, dict) or raw.get("fault") not in FAULTS:
            raise RuleError(f"rule {i}: fault must be one of {', '.join(FAULTS)}")
        known = {"fault", "method", "path", "count", "rate", "skip"}
        try:
            rules.append(
                Rule(
                    index=i,
                    fault=raw["fault"],
                    method=str(raw.get("method", "*")).upper(),
                    path=re.compile(str(raw.get("path", "")), re.IGNORECASE),
                    count=int(raw.get("count", 1)),
                    rate=float(raw.get("rate", 1.0)),
                    skip=int(raw.get("skip", 0)),
                    params={k: v for k, v in raw.items() if k not in known},
                )
            )
        except (re.error, TypeError, ValueError) as exc:
            raise RuleError(f"rule {i}: {exc}") from exc
    return seed, rules


def arm_error(status: int, code: str, message: str, headers: Mapping[str, str] | None = None) -> web.Response:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    return web.Response(
        status=status, body=body, headers={**(headers or {}), "Content-Type": "application/json"}
    )


def _hard_reset(req: web.Request) -> None:
    """Close the client connection with an RST (SO_LINGER 0), so it reads 'connection reset by peer'."""
    transport = req.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


class _Dropped(Exception):
    """The handler cut the connection on purpose; aiohttp must not write an answer."""


class ChaosProxy:
    """The proxy; `start()` runs it on a background thread, `serve_forever()` in the foreground."""

    def __init__(
        self,
        upstream: str,
        upstream_ca: str | None,
        *,
        port: int = 0,
        rules: Mapping[str, Any] | list[Any] | None = None,
        log_path: Path | None = None,
        workdir: Path | None = None,
    ) -> None:
        self.upstream = upstream.rstrip("/")
        self.upstream_netloc = self.upstream.split("://", 1)[1]
        self.upstream_ca = upstream_ca
        self.port = port
        self._own_workdir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="acagpu-chaos-proxy-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_path
        self.events: list[dict[str, Any]] = []
        self.traffic: list[dict[str, Any]] = []  # every forwarded request and answer body (text)
        self.requests = 0
        self.endpoint = ""
        self.ca_bundle = ""
        self._lock = threading.Lock()
        self._rng = random.Random(0)
        self._rules: list[Rule] = []
        self._pending_404: dict[str, tuple[int, int]] = {}  # path -> (GETs left, rule index)
        self._last_progress: dict[str, tuple[int, dict[str, str], bytes]] = {}
        self.set_rules(rules or {"rules": []})
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    # ---- rules and the fault log --------------------------------------------------------------
    def set_rules(self, doc: Mapping[str, Any] | list[Any]) -> None:
        seed, rules = parse_rules(doc)
        with self._lock:
            self._rng = random.Random(seed)
            self._rules = rules
            self._pending_404.clear()

    def describe(self) -> dict[str, Any]:
        with self._lock:
            return {"rules": [r.describe() for r in self._rules], "requests": self.requests}

    def _record(self, rule: Rule, method: str, path: str, **extra: Any) -> None:
        event: dict[str, Any] = {"t": round(time.time(), 3), "rule": rule.index, "fault": rule.fault}
        event.update(method=method, path=path)
        event.update({k: v for k, v in rule.params.items() if k != "when"})
        event.update(extra)
        if "when" in rule.params or rule.fault in ("reset", "empty_200", "non_json_200"):
            event["when"] = rule.when
        with self._lock:
            self.events.append(event)
        if self.log_path is not None:
            with self.log_path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(event) + "\n")

    def _keep(self, method: str, path: str, body: bytes, answer: bytes) -> None:
        """The traffic record: what a test checks for things that must never be sent (secrets)."""
        entry = {
            "method": method,
            "path": path,
            "body": body.decode("utf-8", "replace"),
            "answer": answer.decode("utf-8", "replace"),
        }
        with self._lock:
            self.traffic.append(entry)

    def _pick(self, method: str, path: str, faults: set[str], when: str | None = None) -> Rule | None:
        """The first rule among `faults` that fires for this request (counts and the seeded rate)."""
        with self._lock:
            for rule in self._rules:
                if rule.fault not in faults or (when is not None and rule.when != when):
                    continue
                if rule.method not in ("*", method) or not rule.path.search(path) or rule.exhausted():
                    continue
                rule.seen += 1
                if rule.seen <= rule.skip:
                    continue
                if rule.rate < 1.0 and self._rng.random() >= rule.rate:
                    continue
                rule.fired += 1
                return rule
        return None

    # ---- lifecycle ----------------------------------------------------------------------------
    async def _astart(self) -> None:
        ca = trustme.CA(organization_name="acagpu chaos proxy")
        server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("127.0.0.1", "localhost").configure_cert(server_ctx)
        ca_path = self.workdir / "chaos-proxy-ca.pem"
        ca.cert_pem.write_to_path(str(ca_path))
        self.ca_bundle = str(ca_path)
        client_ctx = ssl.create_default_context(cafile=self.upstream_ca) if self.upstream_ca else None
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=client_ctx if client_ctx is not None else True, limit=0),
            auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
        )
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        app.on_response_prepare.append(_drop_default_content_type)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, ssl_context=server_ctx)
        await site.start()
        server = site._server
        assert server is not None
        self.port = getattr(server, "sockets", [])[0].getsockname()[1]
        self.endpoint = f"https://127.0.0.1:{self.port}"

    async def _astop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    def _thread_main(self) -> None:
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
            loop.run_until_complete(self._astop())
            loop.close()

    def start(self) -> ChaosProxy:
        self._thread = threading.Thread(target=self._thread_main, name="chaos-proxy", daemon=True)
        self._thread.start()
        self._started.wait()
        if self._error is not None:
            raise RuntimeError(f"chaos proxy failed to start: {self._error}") from self._error
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        self._thread = None
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> ChaosProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- rewriting ----------------------------------------------------------------------------
    def _rewrite(self, data: bytes) -> bytes:
        return data.replace(self.upstream_netloc.encode(), f"127.0.0.1:{self.port}".encode())

    def _headers_out(self, upstream_headers: Mapping[str, str]) -> dict[str, str]:
        mine = f"127.0.0.1:{self.port}"
        return {
            k: v.replace(self.upstream_netloc, mine)
            for k, v in upstream_headers.items()
            if k.lower() not in HOP
        }

    @staticmethod
    def _headers_up(req: web.Request) -> dict[str, str]:
        headers = {k: v for k, v in req.headers.items() if k.lower() not in HOP}
        headers["Accept-Encoding"] = "identity"
        return headers

    # ---- dispatch -----------------------------------------------------------------------------
    async def _dispatch(self, req: web.Request) -> web.StreamResponse:
        path = req.path
        if path.startswith("/_chaos/"):
            return await self._control(req, path.removeprefix("/_chaos/"))
        try:
            return await self._handle(req, path)
        except _Dropped:
            # the connection is already gone: hand aiohttp an answer it cannot send
            raise asyncio.CancelledError() from None

    async def _handle(self, req: web.Request, path: str) -> web.StreamResponse:
        method = req.method
        if path.startswith("/_emulator/"):
            return await self._forward(req, path, faults=False)
        with self._lock:
            self.requests += 1
        is_ws = req.headers.get("Upgrade", "").lower() == "websocket"
        if method == "GET" and not is_ws:
            answer = self._not_found_after_put(method, path)
            if answer is not None:
                return answer
        rule = self._pick(method, path, PRE, when="before")
        if rule is not None:
            self._record(rule, method, path)
            if rule.fault == "latency":
                await asyncio.sleep(float(rule.params.get("seconds", 2)))
            else:
                return self._pre_answer(req, rule)
        if is_ws:
            return await self._websocket(req, path)
        return await self._forward(req, path, faults=True)

    def _not_found_after_put(self, method: str, path: str) -> web.Response | None:
        key = path.lower()
        with self._lock:
            left, index = self._pending_404.get(key, (0, -1))
            if left <= 0:
                return None
            self._pending_404[key] = (left - 1, index)
            rule = self._rules[index] if 0 <= index < len(self._rules) else None
        if rule is not None:
            self._record(rule, method, path, answered=404)
        if re.search(r"/resourcegroups/[^/]+$", path, re.IGNORECASE):
            code, what = (
                "ResourceGroupNotFound",
                f"Resource group '{path.rsplit('/', 1)[1]}' could not be found.",
            )
        else:
            code, what = "ResourceNotFound", f"The Resource '{path.split('/providers/')[-1]}' was not found."
        return arm_error(404, code, what)

    def _pre_answer(self, req: web.Request, rule: Rule) -> web.StreamResponse:
        p = rule.params
        if rule.fault == "throttle":
            seconds = int(p.get("retry_after", 1))
            value = str(seconds)
            if p.get("retry_after_format") == "date":
                value = email.utils.formatdate(time.time() + seconds, usegmt=True)
            return arm_error(
                429,
                "TooManyRequests",
                "The request is being throttled as the limit has been reached for operation type - Read.",
                {"Retry-After": value},
            )
        if rule.fault == "status":
            status = int(p.get("status", 500))
            body = p.get("body", "arm")
            if body == "none":
                return web.Response(status=status)
            if body == "html":
                return web.Response(status=status, body=HTML_BODY, content_type="text/html")
            return arm_error(status, STATUS_CODES.get(status, "InternalServerError"), "Please retry later.")
        if rule.fault == "reset":
            _hard_reset(req)
            raise _Dropped()
        if rule.fault == "empty_200":
            return web.Response(status=200, body=b"", headers={"Content-Type": "application/json"})
        return web.Response(status=200, body=b"upstream request timeout", content_type="text/plain")

    # ---- plain HTTP and streams ---------------------------------------------------------------
    async def _forward(self, req: web.Request, path: str, *, faults: bool) -> web.StreamResponse:
        assert self._session is not None
        method = req.method
        body = await req.read()
        url = self.upstream + req.path_qs
        stream = method == "GET" and bool(STREAM_PATH.search(path))
        twice = self._pick(method, path, {"duplicate"}) if faults and not stream else None
        if twice is not None:
            self._record(twice, method, path)
            with contextlib.suppress(aiohttp.ClientError):
                async with self._session.request(
                    method, url, headers=self._headers_up(req), data=body or None, allow_redirects=False
                ) as first:
                    await first.read()
        try:
            up = await self._session.request(
                method,
                url,
                headers=self._headers_up(req),
                data=body or None,
                allow_redirects=False,
                # a header the client did not send would break a signature over it (Azure Files'
                # SharedKey signs Content-Type, which aiohttp adds to a body-less PUT)
                skip_auto_headers=("Content-Type",),
            )
        except aiohttp.ClientError as exc:
            return web.Response(status=502, text=f"chaos proxy: upstream unreachable: {exc}\n")
        async with up:
            headers = self._headers_out(up.headers)
            if stream and up.status == 200:
                self._keep(method, path, body, b"")
                return await self._stream(req, up, headers, path, faults)
            data = self._rewrite(await up.read())
        self._keep(method, path, body, data)
        if not faults:
            return web.Response(status=up.status, body=data, headers=headers)
        if method == "PUT" and 200 <= up.status < 300:
            rule = self._pick(method, path, {"not_found_after_put"})
            if rule is not None:
                self._record(rule, method, path, armed=True)
                with self._lock:
                    self._pending_404[path.lower()] = (int(rule.params.get("gets", 1)), rule.index)
        if OPERATION_PATH.search(path) and method == "GET":
            answer = self._lro(method, path, up.status, headers, data)
            if answer is not None:
                return answer
        after = {"reset", "truncate", "empty_200", "non_json_200", "status"}
        rule = self._pick(method, path, after, when="after")
        if rule is None:
            return web.Response(status=up.status, body=data, headers=headers)
        self._record(rule, method, path, upstream_status=up.status)
        if rule.fault == "status":
            return self._pre_answer(req, rule)
        if rule.fault == "reset":
            _hard_reset(req)
            raise _Dropped()
        if rule.fault == "empty_200":
            return web.Response(status=200, body=b"", headers={**headers, "Content-Type": "application/json"})
        if rule.fault == "non_json_200":
            return web.Response(
                status=200, body=b"<html>OK</html>", headers={**headers, "Content-Type": "text/html"}
            )
        return await self._truncate(req, up.status, headers, data)

    def _lro(
        self, method: str, path: str, status: int, headers: dict[str, str], data: bytes
    ) -> web.Response | None:
        """Remember an operation's InProgress answer; once it is done, maybe answer the old one again."""
        state = _operation_state(status, data)
        key = path.lower()
        if state == "running":
            with self._lock:
                self._last_progress[key] = (status, headers, data)
            return None
        rule = self._pick(method, path, {"lro_repeat"})
        if rule is None:
            return None
        with self._lock:
            remembered = self._last_progress.get(key)
        if remembered is None:  # finished at the first poll: make up the InProgress answer it skipped
            remembered = _synthetic_progress(status, headers, data)
        self._record(rule, method, path, upstream_status=status, replayed_status=remembered[0])
        return web.Response(status=remembered[0], body=remembered[2], headers=remembered[1])

    async def _truncate(
        self, req: web.Request, status: int, headers: dict[str, str], data: bytes
    ) -> web.StreamResponse:
        """Promise the whole body in Content-Length, send half, close: the client sees a short read."""
        if len(data) < 2:
            data = data + b" " * (2 - len(data))
        resp = web.StreamResponse(status=status, headers=headers)
        resp.content_length = len(data)
        await resp.prepare(req)
        await resp.write(data[: len(data) // 2])
        await asyncio.sleep(0.05)
        if req.transport is not None:
            req.transport.close()
        raise _Dropped()

    async def _stream(
        self,
        req: web.Request,
        up: aiohttp.ClientResponse,
        headers: dict[str, str],
        path: str,
        faults: bool,
    ) -> web.StreamResponse:
        rule = self._pick(req.method, path, {"stream_cut"}) if faults else None
        resp = web.StreamResponse(status=up.status, headers=headers)
        await resp.prepare(req)
        after = int(rule.params.get("after_lines", 1)) if rule is not None else -1
        lines = 0
        buf = b""
        async for chunk in up.content.iter_any():
            if rule is None:
                await resp.write(chunk)
                continue
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if lines >= after:
                    cut = line[: max(1, len(line) // 2)]
                    await resp.write(cut)
                    self._record(rule, req.method, path, after_lines=lines, cut_bytes=len(cut))
                    await asyncio.sleep(0.05)
                    if req.transport is not None:
                        req.transport.close()
                    raise _Dropped()
                await resp.write(line + b"\n")
                lines += 1
        if rule is not None and buf:
            await resp.write(buf)
        if rule is not None:  # the stream ended before the cut: the rule did not fire
            with self._lock:
                rule.fired -= 1
        await resp.write_eof()
        return resp

    # ---- websocket ----------------------------------------------------------------------------
    async def _websocket(self, req: web.Request, path: str) -> web.StreamResponse:
        assert self._session is not None
        protocols = [p.strip() for p in req.headers.get("Sec-WebSocket-Protocol", "").split(",") if p.strip()]
        url = self.upstream + req.path_qs
        try:
            upstream = await self._session.ws_connect(
                url, headers=self._headers_up(req), protocols=protocols, autoping=False, max_msg_size=0
            )
        except aiohttp.WSServerHandshakeError as exc:
            return web.Response(status=exc.status, text=exc.message or "")
        except aiohttp.ClientError as exc:
            return web.Response(status=502, text=f"chaos proxy: upstream unreachable: {exc}\n")
        rule = self._pick(req.method, path, {"ws_close"})
        ws = web.WebSocketResponse(protocols=protocols, autoping=False, max_msg_size=0)
        await ws.prepare(req)
        after = int(rule.params.get("after_messages", 1)) if rule is not None else -1

        async def to_upstream() -> None:
            async for msg in ws:
                if msg.type == WSMsgType.BINARY:
                    await upstream.send_bytes(msg.data)
                elif msg.type == WSMsgType.TEXT:
                    await upstream.send_str(msg.data)
                elif msg.type == WSMsgType.PING:
                    await upstream.ping(msg.data)
                elif msg.type == WSMsgType.PONG:
                    await upstream.pong(msg.data)
            await upstream.close()

        pump = asyncio.create_task(to_upstream())
        sent = 0
        try:
            async for msg in upstream:
                if rule is not None and sent >= after:
                    mode = str(rule.params.get("mode", "abort"))
                    self._record(rule, req.method, path, after_messages=sent, mode=mode)
                    if mode == "close":
                        await ws.close(code=1011, message=b"chaos: closed mid-stream")
                    else:
                        _hard_reset(req)
                    rule = None
                    break
                if msg.type == WSMsgType.BINARY:
                    await ws.send_bytes(msg.data)
                elif msg.type == WSMsgType.TEXT:
                    await ws.send_str(msg.data)
                elif msg.type == WSMsgType.PING:
                    await ws.ping(msg.data)
                elif msg.type == WSMsgType.PONG:
                    await ws.pong(msg.data)
                sent += 1
            if rule is not None:  # the socket ended before the cut: the rule did not fire
                with self._lock:
                    rule.fired -= 1
            if not ws.closed:
                code = upstream.close_code
                await ws.close(code=1000 if code in (None, 1005, 1006, 1015) else code)
        finally:
            pump.cancel()
            with contextlib.suppress(BaseException):
                await pump
            await upstream.close()
        return ws

    # ---- control ------------------------------------------------------------------------------
    async def _control(self, req: web.Request, name: str) -> web.StreamResponse:
        if name == "rules" and req.method == "GET":
            return web.json_response(self.describe())
        if name == "rules" and req.method in ("PUT", "POST"):
            try:
                self.set_rules(json.loads(await req.read() or b"{}"))
            except (RuleError, ValueError) as exc:
                return web.json_response({"error": str(exc)}, status=400)
            return web.json_response(self.describe())
        if name == "traffic" and req.method == "GET":
            with self._lock:
                return web.json_response({"traffic": list(self.traffic)})
        if name == "events" and req.method == "GET":
            with self._lock:
                return web.json_response({"events": list(self.events), "requests": self.requests})
        return web.Response(status=404, text="unknown chaos control route\n")


def _operation_state(status: int, data: bytes) -> str:
    if status == 202:
        return "running"
    if status >= 400:
        return "failed"
    try:
        doc = json.loads(data) if data else None
    except ValueError:
        return "done"
    if isinstance(doc, dict) and str(doc.get("status", "")).lower() in IN_PROGRESS:
        return "running"
    return "done"


def _synthetic_progress(
    status: int, headers: dict[str, str], data: bytes
) -> tuple[int, dict[str, str], bytes]:
    try:
        doc = json.loads(data) if data else None
    except ValueError:
        doc = None
    if isinstance(doc, dict) and "status" in doc:
        doc = {k: v for k, v in doc.items() if k not in ("endTime", "error", "properties")}
        doc["status"] = "InProgress"
        return 200, {**headers, "Content-Type": "application/json"}, json.dumps(doc).encode()
    return 202, {k: v for k, v in headers.items() if k.lower() != "content-type"} | {"Retry-After": "1"}, b""


async def _drop_default_content_type(req: web.Request, resp: web.StreamResponse) -> None:
    if resp.headers.get("Content-Type") == "application/octet-stream":
        del resp.headers["Content-Type"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Fault-injecting HTTPS proxy in front of the acagpu emulator."
    )
    parser.add_argument("--upstream", required=True, help="the emulator's endpoint, https://127.0.0.1:PORT")
    parser.add_argument("--upstream-ca", help="the emulator's CA bundle")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--rules", default=os.environ.get("ACAGPU_CHAOS_RULES"), help="JSON rule file")
    parser.add_argument("--log", type=Path, help="append every fired fault here (JSON lines)")
    parser.add_argument("--ready-file", type=Path, help="write {endpoint, ca_bundle} here once listening")
    args = parser.parse_args(argv)
    rules = json.loads(Path(args.rules).read_text()) if args.rules else None
    proxy = ChaosProxy(args.upstream, args.upstream_ca, port=args.port, rules=rules, log_path=args.log)
    proxy.start()
    info = {"endpoint": proxy.endpoint, "ca_bundle": proxy.ca_bundle, "pid": os.getpid()}
    if args.ready_file is not None:
        tmp = args.ready_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(info))
        tmp.replace(args.ready_file)
    print(json.dumps(info), flush=True)
    stop = threading.Event()
    import signal

    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    proxy.stop()


if __name__ == "__main__":
    main()

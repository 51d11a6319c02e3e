"""An incoming-webhook receiver on 127.0.0.1 that answers like Slack's (200 `ok`), keeping every
JSON body posted to it: what `--notify` and the guard's script send, seen from the other side."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Receiver:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.raw: list[str] = []
        self.url = ""
        self._lock = threading.Lock()

    def received(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.messages)


@contextmanager
def webhook() -> Iterator[Receiver]:
    receiver = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
            ok = self.headers.get("Content-Type", "").startswith("application/json")
            try:
                doc = json.loads(body)
            except ValueError:
                ok = False
            # Slack and Teams refuse a message without `text` (400 `no_text`)
            ok = ok and isinstance(doc, dict) and isinstance(doc.get("text"), str) and bool(doc["text"])
            with receiver._lock:
                receiver.raw.append(body)
                if ok:
                    receiver.messages.append(doc)
            answer = b"ok" if ok else b"no_text"
            self.send_response(200 if ok else 400)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/services/T000/B000/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True, name="webhook")
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()

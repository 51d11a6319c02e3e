"""The HTTP scale rule against the emulator, with real processes: `serve --max-replicas 2
--concurrency 1` and requests in flight at once bring a second replica, which `status` counts and
which answers requests itself (its model server listens on the same port as the first, in a network
of its own); once fewer are wanted for the cooldown, the app is back to one replica."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests
from click.testing import CliRunner

from aca_gpu.cli import cli
from aca_gpu.emulator.workloads import netns
from tests.e2e.serving import free_port

STANDIN = """
import http.server, os, sys, time
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/slow":
            time.sleep(0.5)  # a generation that takes a while (under the 1.2 s cut-off at this scale)
        body = os.environ["HOSTNAME"].encode()  # the replica's name (the sandbox sets it)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def acagpu(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, [*args, "-o", "json"] if "--" not in args else list(args))
    assert result.exit_code == 0, (result.exit_code, result.output, result.stderr)
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def replicas_of(run_id: str) -> int:
    runs = {r["run_id"]: r for r in acagpu("status")["runs"]}
    return int(runs[run_id]["served"]["replicas"] or 0)


@pytest.mark.skipif(netns.prefix() is None, reason="no network namespace here: replicas share one port")
def test_concurrent_requests_scale_a_served_app_out_to_max_replicas_and_back(
    emu: Any, tmp_path: Path
) -> None:
    script = tmp_path / "standin.py"
    script.write_text(STANDIN, encoding="utf-8")
    port = str(free_port())
    acagpu("env", "create", "lab", "--yes")
    served = acagpu(
        "serve", "--env", "lab", "--run-id", "sc1", "--port", port, "--max-replicas", "2",
        "--concurrency", "1", "--cooldown", "600", "--yes", "-o", "json",
        "python:3.12-slim", "--", "python3", str(script), port,
    )  # fmt: skip
    url, first = served["url"], requests.get(served["url"] + "/", timeout=30).text
    assert replicas_of("sc1") == 1

    with ThreadPoolExecutor(max_workers=3) as pool:  # two in flight at once, one per replica wanted
        slow = [pool.submit(requests.get, url + "/slow", timeout=60) for _ in range(2)]
        deadline = time.monotonic() + 30
        while replicas_of("sc1") < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert replicas_of("sc1") == 2  # `status` counts the second replica
        answers = {f.result().text for f in slow}
    assert answers == {first}  # both were held by the one replica that was ready

    # the second replica answers once ready: a request goes to the least busy replica
    names: set[str] = set()
    deadline = time.monotonic() + 30
    while len(names) < 2 and time.monotonic() < deadline:
        with ThreadPoolExecutor(max_workers=2) as pool:
            names |= {a.text for a in pool.map(lambda _: requests.get(url + "/slow", timeout=60), range(2))}
    assert len(names) == 2 and first in names, names  # two processes on one port, each its own network

    # fewer wanted (one request at a time) for the cooldown: back to one replica, then to zero
    deadline = time.monotonic() + 30
    while replicas_of("sc1") > 1 and time.monotonic() < deadline:
        requests.get(url + "/", timeout=30)
        time.sleep(0.3)
    assert replicas_of("sc1") <= 1
    events = [e for e in emu.ctx.state.events if e.app == "serve-sc1"]
    assert [e.reason for e in events].count("ScaledIn") >= 1
    acagpu("down", "--run-id", "sc1", "--yes")

"""Log streams as ACA sends them, read over real HTTPS: heartbeats, the quiet close, long lines as
P/F records; and acagpu's follower (aca_gpu/azure/logstream.py) reading through all of it."""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any

import requests
from azure.mgmt.appcontainers import ContainerAppsAPIClient
from azure.mgmt.resource.resources import ResourceManagementClient

from aca_gpu.azure import logstream
from aca_gpu.emulator.banner import cuda_banner
from aca_gpu.emulator.dataplane.streams import CRI_MAX_LINE, HEARTBEAT, HEARTBEAT_EVERY_S
from aca_gpu.emulator.server import EmulatorServer
from tests.emulator.helpers import EXPLORER_IMAGE, SCALE, console_lines, running_explorer, wait_for


def _explorer(aca: ContainerAppsAPIClient, arm: ResourceManagementClient, server: EmulatorServer) -> Any:
    container, token = running_explorer(aca, arm, server.subscription)
    banner = cuda_banner(EXPLORER_IMAGE, gpu=True)
    url = str(container.log_stream_endpoint)

    def lines() -> list[str]:
        resp = requests.get(
            url,
            params={"follow": "false", "tailLines": "300"},
            headers={"Authorization": f"Bearer {token}"},
            verify=server.ca_bundle,
            timeout=10,
        )
        return console_lines(resp.text.splitlines())

    wait_for(lambda: len(lines()) == len(banner), what="the banner")
    assert server.ctx is not None
    (replica,) = [r for r in server.ctx.state.replicas() if r.owner == "explorer"]
    return url, token, banner, replica.handles["explorer"]


def test_quiet_follow_gets_heartbeats_then_the_server_closes_it(
    aca: ContainerAppsAPIClient, arm: ResourceManagementClient, server: EmulatorServer
) -> None:
    url, token, _, _ = _explorer(aca, arm, server)
    started = time.monotonic()
    with requests.get(
        url,
        params={"follow": "true", "tailLines": "0", "output": "json"},
        headers={"Authorization": f"Bearer {token}"},
        verify=server.ca_bundle,
        stream=True,
        timeout=10,
    ) as resp:
        docs, opened = [], 0.0
        for raw in resp.iter_lines():
            if raw:
                docs.append(json.loads(raw))
                opened = opened or time.monotonic()  # connected: the request's own set-up is behind
    ended = time.monotonic()
    longest = (ended - started) / SCALE  # emulated seconds, from before the request was sent
    quiet = (ended - opened) / SCALE  # from the stream's first line to its close
    opening, docs = docs[:2], docs[2:]
    assert opening[0]["Log"] == "Connecting to the container 'explorer'..."
    assert re.fullmatch(
        r"Successfully Connected to container: 'explorer' "
        r"\[Revision: 'explorer--\w+', Replica: 'explorer--.+'\]",
        opening[1]["Log"],
    )
    assert [d["Log"] for d in docs] == [HEARTBEAT] * 3
    # closed after ~3 quiet minutes: never sooner, and not much later (at 0.002, 300 emulated s is
    # 0.6 wall s of slack for a busy machine's delays in delivering the last lines)
    assert longest >= 3 * HEARTBEAT_EVERY_S and quiet < 3 * HEARTBEAT_EVERY_S + 300, (longest, quiet)
    assert all("+" not in d["TimeStamp"] for d in docs)  # the heartbeat's own stamp form


def test_follower_drops_heartbeats_reconnects_and_dedups(
    aca: ContainerAppsAPIClient, arm: ResourceManagementClient, server: EmulatorServer
) -> None:
    url, token, banner, handle = _explorer(aca, arm, server)
    connects: list[int] = []

    def get(u: str, t: str, params: dict[str, Any], verify: Any, read_timeout: float) -> Any:
        connects.append(params["tailLines"])
        return requests.get(
            u,
            params=params,
            headers={"Authorization": f"Bearer {t}"},
            stream=True,
            verify=verify,
            timeout=(5, read_timeout),
        )

    def printer() -> None:
        # after the first stream was closed for quietness, the same line twice (different instants)
        wait_for(lambda: len(connects) >= 2, what="a reconnect", timeout=15)
        handle.emit("same line")
        time.sleep(0.01)
        handle.emit("same line")
        handle.emit("DONE")

    thread = threading.Thread(target=printer, daemon=True)
    thread.start()
    got = list(
        logstream.follow_lines(
            url,
            lambda: token,
            follow=True,
            tail=300,
            what="DONE",
            output="json",
            verify=server.ca_bundle,
            stop_when=lambda m: m == "DONE",
            timeout=20,
            get=get,
            sleep=lambda s: time.sleep(min(s, 0.05)),
        )
    )
    thread.join(5)
    assert got == [*banner, "same line", "same line", "DONE"]  # banner once despite 300-line replays
    assert HEARTBEAT not in got
    assert connects[0] == 300 and len(connects) >= 2


def test_long_line_arrives_as_partials_and_is_joined(
    aca: ContainerAppsAPIClient, arm: ResourceManagementClient, server: EmulatorServer
) -> None:
    url, token, _, handle = _explorer(aca, arm, server)
    long = "x" * (CRI_MAX_LINE * 2 + 10)
    handle.emit(long)
    handle.emit("after")
    assert server.ctx is not None
    (replica,) = [r for r in server.ctx.state.replicas() if r.owner == "explorer"]
    wait_for(lambda: replica.logs["explorer"][-1].text == "after", what="the lines in the log")
    for output in ("text", "json"):
        raw = requests.get(
            url,
            params={"follow": "false", "tailLines": "2", "output": output},
            headers={"Authorization": f"Bearer {token}"},
            verify=server.ca_bundle,
            timeout=10,
        ).text.splitlines()
        flags = [logstream.parse_record(line).flag for line in console_lines(raw)]
        assert flags == ["P", "P", "F", "F"], output  # three records for the long line, then "after"
        got = list(
            logstream.follow_lines(
                url, lambda: token, follow=False, tail=2, what="x", output=output, verify=server.ca_bundle
            )
        )
        assert got == [long, "after"], output

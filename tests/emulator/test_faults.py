"""Injected faults: each kind fires where faults.py says, for `count=` opportunities or at `rate=`, and a
seeded rate fires in the same pattern every time (the pattern a fresh `Faults` of that spec draws)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import requests
import websocket
from azure.mgmt.appcontainers import ContainerAppsAPIClient
from azure.mgmt.resource.resources import ResourceManagementClient

from aca_gpu.emulator.faults import Faults
from aca_gpu.emulator.server import EmulatorServer
from aca_gpu.emulator.state import key
from tests.emulator.helpers import app_body, console_lines, env_body, make_env, make_rg, wait_for

RG, ENV = "rg-acagpu-t1", "cae-acagpu-t1"
APP_API = "2024-03-01"


def expected_pattern(spec: str, kind: str, n: int, *, path: str = "", method: str = "") -> list[bool]:
    """What `n` opportunities of `kind` do under `spec`, drawn from a fresh fault set."""
    faults = Faults(spec)
    return [faults.fire(kind, path=path, method=method) is not None for _ in range(n)]


def _mixed(pattern: list[bool]) -> bool:
    return any(pattern) and not all(pattern)


# ---- the seeded draw itself ------------------------------------------------------------------------
def test_same_seed_same_pattern_other_seed_other_pattern() -> None:
    one = expected_pattern("5xx:rate=0.5;seed=7", "5xx", 32)
    assert one == expected_pattern("5xx:rate=0.5;seed=7", "5xx", 32)
    assert one != expected_pattern("5xx:rate=0.5;seed=8", "5xx", 32)
    assert _mixed(one)
    assert expected_pattern("log_drop:count=2", "log_drop", 5) == [True, True, False, False, False]
    assert all(expected_pattern("stuck", "stuck", 4))  # neither count nor rate: always


# ---- helpers ---------------------------------------------------------------------------------------
def _arm(server: EmulatorServer, method: str, path: str, body: Any = None) -> requests.Response:
    return requests.request(
        method,
        f"{server.endpoint}/subscriptions/{server.subscription}{path}",
        params={"api-version": APP_API if "Microsoft.App" in path else "2025-04-01"},
        json=body,
        headers={"Authorization": f"Bearer {server.token}"},
        verify=server.ca_bundle,
        timeout=10,
    )


def _running_app(aca: ContainerAppsAPIClient, server: EmulatorServer, name: str) -> tuple[Any, str]:
    app = aca.container_apps.begin_create_or_update(RG, name, app_body(server.subscription, RG, ENV)).result()

    def running() -> Any:
        reps = aca.container_apps_revision_replicas.list_replicas(RG, name, app.latest_revision_name).value
        return reps[0] if reps and reps[0].properties.running_state == "Running" else None

    replica = wait_for(running, what=f"{name} replica")
    return replica.properties.containers[0], aca.container_apps.get_auth_token(RG, name).token


@pytest.fixture
def explorer(aca: ContainerAppsAPIClient, arm: ResourceManagementClient, server: EmulatorServer) -> Any:
    make_rg(arm)
    make_env(aca)
    container, token = _running_app(aca, server, "explorer")
    wait_for(lambda: len(_log_lines(server, container.log_stream_endpoint, token)[0]) > 5, what="banner")
    return container, token


def _log_lines(server: EmulatorServer, url: str, token: str) -> tuple[list[str], bool]:
    """(container lines received, whether the stream ended cleanly)."""
    lines: list[str] = []
    with requests.get(
        url,
        params={"follow": "false", "tailLines": "300"},
        headers={"Authorization": f"Bearer {token}"},
        verify=server.ca_bundle,
        timeout=10,
        stream=True,
    ) as resp:
        assert resp.status_code == 200
        try:
            for raw in resp.iter_lines():
                lines.append(raw.decode())
        except requests.exceptions.RequestException:
            return console_lines(lines), False
    return console_lines(lines), True


def _exec_stdout(server: EmulatorServer, endpoint: str, token: str, stdin: bytes) -> tuple[list[bytes], bool]:
    """(stdout frames, whether the socket closed with a close frame rather than a dropped connection)."""
    ws = websocket.create_connection(
        f"{endpoint}?command=sh",
        header=[f"Authorization: Bearer {token}"],
        sslopt={"ca_certs": server.ca_bundle},
        timeout=10,
    )
    ws.send_binary(b"\x00\x00" + stdin)
    frames: list[bytes] = []
    while True:
        try:
            opcode, data = ws.recv_data(control_frame=True)
        except (websocket.WebSocketConnectionClosedException, ConnectionError):
            return frames, False
        if opcode == websocket.ABNF.OPCODE_CLOSE:
            return frames, True
        if data[:2] == b"\x00\x01":
            frames.append(data[2:])


# ---- log_drop -----------------------------------------------------------------------------------------
def test_log_drop_cuts_the_stream_after_n_lines_for_count_streams(
    server: EmulatorServer, explorer: Any
) -> None:
    container, token = explorer
    full, clean = _log_lines(server, container.log_stream_endpoint, token)
    assert clean and len(full) > 5
    server.set_faults("log_drop:count=1,after=3")
    cut, clean = _log_lines(server, container.log_stream_endpoint, token)
    assert not clean and cut == full[:3]
    again, clean = _log_lines(server, container.log_stream_endpoint, token)
    assert clean and again == full  # the count is spent


def test_log_drop_rate_is_seeded(server: EmulatorServer, explorer: Any) -> None:
    container, token = explorer
    spec = "log_drop:rate=0.5,after=0;seed=3"
    want = expected_pattern(spec, "log_drop", 8)
    assert _mixed(want)
    for _ in range(2):  # applying the spec again restarts the same draw
        server.set_faults(spec)
        got = [not _log_lines(server, container.log_stream_endpoint, token)[1] for _ in range(8)]
        assert got == want


# ---- ws_drop ------------------------------------------------------------------------------------------
def test_ws_drop_mid_output(server: EmulatorServer, explorer: Any) -> None:
    container, token = explorer
    script = b"echo one; sleep 0.5; echo two; sleep 0.5; echo three; exit\n"
    frames, clean = _exec_stdout(server, container.exec_endpoint, token, script)
    assert clean and b"".join(frames) == b"one\ntwo\nthree\n"
    server.set_faults("ws_drop:count=1,after=1")
    frames, clean = _exec_stdout(server, container.exec_endpoint, token, script)
    # one frame out, then the connection is gone (a busy machine may put two lines in that frame)
    assert not clean and len(frames) == 1 and frames[0].startswith(b"one\n"), frames
    assert b"three" not in frames[0], frames
    frames, clean = _exec_stdout(server, container.exec_endpoint, token, script)
    assert clean and b"".join(frames) == b"one\ntwo\nthree\n"


def test_ws_drop_rate_is_seeded(server: EmulatorServer, explorer: Any) -> None:
    container, token = explorer
    spec = "ws_drop:rate=0.5;seed=6"
    want = expected_pattern(spec, "ws_drop", 6)
    assert _mixed(want)
    server.set_faults(spec)
    got = [not _exec_stdout(server, container.exec_endpoint, token, b"echo hi; exit\n")[1] for _ in range(6)]
    assert got == want


# ---- 5xx on one method ---------------------------------------------------------------------------------
def test_5xx_on_one_method_for_count_calls(server: EmulatorServer) -> None:
    server.set_faults("5xx:method=PUT,status=503,count=2")
    path = "/resourcegroups/rg-faults"
    statuses = []
    for _ in range(3):
        put = _arm(server, "PUT", path, {"location": "eastus"})
        statuses.append(put.status_code)
        if put.status_code == 503:
            assert put.json()["error"]["code"] == "ServiceUnavailable"
        assert _arm(server, "GET", "/resourcegroups").status_code == 200  # other methods pass
    assert statuses == [503, 503, 201]


def test_5xx_match_and_rate_are_seeded(server: EmulatorServer) -> None:
    spec = "5xx:method=GET,match=resourcegroups/rg-x,rate=0.5;seed=11"
    want = expected_pattern(spec, "5xx", 12, path="/subscriptions/s/resourcegroups/rg-x", method="GET")
    assert _mixed(want)
    assert _arm(server, "PUT", "/resourcegroups/rg-x", {"location": "eastus"}).status_code == 201
    for _ in range(2):
        server.set_faults(spec)
        got = []
        for _ in range(12):
            assert _arm(server, "GET", "/resourcegroups").status_code == 200  # not matched: no draw
            got.append(_arm(server, "GET", "/resourcegroups/rg-x").status_code == 500)
        assert got == want


# ---- stuck ----------------------------------------------------------------------------------------------
def _events(server: EmulatorServer, aca: ContainerAppsAPIClient, app: str) -> list[dict[str, Any]]:
    url = aca.container_apps.get(RG, app).event_stream_endpoint
    token = aca.container_apps.get_auth_token(RG, app).token
    resp = requests.get(
        url,
        params={"tailLines": "300"},
        headers={"Authorization": f"Bearer {token}"},
        verify=server.ca_bundle,
        timeout=10,
    )
    return [json.loads(line) for line in resp.text.splitlines()][2:]


def test_stuck_replica_stays_assigning_for_count_replicas(
    aca: ContainerAppsAPIClient, arm: ResourceManagementClient, server: EmulatorServer
) -> None:
    make_rg(arm)
    make_env(aca)
    server.set_faults("stuck:count=1")
    body = app_body(server.subscription, RG, ENV)
    aca.container_apps.begin_create_or_update(RG, "stuck", body).result()
    _running_app(aca, server, "free")  # the count is spent: this one starts
    time.sleep(0.2)
    stuck = aca.container_apps.get(RG, "stuck")
    rep = aca.container_apps_revision_replicas.list_replicas(RG, "stuck", stuck.latest_revision_name).value[0]
    assert rep.properties.running_state == "NotRunning"
    assert rep.properties.running_state_details == "AssigningReplica"
    stuck_reasons = [e["Reason"] for e in _events(server, aca, "stuck")]
    free_reasons = [e["Reason"] for e in _events(server, aca, "free")]
    assert "AssigningReplica" in stuck_reasons and "PullingImage" not in stuck_reasons
    assert stuck_reasons[-1] == "AssigningReplica"
    assert {"AssigningReplica", "PullingImage", "ContainerStarted"} <= set(free_reasons)
    assert server.ctx is not None and server.ctx.faults.describe()["faults"][0]["fired"] == 1


def test_stuck_rate_is_seeded(
    aca: ContainerAppsAPIClient, arm: ResourceManagementClient, server: EmulatorServer
) -> None:
    make_rg(arm)
    make_env(aca)
    spec = "stuck:rate=0.5;seed=2"
    want = expected_pattern(spec, "stuck", 6)
    assert _mixed(want)
    server.set_faults(spec)
    names = [f"app{i}" for i in range(6)]
    for name in names:  # one replica each, created in order: one draw each
        aca.container_apps.begin_create_or_update(RG, name, app_body(server.subscription, RG, ENV)).result()
    time.sleep(0.4)  # long enough for every free replica to have left AssigningReplica
    got = []
    for name in names:
        rev = aca.container_apps.get(RG, name).latest_revision_name
        rep = aca.container_apps_revision_replicas.list_replicas(RG, name, rev).value[0]
        got.append(rep.properties.running_state_details == "AssigningReplica")
    assert got == want


# ---- slow_delete ------------------------------------------------------------------------------------------
def _make_envs(aca: ContainerAppsAPIClient, names: list[str]) -> None:
    pollers = [aca.managed_environments.begin_create_or_update(RG, n, env_body()) for n in names]
    for poller in pollers:
        poller.result()


def _delete_seconds(server: EmulatorServer, name: str, sent: tuple[float, float]) -> tuple[float, float]:
    """How long (emulated seconds) the environment's delete was given, read from its scheduled end:
    at least from the answer to the DELETE, at most from its question (`sent`, the emulator's clock
    before and after it). Read against `now`, a busy machine's pause before the read shortened it."""
    assert server.ctx is not None
    env = server.ctx.state.envs[key(RG, name)]
    assert env.delete_done_at is not None
    before, after = sent
    return server.ctx.clock.emulated(env.delete_done_at - after), server.ctx.clock.emulated(
        env.delete_done_at - before
    )


def test_slow_delete_for_count_deletes(
    aca: ContainerAppsAPIClient, arm: ResourceManagementClient, server: EmulatorServer
) -> None:
    make_rg(arm)
    _make_envs(aca, ["slow", "normal"])
    server.set_faults("slow_delete:count=1,factor=4")
    assert server.ctx is not None
    clock = server.ctx.clock
    asked = clock.now()
    slow = _arm(server, "DELETE", f"/resourceGroups/{RG}/providers/Microsoft.App/managedEnvironments/slow")
    between = clock.now()
    normal = _arm(
        server, "DELETE", f"/resourceGroups/{RG}/providers/Microsoft.App/managedEnvironments/normal"
    )
    answered = clock.now()
    assert slow.status_code == normal.status_code == 202
    for (low, high), wanted in (
        (_delete_seconds(server, "slow", (asked, between)), 4 * 540),
        (_delete_seconds(server, "normal", (between, answered)), 540),
    ):
        assert low <= wanted * 1.05 and high >= wanted * 0.95, (low, high, wanted)

    def result(resp: requests.Response) -> int:
        return requests.get(
            resp.headers["Location"],
            headers={"Authorization": f"Bearer {server.token}"},
            verify=server.ca_bundle,
            timeout=10,
        ).status_code

    wait_for(lambda: result(normal) == 204, what="the normal delete")
    assert result(slow) == 202  # still going when the normal one is done


def test_slow_delete_rate_is_seeded(
    aca: ContainerAppsAPIClient, arm: ResourceManagementClient, server: EmulatorServer
) -> None:
    make_rg(arm)
    names = [f"env{i}" for i in range(6)]
    _make_envs(aca, names)
    spec = "slow_delete:rate=0.5,factor=3;seed=6"
    want = expected_pattern(spec, "slow_delete", 6)
    assert _mixed(want)
    server.set_faults(spec)
    assert server.ctx is not None
    sent = []
    for name in names:
        before = server.ctx.clock.now()
        resp = _arm(
            server, "DELETE", f"/resourceGroups/{RG}/providers/Microsoft.App/managedEnvironments/{name}"
        )
        sent.append((before, server.ctx.clock.now()))
        assert resp.status_code == 202
    given = [_delete_seconds(server, n, bracket) for n, bracket in zip(names, sent, strict=True)]
    assert [(low + high) / 2 > 2 * 540 for low, high in given] == want, given


def test_until_ends_a_fault_at_an_emulated_time_per_region_and_profile() -> None:
    """`until=` (emulated seconds since the start): capacity comes back on schedule, per place."""
    now = [0.0]
    faults = Faults(
        "nocapacity:region=eastus,profile=T4,until=2400;nocapacity:region=westus3,profile=T4,until=1500"
    )
    faults.elapsed = lambda: now[0]

    def full(region: str) -> bool:
        return faults.fire("nocapacity", location=region, profile="Consumption-GPU-NC8as-T4") is not None

    assert full("eastus") and full("westus3") and not full("canadacentral")
    now[0] = 1500.0  # +25 min: westus3 has room again, eastus not yet
    assert full("eastus") and not full("westus3")
    now[0] = 2400.0
    assert not full("eastus")
    assert faults.fire("nocapacity", location="eastus", profile="Consumption-GPU-NC24-A100") is None

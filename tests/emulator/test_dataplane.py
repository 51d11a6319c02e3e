"""Data plane: exec websocket framing, log stream, event stream, jobs, scale to zero, data-plane faults."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests
import websocket
from azure.mgmt.appcontainers import ContainerAppsAPIClient
from azure.mgmt.resource.resources import ResourceManagementClient

from aca_gpu.emulator.server import EmulatorServer
from tests.emulator import helpers
from tests.emulator.helpers import app_body, job_body, make_env, make_rg, running_explorer, wait_for

RG, ENV = "rg-acagpu-t1", "cae-acagpu-t1"


@pytest.fixture
def explorer(aca: ContainerAppsAPIClient, arm: ResourceManagementClient, server: EmulatorServer) -> Any:
    return running_explorer(aca, arm, server.subscription)


def _exec(server: EmulatorServer, endpoint: str, token: str, command: str, stdin: bytes = b"") -> list[bytes]:
    ws = websocket.create_connection(
        f"{endpoint}?command={command}",
        header=[f"Authorization: Bearer {token}"],
        sslopt={"ca_certs": server.ca_bundle},
        timeout=10,
    )
    if stdin:
        ws.send_binary(b"\x00\x04" + json.dumps({"Width": 80, "Height": 24}).encode())
        ws.send_binary(b"\x00\x00" + stdin)
    frames = []
    while True:
        try:
            frame = ws.recv()
        except (websocket.WebSocketConnectionClosedException, ConnectionError):
            break
        if not frame:
            break
        frames.append(frame if isinstance(frame, bytes) else frame.encode())
    return frames


def test_exec_frames_info_then_stdout_and_stderr(server: EmulatorServer, explorer: Any) -> None:
    container, token = explorer
    frames = _exec(
        server, container.exec_endpoint, token, "sh", b"echo out; echo err >&2; echo __DONE__$?\nexit\n"
    )
    assert frames[0].startswith(b"\x01Connecting to the container 'explorer'")
    assert frames[1].startswith(b"\x01Successfully connected to container: 'explorer'")
    stdout = b"".join(f[2:] for f in frames if f[:2] == b"\x00\x01")
    stderr = b"".join(f[2:] for f in frames if f[:2] == b"\x00\x02")
    assert b"out\n" in stdout and b"__DONE__0" in stdout and b"echo out" not in stdout  # no echo by default
    assert stderr == b"err\n"


@pytest.mark.parametrize("command", ["ls%20-la", "no-such-binary"])
def test_exec_error_frame_cluster_exec_failure(server: EmulatorServer, explorer: Any, command: str) -> None:
    container, token = explorer
    frames = _exec(server, container.exec_endpoint, token, command)
    error = json.loads(frames[-1][1:])
    assert frames[-1][:1] == b"\x02"
    assert error["Error"]["Code"] == "ClusterExecFailure"
    assert "executable file not found in $PATH" in error["Error"]["Message"]


def test_exec_needs_a_valid_token(server: EmulatorServer, explorer: Any) -> None:
    container, _ = explorer
    with pytest.raises(websocket.WebSocketBadStatusException) as err:
        _exec(server, container.exec_endpoint, "forged", "sh")
    assert err.value.status_code == 401


def test_tty_echo_fault_echoes_and_uses_crlf(server: EmulatorServer, explorer: Any) -> None:
    container, token = explorer
    server.set_faults("tty_echo")
    frames = _exec(server, container.exec_endpoint, token, "sh", b"echo hi\nexit\n")
    stdout = b"".join(f[2:] for f in frames if f[:2] == b"\x00\x01")
    # the echo of the input comes before the program's answer, as on a terminal (on a busy machine
    # the answer and the session's close came first, and the echo was lost)
    echo = b"echo hi\r\nexit\r\n"
    assert stdout.startswith(echo), stdout
    assert b"hi\r\n" in stdout[len(echo) :], stdout


def test_tty_echo_comes_first_when_the_server_resumes_late(
    server: EmulatorServer, explorer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server's session task resumes only after the program answered and exited (as on a busy
    machine): the echo was then sent after the answer and the close, and lost."""
    import asyncio

    from aca_gpu.emulator.dataplane import exec as exec_plane

    write = exec_plane._write_stdin

    async def late(proc: Any, data: bytes) -> None:
        await write(proc, data)
        await asyncio.sleep(0.5)  # the program answers and exits meanwhile

    monkeypatch.setattr(exec_plane, "_write_stdin", late)
    container, token = explorer
    server.set_faults("tty_echo")
    frames = _exec(server, container.exec_endpoint, token, "sh", b"echo hi\nexit\n")
    stdout = b"".join(f[2:] for f in frames if f[:2] == b"\x00\x01")
    assert stdout.startswith(b"echo hi\r\nexit\r\n") and stdout.endswith(b"hi\r\n"), stdout


def test_ws_drop_fault_closes_socket_early(server: EmulatorServer, explorer: Any) -> None:
    container, token = explorer
    server.set_faults("ws_drop:count=1")
    frames = _exec(server, container.exec_endpoint, token, "sh", b"echo hi\nexit\n")
    assert not any(f[:2] == b"\x00\x01" for f in frames)


def _logs(server: EmulatorServer, url: str, token: str, **params: str) -> list[str]:
    resp = requests.get(
        url, params=params, headers={"Authorization": f"Bearer {token}"}, verify=server.ca_bundle, timeout=10
    )
    assert resp.status_code == 200, resp.text
    return resp.text.splitlines()


def test_log_stream_params_and_line_formats(server: EmulatorServer, explorer: Any) -> None:
    from datetime import UTC, datetime

    from aca_gpu.emulator.dataplane.streams import format_log
    from aca_gpu.emulator.state import LogLine

    container, token = explorer
    url = container.log_stream_endpoint
    assert helpers.console_lines(_logs(server, url, token, follow="false", tailLines="0")) == []
    for params in ({"tailLines": "301"}, {"output": "xml"}):
        bad = requests.get(
            url,
            params=params,
            headers={"Authorization": f"Bearer {token}"},
            verify=server.ca_bundle,
            timeout=10,
        )
        assert bad.status_code == 400
    forged = requests.get(url, headers={"Authorization": "Bearer x"}, verify=server.ca_bundle, timeout=10)
    assert forged.status_code == 401
    line = LogLine(datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC), "hello")
    assert format_log(line, "text") == b"2026-01-02T03:04:05.000006000Z stdout F hello\n"
    assert json.loads(format_log(line, "json")) == {
        "TimeStamp": "2026-01-02T03:04:05.0000060+00:00",
        "Log": "F hello",
    }


def test_event_stream_recorded_shape(
    aca: ContainerAppsAPIClient, server: EmulatorServer, explorer: Any
) -> None:
    _, token = explorer
    url = aca.container_apps.get(RG, "explorer").event_stream_endpoint
    events = [json.loads(line) for line in _logs(server, url, token, follow="false", tailLines="300")]
    assert [e["Reason"] for e in events[:2]] == ["StartingGettingEvents", "ConnectedToEventsServer"]
    reasons = {e["Reason"] for e in events}
    assert {
        "AssigningReplica",
        "PullingImage",
        "ImagePulled",
        "ContainerCreated",
        "ContainerStarted",
    } <= reasons
    assert set(events[2]) == {
        "TimeStamp",
        "Type",
        "ContainerAppName",
        "RevisionName",
        "ReplicaName",
        "Msg",
        "Reason",
        "EventSource",
        "Count",
    }
    env_token = aca.managed_environments.get_auth_token(RG, ENV).token
    env_url = aca.managed_environments.get(RG, ENV).event_stream_endpoint
    assert len(_logs(server, env_url, env_token, tailLines="5")) == 7
    denied = requests.get(
        env_url, headers={"Authorization": f"Bearer {token}"}, verify=server.ca_bundle, timeout=10
    )
    assert denied.status_code == 401  # an app token does not open the environment's stream


def test_job_start_execution_succeeds_and_replica_goes(
    aca: ContainerAppsAPIClient, arm: ResourceManagementClient, server: EmulatorServer
) -> None:
    from azure.core.rest import HttpRequest

    make_rg(arm)
    make_env(aca)
    aca.jobs.begin_create_or_update(
        RG, "tester", job_body(server.subscription, RG, ENV, command=["sh", "-c", "echo tested"])
    ).result()
    started = aca.jobs.begin_start(RG, "tester").result()
    sub = f"{server.endpoint}/subscriptions/{server.subscription}"
    base = f"{sub}/resourceGroups/{RG}/providers/Microsoft.App/jobs"
    replicas_url = f"{base}/tester/executions/{started.name}/replicas?api-version=2023-11-02-preview"
    seen = wait_for(
        lambda: aca.send_request(HttpRequest("GET", replicas_url)).json()["value"], what="job replica"
    )
    assert seen[0]["properties"]["containers"][0]["logStreamEndpoint"].endswith("/logstream")
    ex = wait_for(
        lambda: (e := aca.job_execution(RG, "tester", started.name)).status != "Running" and e,
        what="execution end",
    )
    assert ex.status == "Succeeded"
    assert aca.send_request(HttpRequest("GET", replicas_url)).json()["value"] == []
    token = aca.send_request(
        HttpRequest("POST", f"{base}/tester/getAuthToken?api-version=2023-11-02-preview")
    )
    assert token.json()["properties"]["token"].count(".") == 2
    assert [e.name for e in aca.jobs_executions.list(RG, "tester")] == [started.name]


def test_scale_to_zero_removes_replicas_and_stops_billing(
    aca: ContainerAppsAPIClient, server: EmulatorServer, explorer: Any
) -> None:
    body = app_body(server.subscription, RG, ENV)
    body["properties"]["template"]["scale"] = {"minReplicas": 0, "maxReplicas": 0}
    app = aca.container_apps.begin_create_or_update(RG, "explorer", body).result()
    assert (
        aca.container_apps_revision_replicas.list_replicas(RG, "explorer", app.latest_revision_name).value
        == []
    )
    bill = server.billing()
    assert bill["replicas"] and not any(r["running"] for r in bill["replicas"])
    assert bill["runs"]["t1"]["gpu_seconds"] > 0


def test_stuck_fault_keeps_replica_assigning(
    aca: ContainerAppsAPIClient, arm: ResourceManagementClient, server: EmulatorServer
) -> None:
    import time

    make_rg(arm)
    make_env(aca)
    server.set_faults("stuck")
    app = aca.container_apps.begin_create_or_update(
        RG, "explorer", app_body(server.subscription, RG, ENV)
    ).result()
    time.sleep(0.3)
    rep = aca.container_apps_revision_replicas.list_replicas(RG, "explorer", app.latest_revision_name).value[
        0
    ]
    assert rep.properties.running_state_details == "AssigningReplica"


def test_control_routes_over_https(server: EmulatorServer) -> None:
    auth = {"Authorization": f"Bearer {server.token}"}
    resp = requests.post(
        f"{server.endpoint}/_emulator/faults",
        data="429:count=1;seed=3",
        headers=auth,
        verify=server.ca_bundle,
        timeout=10,
    )
    assert resp.json()["faults"][0]["kind"] == "429"
    bad = requests.post(
        f"{server.endpoint}/_emulator/faults",
        data="nonsense",
        headers=auth,
        verify=server.ca_bundle,
        timeout=10,
    )
    assert bad.status_code == 400
    inv = requests.get(
        f"{server.endpoint}/_emulator/inventory", headers=auth, verify=server.ca_bundle, timeout=10
    )
    assert inv.json()["empty"] is True
    denied = requests.get(f"{server.endpoint}/_emulator/billing", verify=server.ca_bundle, timeout=10)
    assert denied.status_code == 401

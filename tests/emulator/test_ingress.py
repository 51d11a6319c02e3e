"""The emulator's ingress: a real HTTP client reaches an app's real process on loopback; a request to
an app at zero replicas wakes it and is held until the replica's probe answers; the replica sees the
app's FQDN; the revision goes back to zero a cooldown after the last request; a request held past
the (scaled) 240 s cut-off is answered 504."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import requests
from azure.mgmt.appcontainers import ContainerAppsAPIClient
from azure.mgmt.resource.resources import ResourceManagementClient

from aca_gpu.emulator.server import EmulatorServer
from tests.e2e.serving import free_port
from tests.emulator.helpers import StaticCredential, app_body, make_env, make_rg, wait_for

RG, ENV = "rg-acagpu-t1", "cae-acagpu-t1"
STANDIN = """
import http.server, json, sys, time
time.sleep(float(sys.argv[2]))
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"path": self.path, "host": self.headers.get("Host"),
                           "forwarded_host": self.headers.get("X-Forwarded-Host")}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def served_app(sub: str, port: int, command: list[str], cooldown: int = 10) -> dict[str, Any]:
    body = app_body(sub, RG, ENV, min_replicas=0, command=command)
    body["properties"]["configuration"]["ingress"] = {"external": True, "targetPort": port}
    body["properties"]["template"]["scale"]["cooldownPeriod"] = cooldown
    return body


def clients(server: EmulatorServer) -> tuple[ContainerAppsAPIClient, ResourceManagementClient]:
    kw: dict[str, Any] = {
        "base_url": server.endpoint,
        "connection_verify": server.ca_bundle,
        "polling_interval": 0.02,
        "retry_backoff_factor": 0.01,
    }
    cred = StaticCredential(server.token)
    return (
        ContainerAppsAPIClient(cred, server.subscription, **kw),
        ResourceManagementClient(cred, server.subscription, **kw),
    )


def ingress(server: EmulatorServer) -> dict[str, Any]:
    found = requests.get(
        f"{server.endpoint}/_emulator/ingress",
        headers={"Authorization": f"Bearer {server.token}"},
        verify=server.ca_bundle,
        timeout=10,
    ).json()["apps"]
    assert len(found) == 1, found
    item: dict[str, Any] = found[0]
    return item


def replicas(aca: ContainerAppsAPIClient, app: str) -> list[Any]:
    rev = aca.container_apps.get(RG, app).latest_revision_name
    return list(aca.container_apps_revision_replicas.list_replicas(RG, app, rev).value or [])


@pytest.fixture
def slow_server(tmp_path: Path) -> Iterator[EmulatorServer]:
    """Scale 0.01: the cut-off is 2.4 wall seconds, room for a real Python process to start."""
    with EmulatorServer(time_scale=0.01, registered=True, workdir=tmp_path / "emu") as server:
        yield server


@pytest.mark.slow(4)
def test_a_request_wakes_an_app_at_zero_and_reaches_its_real_process(
    slow_server: EmulatorServer, tmp_path: Path
) -> None:
    script = tmp_path / "standin.py"
    script.write_text(STANDIN, encoding="utf-8")
    aca, arm = clients(slow_server)
    make_rg(arm)
    make_env(aca)
    port = free_port()
    app = aca.container_apps.begin_create_or_update(
        RG, "model", served_app(slow_server.subscription, port, ["python3", str(script), str(port), "0.2"])
    ).result()
    fqdn = app.configuration.ingress.fqdn
    assert fqdn.startswith("model.") and fqdn.endswith(".eastus.azurecontainerapps.io")
    found = ingress(slow_server)
    assert found["fqdn"] == fqdn
    wait_for(lambda: not replicas(aca, "model"), timeout=20, what="the activation replica scaled in")

    answer = requests.get(found["url"] + "/v1/models?x=1", timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"path": "/v1/models?x=1", "host": fqdn, "forwarded_host": fqdn}
    assert ingress(slow_server)["woken"] == 1
    reasons = [e.reason for e in slow_server.ctx.state.events if e.app == "model"]  # type: ignore[union-attr]
    assert reasons.count("AssigningReplica") == 2 and "ContainerStarted" in reasons
    # the cooldown (10 emulated s) runs from the end of the last request: back to zero, nothing bills
    wait_for(lambda: not replicas(aca, "model"), timeout=20, what="scale back to zero after the cooldown")
    billing = [b for b in slow_server.ctx.state.billing if b.resource == "model"]  # type: ignore[union-attr]
    assert billing and all(b.ended_wall is not None for b in billing)


def test_a_request_held_past_the_cutoff_is_answered_504(server: EmulatorServer, tmp_path: Path) -> None:
    """At the session's scale (0.002) the 240 s cut-off is 0.48 wall s; a process that never
    listens holds the request until then."""
    aca, arm = clients(server)
    make_rg(arm)
    make_env(aca)
    port = free_port()
    never = [sys.executable, "-c", "import time; time.sleep(60)"]
    body = served_app(server.subscription, port, never)
    aca.container_apps.begin_create_or_update(RG, "stuck", body).result()
    started = time.monotonic()
    answer = requests.get(ingress(server)["url"] + "/", timeout=30)
    assert answer.status_code == 504 and answer.text == "upstream request timeout"
    assert 240 * 0.002 <= time.monotonic() - started < 10


def test_the_host_workload_runs_a_served_apps_command_and_idles_an_explorer(tmp_path: Path) -> None:
    """`--workload host`: a served app's command runs on this host (a model server on its GPU);
    an app without ingress still idles, as the explorer does."""
    from aca_gpu.emulator.workloads.base import ContainerSpec
    from aca_gpu.emulator.workloads.host import HostWorkload

    workload = HostWorkload(workdir=tmp_path)
    spec = ContainerSpec(
        name="main",
        image="python:3.12-slim",
        command=(),
        args=("python3", "-c", "print('serving')"),
        env={},
        profile_type="Consumption-GPU-NC8as-T4",
        kind="app",
        replica="r1",
        ingress_port=8000,
    )
    served = workload.start(spec, time_scale=0.01)
    explorer = workload.start(replace(spec, ingress_port=0, replica="r2"), time_scale=0.01)
    try:
        wait_for(lambda: served.exit_code is not None, timeout=20, what="the served command to end")
        assert served.logs() == ["serving"] and served.exit_code == 0
        assert explorer.exit_code is None and explorer.logs() == []
    finally:
        served.stop()
        explorer.stop()


def test_a_startup_probe_the_process_fails_is_said_each_look_and_restarts_it(
    server: EmulatorServer, tmp_path: Path
) -> None:
    """No fault: the real process answers 404 on the probe's path. Each look (first after
    initialDelaySeconds, then every periodSeconds, wall seconds) is a ReplicaUnhealthy event in the
    prober's words; the last one restarts the container (StoppingContainer, as
    microsoft/azure-container-apps#1561 shows) and the revision reads Unhealthy meanwhile."""
    aca, arm = clients(server)
    make_rg(arm)
    make_env(aca)
    port = free_port()
    body = served_app(
        server.subscription, port, ["python3", "-m", "http.server", str(port), "--bind", "127.0.0.1"]
    )
    body["properties"]["template"]["containers"][0]["probes"] = [
        {"type": "Startup", "httpGet": {"path": "/ready", "port": port}, "initialDelaySeconds": 1,
         "periodSeconds": 1, "failureThreshold": 2},
    ]  # fmt: skip
    aca.container_apps.begin_create_or_update(RG, "sick", body).result()

    def said() -> list[tuple[str, str]]:
        return [(e.reason, e.msg) for e in server.ctx.state.events if e.app == "sick"]  # type: ignore[union-attr]

    failed = ("ReplicaUnhealthy", "startup probe failed: HTTP probe failed with statuscode: 404")
    wait_for(lambda: failed in said(), timeout=30, what="a failed look")
    rev = aca.container_apps.get(RG, "sick").latest_revision_name
    assert aca.container_apps_revisions.get_revision(RG, "sick", rev).health_state == "Unhealthy"
    wait_for(lambda: any(r == "StoppingContainer" for r, _ in said()), timeout=30, what="the restart")
    looks = [m for r, m in said() if r == "ReplicaUnhealthy"]
    assert (
        len(looks) == 2
        and ("StoppingContainer", "Container explorer failed startup probe, will be restarted") in said()
    )
    aca.container_apps.begin_delete(RG, "sick").result()

"""Each fault of the chaos proxy really happens, seen by real clients (requests, websocket-client, SDK)."""

from __future__ import annotations

import email.utils
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
import requests
import websocket
from azure.mgmt.appcontainers import ContainerAppsAPIClient
from azure.mgmt.resource.resources import ResourceManagementClient

from aca_gpu.emulator.server import EmulatorServer
from tests.chaos.proxy import ChaosProxy
from tests.emulator.helpers import env_body, make_rg, running_explorer, wait_for

RG_VERSION = "2024-03-01"
APP_VERSION = "2026-07-01"


def _rg_url(base: str, server: EmulatorServer, name: str = "rg-acagpu-c1") -> str:
    return f"{base}/subscriptions/{server.subscription}/resourcegroups/{name}?api-version={RG_VERSION}"


def _env_url(base: str, server: EmulatorServer, rg: str = "rg-acagpu-c1", env: str = "cae-acagpu-c1") -> str:
    return (
        f"{base}/subscriptions/{server.subscription}/resourceGroups/{rg}/providers/Microsoft.App/"
        f"managedEnvironments/{env}?api-version={APP_VERSION}"
    )


def _h(server: EmulatorServer) -> dict[str, str]:
    return {"Authorization": f"Bearer {server.token}"}


def _put_rg(base: str, server: EmulatorServer, verify: str, name: str = "rg-acagpu-c1") -> requests.Response:
    body = {"location": "eastus", "tags": {"acagpu:managed": "true"}}
    return requests.put(_rg_url(base, server, name), json=body, headers=_h(server), verify=verify, timeout=10)


def _put_env(base: str, server: EmulatorServer, verify: str) -> requests.Response:
    url = _env_url(base, server)
    return requests.put(url, json=env_body(), headers=_h(server), verify=verify, timeout=10)


def _upstream_has_rg(server: EmulatorServer, name: str = "rg-acagpu-c1") -> bool:
    resp = requests.get(
        _rg_url(server.endpoint, server, name), headers=_h(server), verify=server.ca_bundle, timeout=10
    )
    return resp.status_code == 200


def _events(proxy: ChaosProxy) -> list[dict[str, Any]]:
    assert proxy.log_path is not None
    if not proxy.log_path.exists():
        return []
    return [json.loads(line) for line in proxy.log_path.read_text().splitlines()]


def test_rewrites_lro_headers_and_data_plane_urls(
    upstream: EmulatorServer, proxy: ChaosProxy, aca: ContainerAppsAPIClient, arm: ResourceManagementClient
) -> None:
    assert _put_rg(proxy.endpoint, upstream, proxy.ca_bundle).status_code in (200, 201)
    resp = _put_env(proxy.endpoint, upstream, proxy.ca_bundle)
    assert resp.status_code == 201
    assert resp.headers["Azure-AsyncOperation"].startswith(proxy.endpoint + "/")
    assert upstream.endpoint not in resp.text
    container, _token = running_explorer(aca, arm, upstream.subscription)
    port = proxy.endpoint.rsplit(":", 1)[1]
    assert container.exec_endpoint.startswith(f"wss://127.0.0.1:{port}/")
    assert container.log_stream_endpoint.startswith(f"https://127.0.0.1:{port}/")


@pytest.mark.parametrize("fmt", ["seconds", "date"])
def test_throttle_answers_429_with_retry_after(upstream: EmulatorServer, proxy: ChaosProxy, fmt: str) -> None:
    make_rule = {"fault": "throttle", "method": "GET", "path": "/resourcegroups/", "retry_after": 3}
    proxy.set_rules({"rules": [{**make_rule, "retry_after_format": fmt}]})
    assert _put_rg(proxy.endpoint, upstream, proxy.ca_bundle).status_code in (200, 201)
    url = _rg_url(proxy.endpoint, upstream)
    first = requests.get(url, headers=_h(upstream), verify=proxy.ca_bundle, timeout=10)
    assert first.status_code == 429
    assert first.json()["error"]["code"] == "TooManyRequests"
    value = first.headers["Retry-After"]
    if fmt == "seconds":
        assert value == "3"
    else:
        when = email.utils.parsedate_to_datetime(value).timestamp()
        (fired,) = _events(proxy)  # 3 s after the proxy answered (an HTTP date is whole seconds),
        assert 1.9 <= when - fired["t"] <= 4.0  # however late this test got to read it
    assert requests.get(url, headers=_h(upstream), verify=proxy.ca_bundle, timeout=10).status_code == 200
    assert [e["fault"] for e in _events(proxy)] == ["throttle"]


@pytest.mark.parametrize(
    ("status", "body"),
    [(500, "arm"), (502, "html"), (503, "none"), (504, "arm"), (500, "none"), (503, "html")],
)
def test_status_faults_with_arm_html_or_no_body(
    upstream: EmulatorServer, proxy: ChaosProxy, status: int, body: str
) -> None:
    proxy.set_rules([{"fault": "status", "method": "PUT", "status": status, "body": body}])
    resp = _put_rg(proxy.endpoint, upstream, proxy.ca_bundle)
    assert resp.status_code == status
    if body == "arm":
        assert resp.json()["error"]["code"]
    elif body == "html":
        assert resp.text.startswith("<html>")
    else:
        assert resp.content == b""
    assert not _upstream_has_rg(upstream)  # answered by the proxy: nothing reached the emulator


@pytest.mark.parametrize("when", ["before", "after"])
def test_reset_before_or_after_forwarding(upstream: EmulatorServer, proxy: ChaosProxy, when: str) -> None:
    proxy.set_rules([{"fault": "reset", "method": "PUT", "path": "/resourcegroups/", "when": when}])
    with pytest.raises(requests.ConnectionError):
        _put_rg(proxy.endpoint, upstream, proxy.ca_bundle)
    assert _upstream_has_rg(upstream) is (when == "after")
    assert _events(proxy)[0]["when"] == when


def test_truncated_body_is_a_short_read_for_get_put_and_post(
    upstream: EmulatorServer, proxy: ChaosProxy
) -> None:
    proxy.set_rules([{"fault": "truncate", "method": m} for m in ("GET", "PUT", "POST")])
    with pytest.raises(requests.exceptions.ChunkedEncodingError):
        _put_rg(proxy.endpoint, upstream, proxy.ca_bundle)
    assert _upstream_has_rg(upstream)
    with pytest.raises(requests.exceptions.ChunkedEncodingError):
        requests.get(
            _rg_url(proxy.endpoint, upstream), headers=_h(upstream), verify=proxy.ca_bundle, timeout=10
        )
    register = (
        f"{proxy.endpoint}/subscriptions/{upstream.subscription}/providers/Microsoft.App/register"
        f"?api-version={RG_VERSION}"
    )
    with pytest.raises(requests.exceptions.ChunkedEncodingError):
        requests.post(register, headers=_h(upstream), verify=proxy.ca_bundle, timeout=10)
    assert sorted(e["method"] for e in _events(proxy)) == ["GET", "POST", "PUT"]


def test_latency_delays_the_answer(upstream: EmulatorServer, proxy: ChaosProxy) -> None:
    proxy.set_rules([{"fault": "latency", "seconds": 1.2}])
    started = time.monotonic()
    assert _put_rg(proxy.endpoint, upstream, proxy.ca_bundle).status_code in (200, 201)
    assert time.monotonic() - started >= 1.2  # a lower bound: a busy machine only adds to it
    requests.get(_rg_url(proxy.endpoint, upstream), headers=_h(upstream), verify=proxy.ca_bundle, timeout=10)
    # the rule fired once: the proxy's own record, not the second answer's wall time, says so
    assert [e["fault"] for e in _events(proxy)] == ["latency"]


@pytest.mark.parametrize("fault", ["empty_200", "non_json_200"])
@pytest.mark.parametrize("when", ["before", "after"])
def test_200_with_an_empty_or_non_json_body(
    upstream: EmulatorServer, proxy: ChaosProxy, fault: str, when: str
) -> None:
    proxy.set_rules([{"fault": fault, "method": "PUT", "when": when}])
    resp = _put_rg(proxy.endpoint, upstream, proxy.ca_bundle)
    assert resp.status_code == 200
    if fault == "empty_200":
        assert resp.content == b""
    else:
        with pytest.raises(ValueError):
            resp.json()
    assert _upstream_has_rg(upstream) is (when == "after")


def test_not_found_right_after_a_successful_put(upstream: EmulatorServer, proxy: ChaosProxy) -> None:
    proxy.set_rules([{"fault": "not_found_after_put", "path": "/resourcegroups/", "gets": 2}])
    assert _put_rg(proxy.endpoint, upstream, proxy.ca_bundle).status_code in (200, 201)
    url = _rg_url(proxy.endpoint, upstream)
    answers = [requests.get(url, headers=_h(upstream), verify=proxy.ca_bundle, timeout=10) for _ in range(3)]
    assert [a.status_code for a in answers] == [404, 404, 200]
    assert answers[0].json()["error"]["code"] == "ResourceGroupNotFound"


def test_finished_operation_poll_repeats_in_progress(upstream: EmulatorServer, proxy: ChaosProxy) -> None:
    assert _put_rg(proxy.endpoint, upstream, proxy.ca_bundle).status_code in (200, 201)

    def status(url: str, verify: str) -> str:
        return str(requests.get(url, headers=_h(upstream), verify=verify, timeout=10).json()["status"])

    assert upstream.ctx is not None
    # the create's emulated minutes are a moment at the tests' scale, which a loaded machine can
    # outlive between two requests: the clock stands still until the proxy has seen it in progress
    with upstream.ctx.clock.held():
        op_via_proxy = _put_env(proxy.endpoint, upstream, proxy.ca_bundle).headers["Azure-AsyncOperation"]
        assert status(op_via_proxy, proxy.ca_bundle) == "InProgress"  # remembered by the proxy
    op_direct = op_via_proxy.replace(proxy.endpoint, upstream.endpoint)
    wait_for(lambda: status(op_direct, upstream.ca_bundle) == "Succeeded", what="environment created")
    proxy.set_rules([{"fault": "lro_repeat", "count": 2}])
    seen = [status(op_via_proxy, proxy.ca_bundle) for _ in range(3)]
    assert seen == ["InProgress", "InProgress", "Succeeded"]


def test_exec_websocket_closed_mid_stream(
    upstream: EmulatorServer, proxy: ChaosProxy, aca: ContainerAppsAPIClient, arm: ResourceManagementClient
) -> None:
    container, token = running_explorer(aca, arm, upstream.subscription)

    def frames() -> list[bytes]:
        ws = websocket.create_connection(
            f"{container.exec_endpoint}?command=nvidia-smi",
            header=[f"Authorization: Bearer {token}"],
            sslopt={"ca_certs": proxy.ca_bundle},
            timeout=10,
        )
        got: list[bytes] = []
        while True:
            try:
                frame = ws.recv()
            except (websocket.WebSocketConnectionClosedException, ConnectionError):
                break
            if not frame:
                break
            got.append(frame if isinstance(frame, bytes) else frame.encode())
        return got

    whole = frames()
    assert any(f.startswith(b"\x00\x01") for f in whole)  # nvidia-smi's stdout came through the proxy
    for mode in ("abort", "close"):
        proxy.set_rules([{"fault": "ws_close", "after_messages": 1, "mode": mode}])
        cut = frames()
        assert cut == whole[:1]
    assert [e["mode"] for e in _events(proxy)] == ["abort", "close"]


def test_log_stream_cut_mid_line(
    upstream: EmulatorServer, proxy: ChaosProxy, aca: ContainerAppsAPIClient, arm: ResourceManagementClient
) -> None:
    container, token = running_explorer(aca, arm, upstream.subscription)

    def read() -> tuple[bytes, bool]:
        resp = requests.get(
            container.log_stream_endpoint,
            params={"follow": "false", "tailLines": 20},
            headers={"Authorization": f"Bearer {token}"},
            verify=proxy.ca_bundle,
            stream=True,
            timeout=10,
        )
        data, broken = b"", False
        try:
            for chunk in resp.iter_content(chunk_size=None):
                data += chunk
        except requests.exceptions.ChunkedEncodingError:
            broken = True
        return data, broken

    whole, broken = wait_for(lambda: (r := read())[0].count(b"\n") >= 2 and r, what="two log lines")
    assert not broken
    proxy.set_rules([{"fault": "stream_cut", "after_lines": 1}])
    cut, broken = read()
    first, second = whole.split(b"\n")[:2]
    assert broken
    # the stream's first lines are the service's own, stamped anew on each connection: compare unstamped
    unstamped = re.compile(rb"^\S+ ")
    got_first, got_second = cut.split(b"\n", 1)
    assert unstamped.sub(b"", got_first) == unstamped.sub(b"", first)
    assert len(got_second) == len(second) // 2
    assert unstamped.sub(b"", second).startswith(unstamped.sub(b"", got_second))


def test_seeded_rate_is_reproducible(upstream: EmulatorServer, proxy: ChaosProxy, tmp_path: Path) -> None:
    url = _rg_url(proxy.endpoint, upstream)

    def pattern() -> list[int]:
        proxy.set_rules(
            {"seed": 11, "rules": [{"fault": "status", "method": "GET", "rate": 0.5, "count": 0}]}
        )
        return [
            requests.get(url, headers=_h(upstream), verify=proxy.ca_bundle, timeout=10).status_code
            for _ in range(16)
        ]

    first = pattern()
    assert first == pattern()
    assert 500 in first and 404 in first  # some fired, some went through (the group does not exist)


def test_control_endpoint_sets_rules_and_lists_events(upstream: EmulatorServer, proxy: ChaosProxy) -> None:
    control = f"{proxy.endpoint}/_chaos/rules"
    bad = requests.put(control, json={"rules": [{"fault": "nope"}]}, verify=proxy.ca_bundle, timeout=10)
    assert bad.status_code == 400 and "fault must be one of" in bad.json()["error"]
    ok = requests.put(
        control, json={"rules": [{"fault": "status", "status": 503}]}, verify=proxy.ca_bundle, timeout=10
    )
    assert ok.json()["rules"][0]["status"] == 503
    assert _put_rg(proxy.endpoint, upstream, proxy.ca_bundle).status_code == 503
    events = requests.get(f"{proxy.endpoint}/_chaos/events", verify=proxy.ca_bundle, timeout=10).json()
    assert [e["fault"] for e in events["events"]] == ["status"]
    # the emulator's control routes pass through untouched, whatever the rules say
    inv = requests.get(
        f"{proxy.endpoint}/_emulator/inventory", headers=_h(upstream), verify=proxy.ca_bundle, timeout=10
    )
    assert inv.status_code == 200 and "resource_groups" in inv.json()


def test_sdk_client_goes_through_the_proxy(
    upstream: EmulatorServer, proxy: ChaosProxy, arm: ResourceManagementClient
) -> None:
    make_rg(arm)
    assert proxy.describe()["requests"] >= 1
    assert _upstream_has_rg(upstream, "rg-acagpu-t1")

"""Jobs that fail and console logs: a real `sh` exiting non-zero through the host workload (retries,
BackoffLimitExceeded, the replica's short linger with its log still readable, then gone), and the
simulated explorer's nvidia/cuda banner read through the log stream in text and json, tailed and followed."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from azure.core.rest import HttpRequest
from azure.mgmt.appcontainers import ContainerAppsAPIClient
from azure.mgmt.resource.resources import ResourceManagementClient

from aca_gpu.azure.app_records import execution_info
from aca_gpu.emulator.banner import cuda_banner, cuda_image_version
from aca_gpu.emulator.server import EmulatorServer
from tests.emulator.helpers import (
    EXPLORER_IMAGE,
    POLL,
    SCALE,
    StaticCredential,
    console_lines,
    job_body,
    make_env,
    make_rg,
    running_explorer,
    wait_for,
)

RG, ENV = "rg-acagpu-t1", "cae-acagpu-t1"
PREVIEW = "2023-11-02-preview"
CRI_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z stdout F (?P<text>.*)$")


# ---- a failing job on the host workload -------------------------------------------------------------
@pytest.fixture(scope="module")
def host_server() -> Iterator[EmulatorServer]:
    with EmulatorServer(time_scale=SCALE, registered=True, workload="host") as server:
        yield server


@pytest.fixture
def host(host_server: EmulatorServer) -> tuple[EmulatorServer, ContainerAppsAPIClient]:
    host_server.reset()
    kwargs: dict[str, Any] = {
        "base_url": host_server.endpoint,
        "connection_verify": host_server.ca_bundle,
        "polling_interval": POLL,
        "retry_backoff_factor": 0.01,
    }
    aca = ContainerAppsAPIClient(StaticCredential(host_server.token), host_server.subscription, **kwargs)
    arm = ResourceManagementClient(StaticCredential(host_server.token), host_server.subscription, **kwargs)
    make_rg(arm)
    make_env(aca)
    return host_server, aca


def _get(server: EmulatorServer, url: str, token: str, **params: str) -> requests.Response:
    return requests.get(
        url, params=params, headers={"Authorization": f"Bearer {token}"}, verify=server.ca_bundle, timeout=10
    )


@pytest.mark.parametrize(("retries", "attempts"), [(0, 1), (1, 2)])
def test_job_exiting_non_zero_fails_after_its_retries(
    host: tuple[EmulatorServer, ContainerAppsAPIClient], retries: int, attempts: int
) -> None:
    server, aca = host
    body = job_body(server.subscription, RG, ENV, command=["sh", "-c", "echo hi; exit 3"], retries=retries)
    aca.jobs.begin_create_or_update(RG, "failing", body).result()
    started = aca.jobs.begin_start(RG, "failing").result()
    base = (
        f"{server.endpoint}/subscriptions/{server.subscription}/resourceGroups/{RG}/providers/Microsoft.App"
    )
    replicas_url = f"{base}/jobs/failing/executions/{started.name}/replicas?api-version={PREVIEW}"

    def replicas() -> list[dict[str, Any]]:
        value: list[dict[str, Any]] = aca.send_request(HttpRequest("GET", replicas_url)).json()["value"]
        return value

    def terminated() -> dict[str, Any] | None:
        reps = replicas()
        done = reps and reps[0]["properties"]["containers"][0]["runningState"] == "Terminated"
        return reps[0] if done else None

    # The replica has ended but lingers: still listed, its log still readable, the execution not yet over.
    replica = wait_for(terminated, what="the terminated replica")
    container = replica["properties"]["containers"][0]
    token_url = f"{base}/jobs/failing/getAuthToken?api-version={PREVIEW}"
    token = aca.send_request(HttpRequest("POST", token_url)).json()["properties"]["token"]
    logs = _get(server, container["logStreamEndpoint"], token, follow="false", tailLines="300")
    assert logs.status_code == 200
    assert [CRI_LINE.fullmatch(line)["text"] for line in console_lines(logs.text.splitlines())] == [
        "hi"
    ] * attempts  # type: ignore[index]
    assert container["restartCount"] == retries
    assert container["runningStateDetails"] == "Container exited with code 3"
    execution_url = f"{base}/jobs/failing/executions/{started.name}?api-version=2026-07-01"
    racing = aca.send_request(HttpRequest("GET", execution_url)).json()
    assert racing["properties"]["status"] == "Running"
    # as on Azure: -1 until the execution ends, though its replica has already exited with 3
    assert racing["properties"]["detailedStatus"]["replicas"][0]["containers"][0]["code"] == -1
    assert execution_info(racing).exit_codes == ()  # acagpu takes no exit code from a running execution
    # nor Azure's -1 placeholder from one that ended (a stopped execution may keep it): -1 read as
    # the tester's code would fail a tester that passed
    stopped = {**racing, "properties": {**racing["properties"], "status": "Stopped"}}
    assert execution_info(stopped).exit_codes == ()

    ex = wait_for(
        lambda: (e := aca.job_execution(RG, "failing", started.name)).status != "Running" and e,
        what="the execution's end",
    )
    assert ex.status == "Failed"
    raw = aca.send_request(HttpRequest("GET", execution_url)).json()["properties"]
    assert raw["reason"] == "BackoffLimitExceeded"
    assert raw["detailedStatus"]["replicas"][0]["containers"][0]["code"] == 3
    assert replicas() == []  # gone once the execution has ended
    assert _get(server, container["logStreamEndpoint"], token, follow="false").status_code == 404

    events_url = aca.jobs.get(RG, "failing").event_stream_endpoint
    events = [json.loads(line) for line in _get(server, events_url, token, tailLines="300").text.splitlines()]
    terminations = [e for e in events if e["Reason"] == "ContainerTerminated"]
    assert len(terminations) == attempts
    assert all("exit code '3'" in e["Msg"] for e in terminations)
    backoff = [e for e in events if e["Reason"] == "BackoffLimitExceeded"]
    assert (
        len(backoff) == 1 and backoff[0]["Type"] == "Warning" and backoff[0]["RevisionName"] == started.name
    )
    billed = [r for r in server.billing()["replicas"] if r["parent"] == started.name]
    assert billed and not billed[0]["running"]


def test_job_exiting_zero_after_a_failure_is_not_retried_again(
    host: tuple[EmulatorServer, ContainerAppsAPIClient], tmp_path: Any
) -> None:
    """First attempt fails, the retry succeeds: the execution succeeds with both attempts' lines."""
    server, aca = host
    marker = tmp_path / "tried"
    script = f"if [ -e {marker} ]; then echo second; exit 0; fi; touch {marker}; echo first; exit 1"
    body = job_body(server.subscription, RG, ENV, command=["sh", "-c", script], retries=2)
    aca.jobs.begin_create_or_update(RG, "flaky", body).result()
    started = aca.jobs.begin_start(RG, "flaky").result()
    ex = wait_for(
        lambda: (e := aca.job_execution(RG, "flaky", started.name)).status != "Running" and e,
        what="the execution's end",
    )
    assert ex.status == "Succeeded"
    base = (
        f"{server.endpoint}/subscriptions/{server.subscription}/resourceGroups/{RG}/providers/Microsoft.App"
    )
    raw = aca.send_request(
        HttpRequest("GET", f"{base}/jobs/flaky/executions/{started.name}?api-version=2026-07-01")
    ).json()["properties"]
    assert "reason" not in raw
    assert raw["detailedStatus"]["replicas"][0]["containers"][0]["code"] == 0


# ---- the explorer's console through the log stream ---------------------------------------------------
def test_banner_for_cuda_images_only() -> None:
    assert cuda_image_version("nvidia/cuda:12.4.1-base-ubuntu22.04") == "12.4.1"
    assert cuda_image_version("myacr.azurecr.io/nvidia/cuda:13.0-runtime-ubuntu24.04") == "13.0"
    assert cuda_image_version("pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime") is None
    with_gpu = cuda_banner(EXPLORER_IMAGE, gpu=True)
    assert with_gpu[1:4] == ["==========", "== CUDA ==", "=========="]
    assert "CUDA Version 12.4.1" in with_gpu and not any("WARNING" in line for line in with_gpu)
    assert any(
        line.startswith("WARNING: The NVIDIA Driver was not detected")
        for line in cuda_banner(EXPLORER_IMAGE, gpu=False)
    )
    assert cuda_banner("mcr.microsoft.com/k8se/quickstart:latest", gpu=True) == []


@pytest.fixture
def explorer(aca: ContainerAppsAPIClient, arm: ResourceManagementClient, server: EmulatorServer) -> Any:
    container, token = running_explorer(aca, arm, server.subscription)
    expected = cuda_banner(EXPLORER_IMAGE, gpu=True)
    url = container.log_stream_endpoint
    wait_for(
        lambda: (
            len(_get(server, url, token, follow="false", tailLines="300").text.splitlines())
            == len(expected) + 2
        ),
        what="the banner in the log",
    )
    return url, token, expected


def test_log_stream_text_and_json_read_the_banner(server: EmulatorServer, explorer: Any) -> None:
    url, token, expected = explorer
    text = console_lines(_get(server, url, token, follow="false", tailLines="300").text.splitlines())
    texts = []
    for line in text:
        m = CRI_LINE.fullmatch(line)
        assert m is not None, line
        texts.append(m["text"])
    assert texts == expected
    docs = [
        json.loads(line)
        for line in console_lines(_get(server, url, token, follow="false", output="json").text.splitlines())
    ]
    assert all(set(d) == {"TimeStamp", "Log"} for d in docs)
    assert [d["Log"] for d in docs] == [f"F {line}" for line in expected]  # the CRI flag leads Log
    # JSON stamps: seven fractional digits and an offset; the same instants as the text form's
    json_stamps = [d["TimeStamp"] for d in docs]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{7}\+00:00", t) for t in json_stamps)
    assert [t[:26] for t in json_stamps] == [line.split(" ", 1)[0][:26] for line in text]


def test_log_stream_tail_lines(server: EmulatorServer, explorer: Any) -> None:
    url, token, expected = explorer
    for tail in (0, 1, 4, len(expected), 300):
        lines = console_lines(_get(server, url, token, follow="false", tailLines=str(tail)).text.splitlines())
        assert [CRI_LINE.fullmatch(line)["text"] for line in lines] == expected[
            len(expected) - min(tail, len(expected)) :
        ]  # type: ignore[index]
    default = console_lines(_get(server, url, token, follow="false").text.splitlines())
    assert len(default) == min(20, len(expected))


def test_log_stream_follow_gets_later_lines_and_ends_with_the_replica(
    aca: ContainerAppsAPIClient, server: EmulatorServer, explorer: Any
) -> None:
    url, token, expected = explorer
    received: list[str] = []
    ended = threading.Event()

    def follow() -> None:
        with requests.get(
            url,
            params={"follow": "true", "tailLines": "2", "output": "json"},
            headers={"Authorization": f"Bearer {token}"},
            verify=server.ca_bundle,
            timeout=10,
            stream=True,
        ) as resp:
            for raw in resp.iter_lines():
                log = json.loads(raw)["Log"]
                if log.startswith("F "):  # not the service's opening lines or heartbeats (no CRI flag)
                    received.append(log.removeprefix("F "))
        ended.set()

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    wait_for(lambda: len(received) == 2, what="the tail")
    assert received == expected[-2:]
    time.sleep(0.1)
    assert not ended.is_set()  # following: the stream stays open while the replica runs
    assert server.ctx is not None
    (replica,) = [r for r in server.ctx.state.replicas() if r.owner == "explorer"]
    replica.handles["explorer"].emit("a line printed later")  # type: ignore[attr-defined]
    wait_for(lambda: len(received) == 3, what="the later line")
    assert received[-1] == "a line printed later"
    aca.container_apps.begin_stop(RG, "explorer").result()  # the replica goes: the stream ends
    assert ended.wait(5)
    reader.join(5)

"""Many executions of one job, each with its own template env, through the real azure-mgmt-appcontainers
client: what `acagpu run --shards` relies on (one execution per shard, as Microsoft's jobs page suggests)."""

from __future__ import annotations

import time

import pytest
import requests
from azure.mgmt.appcontainers import ContainerAppsAPIClient
from azure.mgmt.resource.resources import ResourceManagementClient

from aca_gpu.emulator.providers.app.responses import EXECUTIONS_PAGE
from aca_gpu.emulator.server import EmulatorServer
from tests.emulator.fanout_helpers import JOB, RG, console, fan_job, start_shard, wait_statuses
from tests.emulator.helpers import make_env, make_rg


def test_fifty_concurrent_executions_each_run_with_their_own_template_env(
    aca: ContainerAppsAPIClient, arm: ResourceManagementClient, server: EmulatorServer
) -> None:
    make_rg(arm)
    make_env(aca)
    line = (
        'echo "shard=$ACAGPU_SHARD_INDEX exec=$CONTAINER_APP_JOB_EXECUTION_NAME"'
        ' job="$CONTAINER_APP_JOB_NAME"; '
        "sleep 8"
    )
    body = fan_job(server.subscription, command=["sh", "-c", line])
    aca.jobs.begin_create_or_update(RG, JOB, body).result()  # type: ignore[call-overload]
    names = [start_shard(aca, body, i) for i in range(50)]
    assert len(set(names)) == 50

    # all fifty at once: the executions of one job do not wait for each other
    running = wait_statuses(aca, names, ("Running",), timeout=2)
    assert set(running.values()) == {"Running"}
    # each execution answers the template it was started with (the client's token comes back)
    for i in (0, 17, 49):
        got = aca.job_execution(RG, JOB, names[i])
        env = {e.name: e.value for e in got.template.containers[0].env}  # type: ignore[union-attr]
        assert env["ACAGPU_SHARD_TOKEN"] == f"tok-{i}" and env["ACAGPU_SHARD_INDEX"] == str(i)
        # only what Azure records in an execution's template besides the caller's own
        assert {k for k in env if k.startswith("CONTAINER_APP_")} == {
            "CONTAINER_APP_JOB_NAME", "CONTAINER_APP_JOB_EXECUTION_NAME", "CONTAINER_APP_REPLICA_NAME"
        }  # fmt: skip
    listed = {
        str(e.name): {v.name: v.value for v in e.template.containers[0].env}  # type: ignore[union-attr]
        for e in aca.jobs_executions.list(RG, JOB)
    }
    assert {listed[n]["ACAGPU_SHARD_TOKEN"] for n in names} == {f"tok-{i}" for i in range(50)}

    ended = wait_statuses(aca, names, ("Succeeded", "Failed"), timeout=90)
    assert set(ended.values()) == {"Succeeded"}, ended
    for i, name in enumerate(names):
        assert f"shard={i} exec={name} job={JOB}" in console(server, name)


def test_execution_listing_pages_with_next_link_and_the_sdk_pager_follows_it(
    aca: ContainerAppsAPIClient, arm: ResourceManagementClient, server: EmulatorServer
) -> None:
    make_rg(arm)
    make_env(aca)
    body = fan_job(server.subscription, command=["sleep", "1"])
    aca.jobs.begin_create_or_update(RG, JOB, body).result()  # type: ignore[call-overload]
    count = 2 * EXECUTIONS_PAGE + 30
    names = [start_shard(aca, body, i) for i in range(count)]

    path = f"/subscriptions/{server.subscription}/resourceGroups/{RG}/providers/Microsoft.App/jobs/{JOB}"
    path += "/executions"
    first = requests.get(
        server.endpoint + path,
        params={"api-version": "2025-01-01"},
        headers={"Authorization": f"Bearer {server.token}"},
        verify=server.ca_bundle,
        timeout=30,
    ).json()
    assert len(first["value"]) == EXECUTIONS_PAGE and "$skipToken" in first["nextLink"]
    assert first["nextLink"].startswith(server.endpoint + path + "?")

    seen = [str(e.name) for e in aca.jobs_executions.list(RG, JOB)]
    assert sorted(seen) == sorted(names) and len(seen) == count  # every one once, over three pages


def test_starts_over_the_write_budget_get_429_with_retry_after_and_azure_core_waits_it_out(
    aca: ContainerAppsAPIClient, arm: ResourceManagementClient, server: EmulatorServer
) -> None:
    make_rg(arm)
    make_env(aca)
    body = fan_job(server.subscription, command=["sleep", "1"])
    aca.jobs.begin_create_or_update(RG, JOB, body).result()  # type: ignore[call-overload]
    # ARM's write bucket, nearly drained: 3 tokens, one back per wall second (0.002 per emulated s)
    server.set_faults("throttle:op=writes,burst=3,refill=0.002")
    path = (
        f"/subscriptions/{server.subscription}/resourceGroups/{RG}/providers/Microsoft.App/jobs/{JOB}/start"
    )
    answers = [
        requests.post(
            server.endpoint + path,
            params={"api-version": "2025-01-01"},
            json={},
            headers={"Authorization": f"Bearer {server.token}"},
            verify=server.ca_bundle,
            timeout=30,
        )
        for _ in range(4)
    ]
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    assert [a.headers["x-ms-ratelimit-remaining-subscription-writes"] for a in answers] == [
        "2",
        "1",
        "0",
        "0",
    ]
    assert answers[3].headers["Retry-After"] == "1"
    assert answers[3].json()["error"]["code"] == "SubscriptionRequestsThrottled"

    began = time.monotonic()
    names = [start_shard(aca, body, i) for i in range(2)]  # the SDK's retry policy honours Retry-After
    assert len(set(names)) == 2 and time.monotonic() - began >= 1.0
    assert server.ctx is not None and server.ctx.throttle.throttled >= 2


def test_arm_limits_setting_puts_the_write_bucket_in_force_without_a_fault(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`ACAGPU_EMULATOR_ARM_LIMITS=on`: 200 writes, then 429 until tokens come back (10 a second)."""
    monkeypatch.setenv("ACAGPU_EMULATOR_ARM_LIMITS", "on")
    with EmulatorServer(time_scale=1.0, registered=True) as server, requests.Session() as session:
        url = f"{server.endpoint}/subscriptions/{server.subscription}/resourcegroups/rg-limits"
        left: list[str] = []
        refused = None
        for _ in range(400):
            answer = session.put(
                url,
                params={"api-version": "2024-11-01"},
                json={"location": "eastus"},
                headers={"Authorization": f"Bearer {server.token}"},
                verify=server.ca_bundle,
                timeout=30,
            )
            left.append(answer.headers.get("x-ms-ratelimit-remaining-subscription-writes", ""))
            if answer.status_code == 429:
                refused = answer
                break
        assert refused is not None, left[-3:]
        assert left[0] == "199" and 200 <= len(left) <= 300  # the bucket's 200, and what refilled meanwhile
        assert int(refused.headers["Retry-After"]) >= 1
        assert refused.json()["error"]["code"] == "SubscriptionRequestsThrottled"


def test_stop_multiple_executions_stops_every_running_shard_in_one_write(
    aca: ContainerAppsAPIClient, arm: ResourceManagementClient, server: EmulatorServer
) -> None:
    make_rg(arm)
    make_env(aca)
    body = fan_job(server.subscription, command=["sleep", "1"])
    aca.jobs.begin_create_or_update(RG, JOB, body).result()  # type: ignore[call-overload]
    names = [start_shard(aca, body, i, {"ACAGPU_EMULATOR_SECONDS": "100000"}) for i in range(5)]
    wait_statuses(aca, names, ("Running",), timeout=5)
    stopped = aca.jobs.begin_stop_multiple_executions(RG, JOB).result()
    assert sorted(str(e.name) for e in stopped.value) == sorted(names)  # type: ignore[union-attr]
    assert set(wait_statuses(aca, names, ("Stopped",), timeout=10).values()) == {"Stopped"}
    assert server.ctx is not None
    assert not [r for r in server.ctx.state.replicas() if r.owner == JOB]  # no replica left running

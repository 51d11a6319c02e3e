"""GPU quota at placement, the platform faults a fan-out must tell from its user's failures, and every
execution status, through the real azure-mgmt-appcontainers client (placement.py)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from azure.mgmt.appcontainers import ContainerAppsAPIClient
from azure.mgmt.resource.resources import ResourceManagementClient

from aca_gpu.emulator.server import EmulatorServer
from tests.emulator.fanout_helpers import JOB, RG, fan_job, start_shard, status, wait_statuses
from tests.emulator.helpers import POLL, StaticCredential, app_body, make_env, make_rg, wait_for

T4_USAGE = "ManagedEnvironmentConsumptionT4Gpus"
DETAILED = "2025-10-02-preview"  # an api-version whose execution answers carry detailedStatus (recorded)


@pytest.fixture
def aca(server: EmulatorServer) -> ContainerAppsAPIClient:
    return ContainerAppsAPIClient(
        StaticCredential(server.token),
        server.subscription,
        base_url=server.endpoint,
        connection_verify=server.ca_bundle,
        polling_interval=POLL,
        retry_backoff_factor=0.01,
        api_version=DETAILED,
    )


LONG = {"ACAGPU_EMULATOR_SECONDS": "1500"}  # 3 wall seconds at the tests' time scale


def _setup(
    aca: ContainerAppsAPIClient, arm: ResourceManagementClient, server: EmulatorServer, **kw: Any
) -> dict[str, Any]:
    make_rg(arm)
    make_env(aca)
    body = fan_job(server.subscription, command=["sleep", "1"], gpu=True, **kw)
    aca.jobs.begin_create_or_update(RG, JOB, body).result()  # type: ignore[call-overload]
    return body


def _phase(aca: ContainerAppsAPIClient, name: str) -> str:
    """The replica's phase as the execution's detailedStatus answers it while it runs."""
    got = aca.job_execution(RG, JOB, name).as_dict()
    replicas = got["properties"].get("detailedStatus", {}).get("replicas") or [{}]
    return str((replicas[0].get("containers") or [{}])[0].get("status"))


def _usage(aca: ContainerAppsAPIClient) -> tuple[int, int]:
    found = next(u for u in aca.usages.list("eastus") if u.name.value == T4_USAGE)
    return int(found.current_value), int(found.limit)


def _env_usage(aca: ContainerAppsAPIClient) -> tuple[int, int]:
    found = [u for u in aca.managed_environment_usages.list(RG, "cae-acagpu-t1") if u.name.value == T4_USAGE]
    assert len(found) == 1, [u.name.value for u in aca.managed_environment_usages.list(RG, "cae-acagpu-t1")]
    return int(found[0].current_value), int(found[0].limit)


def test_replicas_over_the_gpu_quota_wait_in_assigning_replica_until_a_gpu_frees_up(
    aca: ContainerAppsAPIClient, arm: ResourceManagementClient, server: EmulatorServer
) -> None:
    server.set_faults("quota:region=eastus,profile=T4,limit=2")
    body = _setup(aca, arm, server)
    names = [start_shard(aca, body, i, LONG) for i in range(4)]

    def split() -> Any:
        phases = sorted(_phase(aca, n) for n in names)
        return phases if phases == ["AssigningReplica", "AssigningReplica", "Running", "Running"] else None

    wait_for(split, timeout=10, what="two running, two waiting for quota")
    assert _usage(aca) == (2, 2)  # usages count the placed replicas only
    assert _env_usage(aca) == (2, 2)  # and the environment's own (GPU quota is per environment)
    assert {status(aca, n) for n in names} == {"Running"}  # a waiting replica's execution runs
    ended = wait_statuses(aca, names, ("Succeeded", "Failed"), timeout=60)
    assert set(ended.values()) == {"Succeeded"}, ended  # the waiting two ran once GPUs freed up
    wait_for(lambda: _usage(aca) == (0, 2), what="usage back to 0")


def test_a_replica_waiting_for_quota_fails_at_its_deadline(
    aca: ContainerAppsAPIClient, arm: ResourceManagementClient, server: EmulatorServer
) -> None:
    server.set_faults("quota:region=eastus,profile=T4,limit=1")
    body = _setup(aca, arm, server, timeout_s=300)
    aca.container_apps.begin_create_or_update(
        RG, "holder", app_body(server.subscription, RG, "cae-acagpu-t1")
    ).result()  # type: ignore[call-overload]
    wait_for(lambda: _usage(aca) == (1, 1), what="the app holding the one GPU")
    name = start_shard(aca, body, 0)
    assert _phase(aca, name) == "AssigningReplica"
    wait_statuses(aca, [name], ("Failed",), timeout=30)
    got = aca.job_execution(RG, JOB, name)
    assert got.as_dict()["properties"]["reason"] == "DeadlineExceeded"


def test_backoff_limit_exceeded_before_the_pull_has_no_exit_code(
    aca: ContainerAppsAPIClient, arm: ResourceManagementClient, server: EmulatorServer
) -> None:
    body = _setup(aca, arm, server)
    server.set_faults("backoff:count=1")
    failed, fine = start_shard(aca, body, 0), start_shard(aca, body, 1)
    ended = wait_statuses(aca, [failed, fine], ("Succeeded", "Failed"), timeout=30)
    assert ended == {failed: "Failed", fine: "Succeeded"}
    got = aca.job_execution(RG, JOB, failed).as_dict()["properties"]
    assert got["reason"] == "BackoffLimitExceeded"
    assert got["detailedStatus"]["replicas"][0]["containers"][0]["code"] is None  # no container ran
    assert server.ctx is not None
    assert not [b for b in server.ctx.state.billing if b.parent == failed]  # nothing billed


def test_a_stalled_pull_holds_the_replica_until_the_deadline(
    aca: ContainerAppsAPIClient, arm: ResourceManagementClient, server: EmulatorServer
) -> None:
    body = _setup(aca, arm, server, timeout_s=600)
    server.set_faults("pull_stall:count=1")
    name = start_shard(aca, body, 0)
    wait_for(lambda: _phase(aca, name) == "PullingImage", what="pulling")
    time.sleep(0.3)  # 150 emulated s: a pull of the test image takes a few
    assert _phase(aca, name) == "PullingImage"
    wait_statuses(aca, [name], ("Failed",), timeout=30)
    assert aca.job_execution(RG, JOB, name).as_dict()["properties"]["reason"] == "DeadlineExceeded"


def test_a_replica_lost_mid_run_ends_its_execution_degraded(
    aca: ContainerAppsAPIClient, arm: ResourceManagementClient, server: EmulatorServer
) -> None:
    body = _setup(aca, arm, server)
    server.set_faults("lost:count=1,after=100")
    name = start_shard(aca, body, 0, LONG)
    wait_statuses(aca, [name], ("Degraded",), timeout=30)
    got = aca.job_execution(RG, JOB, name).as_dict()["properties"]
    assert got["reason"] == "ReplicaLost"
    assert got["detailedStatus"]["replicas"][0]["containers"][0]["code"] is None


def _follow(
    aca: ContainerAppsAPIClient, seen: dict[str, list[str]], until: list[str], timeout: float
) -> None:
    """Each execution's statuses as they change, read until every one of `until` has ended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not all(seen[n][-1] in ("Succeeded", "Failed") for n in until):
        for name, statuses in seen.items():
            now = status(aca, name)
            if statuses[-1] != now:
                statuses.append(now)
        time.sleep(0.005)


def test_a_stuck_placement_never_places_and_unknown_or_processing_show_before_running(
    aca: ContainerAppsAPIClient, arm: ResourceManagementClient, server: EmulatorServer
) -> None:
    deadline = 20000  # 40 wall s: the fine one's container (Podman, when there) has time however busy
    body = _setup(aca, arm, server, timeout_s=deadline)
    server.set_faults("stuck:count=1;unknown:count=1,seconds=250;processing:count=1,seconds=250")
    assert server.ctx is not None
    # The faults' 250 s are 0.5 wall s at the tests' scale: a loaded machine can take longer to answer
    # one read, so the clock stands still while the first statuses are read, then steps past them.
    with server.ctx.clock.held() as clock:
        stuck = start_shard(aca, body, 0)
        fine = start_shard(aca, body, 1)
        seen: dict[str, list[str]] = {stuck: [status(aca, stuck)], fine: [status(aca, fine)]}
        clock.advance(300)  # past the faults' 250 s, far short of the deadline
        for name, statuses in seen.items():
            statuses.append(status(aca, name))
    _follow(aca, seen, [fine], timeout=60)
    with server.ctx.clock.held() as clock:
        clock.advance(deadline)  # the stuck one's deadline comes now rather than in 40 s
        _follow(aca, seen, [stuck], timeout=30)
    # the first start's execution is not reported at first; never placed, it fails at its deadline
    assert seen[stuck] == ["Unknown", "Running", "Failed"], seen
    assert aca.job_execution(RG, JOB, stuck).as_dict()["properties"]["reason"] == "DeadlineExceeded"
    assert seen[fine] == ["Processing", "Running", "Succeeded"], seen

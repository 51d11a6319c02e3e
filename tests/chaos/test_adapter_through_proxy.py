"""The Azure adapter itself behind the chaos proxy: faults a real ARM shows, answered by the adapter.

Each test drives `AzureCloud` (the real SDK over HTTPS) through the proxy to a real emulator, so
what is tested is acagpu's reaction to the bytes on the wire, not an emulator mode.
"""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

import pytest

from aca_gpu.azure.cloud import AzureCloud
from aca_gpu.config import DEFAULT_IMAGE, load_settings
from aca_gpu.emulator.server import EmulatorServer
from aca_gpu.errors import InfraError
from aca_gpu.models import AppSpec, ContainerDef, EnvSpec, JobSpec
from aca_gpu.naming import RunNames, run_tags
from tests.chaos.proxy import ChaosProxy

RUN = "px4a1b"
NAMES = RunNames(RUN)
GPU_TYPE = "Consumption-GPU-NC8as-T4"
TAGS = run_tags(RUN, owner="tests", ttl=timedelta(hours=1), gpu="t4")


def _cloud(upstream: EmulatorServer, proxy: ChaosProxy) -> AzureCloud:
    env = upstream.client_env() | {
        "ACAGPU_ARM_ENDPOINT": proxy.endpoint,
        "ACAGPU_CA_BUNDLE": proxy.ca_bundle,
        "ACAGPU_POLLING_INTERVAL": "0.1",
    }
    return AzureCloud.from_settings(load_settings(env=env, file={}))


def _env(cloud: AzureCloud) -> str:
    cloud.create_resource_group(NAMES.resource_group, "eastus", TAGS)
    spec = EnvSpec(NAMES.resource_group, NAMES.environment, "eastus", TAGS, "gpu", GPU_TYPE)
    return cloud.create_environment(spec).id


def _events(proxy: ChaosProxy, fault: str) -> list[dict[str, object]]:
    return [e for e in proxy.events if e["fault"] == fault]


@pytest.mark.parametrize("gets", [1, 3])
def test_a_404_right_after_each_create_is_eventual_consistency(
    upstream: EmulatorServer, proxy: ChaosProxy, gets: int
) -> None:
    """ARM accepted the PUT; the reads after it may 404 for a moment. Seen once as exit 2
    ("create container app …: not found") in the 200-scenario run."""
    cloud = _cloud(upstream, proxy)
    proxy.set_rules(
        [
            {"fault": "not_found_after_put", "path": "/managedEnvironments/[^/]+$", "gets": gets},
            {"fault": "not_found_after_put", "path": "/containerApps/[^/]+$", "gets": gets},
            {"fault": "not_found_after_put", "path": "/jobs/[^/]+$", "gets": gets},
        ]
    )
    env_id = _env(cloud)
    explorer = ContainerDef("explorer", DEFAULT_IMAGE, 8.0, "56Gi", command=("sleep",), args=("infinity",))
    app = cloud.create_app(
        AppSpec(NAMES.resource_group, NAMES.explorer, "eastus", env_id, "gpu", explorer, TAGS)
    )
    tester = ContainerDef("tester", DEFAULT_IMAGE, 8.0, "56Gi", command=("sh",), args=("-c", "echo hi"))
    job = cloud.create_job(
        JobSpec(NAMES.resource_group, NAMES.tester, "eastus", env_id, "gpu", tester, TAGS, 600)
    )
    assert app.name == NAMES.explorer and job.name == NAMES.tester
    # every 404 was answered, and each create read through its own
    assert len([e for e in _events(proxy, "not_found_after_put") if e.get("answered") == 404]) == 3 * gets


def test_a_create_that_never_becomes_readable_is_infrastructure_not_bad_input(
    upstream: EmulatorServer, proxy: ChaosProxy
) -> None:
    cloud = _cloud(upstream, proxy)
    env_id = _env(cloud)
    proxy.set_rules(
        [
            {"fault": "not_found_after_put", "path": "/containerApps/[^/]+$", "gets": 50},
            # a zero-second delay on every PUT of the app: an event per PUT sent
            {"fault": "latency", "method": "PUT", "path": "/containerApps/[^/]+$", "count": 0, "seconds": 0},
        ]
    )
    explorer = ContainerDef("explorer", DEFAULT_IMAGE, 8.0, "56Gi", command=("sleep",), args=("infinity",))
    with pytest.raises(InfraError) as caught:
        cloud.create_app(
            AppSpec(NAMES.resource_group, NAMES.explorer, "eastus", env_id, "gpu", explorer, TAGS)
        )
    assert caught.value.exit_code == 7 and caught.value.code == "NotFoundAfterCreate"
    assert "still answers 404" in caught.value.message
    assert len(_events(proxy, "latency")) == 1  # the PUT is not sent again: a teardown meanwhile must not
    # see the app made a second time


@pytest.mark.parametrize("fault", ["non_json_200", "empty_200"])
def test_unreadable_listings_are_read_again(upstream: EmulatorServer, proxy: ChaosProxy, fault: str) -> None:
    """A 2xx whose body cannot be read, on each listing the run's waits rely on."""
    cloud = _cloud(upstream, proxy)
    _env(cloud)
    proxy.set_rules(
        [
            {"fault": fault, "method": "GET", "path": "/containerApps$", "count": 1},
            {"fault": fault, "method": "GET", "path": "/resourcegroups$", "count": 1},
            {"fault": fault, "method": "GET", "path": "/usages$", "count": 1},
        ]
    )
    assert cloud.list_apps(NAMES.resource_group) == []
    assert [g.name for g in cloud.list_resource_groups("acagpu:run-id", RUN)] == [NAMES.resource_group]
    assert cloud.usages("eastus")
    assert len(_events(proxy, fault)) == 3


def test_data_plane_tokens_survive_a_502_azure_core_leaves_to_us(
    upstream: EmulatorServer, proxy: ChaosProxy
) -> None:
    """getAuthToken is a POST: azure-core does not resend a POST that got 502 (only 500/503/504),
    and a validate once lost its tester's result to three of them in a row."""
    from aca_gpu.azure import apps, preview

    cloud = _cloud(upstream, proxy)
    env_id = _env(cloud)
    explorer = ContainerDef("explorer", DEFAULT_IMAGE, 8.0, "56Gi", command=("sleep",), args=("infinity",))
    cloud.create_app(AppSpec(NAMES.resource_group, NAMES.explorer, "eastus", env_id, "gpu", explorer, TAGS))
    tester = ContainerDef("tester", DEFAULT_IMAGE, 8.0, "56Gi", command=("sh",), args=("-c", "echo hi"))
    cloud.create_job(JobSpec(NAMES.resource_group, NAMES.tester, "eastus", env_id, "gpu", tester, TAGS, 600))
    calls = [
        lambda: preview.job_token(cloud.clients, NAMES.resource_group, NAMES.tester),
        lambda: apps.app_token(cloud.clients, NAMES.resource_group, NAMES.explorer),
        lambda: apps.environment_token(cloud.clients, NAMES.resource_group, NAMES.environment),
    ]
    for call in calls:
        rule = {"fault": "status", "status": 502, "method": "POST", "path": "/getAuthToken$", "count": 3}
        proxy.set_rules([rule])
        before = len(_events(proxy, "status"))
        assert call()
        assert len(_events(proxy, "status")) == before + 3


def test_an_empty_200_on_an_operation_poll_is_polled_again(
    upstream: EmulatorServer, proxy: ChaosProxy
) -> None:
    """9 of 100 scenarios ended with exit 1 ("The response from long running operation does not
    contain a body"): a status poll is an idempotent read, so it is polled again; the PUT is not."""
    cloud = _cloud(upstream, proxy)
    cloud.create_resource_group(NAMES.resource_group, "eastus", TAGS)
    proxy.set_rules(
        [
            {"fault": "empty_200", "method": "GET", "path": "OperationStatuses/", "count": 3},
            {
                "fault": "latency",
                "method": "PUT",
                "path": "/managedEnvironments/[^/]+$",
                "count": 0,
                "seconds": 0,
            },
        ]
    )
    spec = EnvSpec(NAMES.resource_group, NAMES.environment, "eastus", TAGS, "gpu", GPU_TYPE)
    assert cloud.create_environment(spec).name == NAMES.environment
    assert len(_events(proxy, "empty_200")) == 3 and len(_events(proxy, "latency")) == 1


def test_a_read_backs_off_with_jitter_and_a_lost_one_is_infrastructure(
    upstream: EmulatorServer, proxy: ChaosProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four unreadable answers to one read within half a second once ended `up` with exit 7 after
    1.1 s: the pauses between tries now grow (exponential, jittered); a read that never gets a
    readable answer within its budget is exit 7 naming the read, and is not multiplied by resends."""
    from aca_gpu.azure import reads

    cloud = _cloud(upstream, proxy)
    _env(cloud)
    asked: list[float] = []  # the pauses the policy chose (what it controls; a busy machine adds)
    chosen = reads.pause

    def spied(attempt: int, first: float, **kw: Any) -> float:
        asked.append(chosen(attempt, first, **kw))
        return asked[-1]

    monkeypatch.setattr(reads, "pause", spied)
    proxy.set_rules([{"fault": "non_json_200", "method": "GET", "path": "/containerApps$", "count": 6}])
    assert cloud.list_apps(NAMES.resource_group) == []
    stamps = [float(e["t"]) for e in _events(proxy, "non_json_200")]  # type: ignore[arg-type]
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    assert len(stamps) == 6 and len(asked) == 6, (stamps, asked)  # six unreadable, then a good one
    assert asked[4] > 2 * asked[0], asked  # backing off, not hammering
    assert all(gap >= pause - 0.02 for gap, pause in zip(gaps, asked, strict=False)), (gaps, asked)
    monkeypatch.setattr(reads, "pause", chosen)
    assert (reads.pause(3, 1.0, rng=lambda: 0.0), reads.pause(3, 1.0, rng=lambda: 1.0)) == (2.0, 4.0)

    proxy.set_rules([{"fault": "empty_200", "method": "GET", "path": "/containerApps$", "count": 0}])
    monkeypatch.setattr(reads, "READ_BUDGET_S", 1.0)  # (30 s on Azure)
    with pytest.raises(InfraError) as caught:
        _cloud(upstream, proxy).list_apps(NAMES.resource_group)
    assert caught.value.exit_code == 7 and caught.value.code == "UnreadableAnswer", caught.value
    assert "no readable answer to GET" in caught.value.message
    tries = len(_events(proxy, "empty_200"))
    assert 3 <= tries <= 40, tries  # one budget's worth of tries, not five resends of it

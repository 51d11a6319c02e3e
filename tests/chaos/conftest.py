"""A real emulator (HTTPS, its own CA) with the chaos proxy in front of it, both on port 0."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.mgmt.appcontainers import ContainerAppsAPIClient
from azure.mgmt.resource.resources import ResourceManagementClient

from aca_gpu.emulator.server import EmulatorServer
from tests.chaos.proxy import ChaosProxy
from tests.emulator.helpers import POLL, SCALE, StaticCredential


@pytest.fixture(scope="session")
def chaos_emulator() -> Iterator[EmulatorServer]:
    with EmulatorServer(time_scale=SCALE, registered=True) as server:
        yield server


@pytest.fixture
def upstream(chaos_emulator: EmulatorServer) -> EmulatorServer:
    chaos_emulator.reset()
    return chaos_emulator


@pytest.fixture
def proxy(upstream: EmulatorServer, tmp_path: Path) -> Iterator[ChaosProxy]:
    with ChaosProxy(
        upstream.endpoint, upstream.ca_bundle, log_path=tmp_path / "faults.jsonl", workdir=tmp_path
    ) as p:
        yield p


def _kwargs(proxy: ChaosProxy) -> dict[str, Any]:
    return {
        "base_url": proxy.endpoint,
        "connection_verify": proxy.ca_bundle,
        "polling_interval": POLL,
        "retry_total": 0,
    }


@pytest.fixture
def aca(upstream: EmulatorServer, proxy: ChaosProxy) -> ContainerAppsAPIClient:
    """The real SDK client, talking to the emulator through the proxy."""
    return ContainerAppsAPIClient(StaticCredential(upstream.token), upstream.subscription, **_kwargs(proxy))


@pytest.fixture
def arm(upstream: EmulatorServer, proxy: ChaosProxy) -> ResourceManagementClient:
    return ResourceManagementClient(StaticCredential(upstream.token), upstream.subscription, **_kwargs(proxy))

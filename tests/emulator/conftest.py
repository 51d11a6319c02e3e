"""One emulator per test session (fast time scale), reset before each test; real azure-mgmt clients."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from azure.mgmt.appcontainers import ContainerAppsAPIClient
from azure.mgmt.resource.resources import ResourceManagementClient

from aca_gpu.emulator.server import EmulatorServer
from tests.emulator.helpers import POLL, SCALE, StaticCredential


@pytest.fixture(scope="session")
def emulator() -> Iterator[EmulatorServer]:
    with EmulatorServer(time_scale=SCALE, registered=True) as server:
        yield server


@pytest.fixture
def server(emulator: EmulatorServer) -> EmulatorServer:
    emulator.reset()
    return emulator


def _kwargs(server: EmulatorServer) -> dict[str, Any]:
    return {
        "base_url": server.endpoint,
        "connection_verify": server.ca_bundle,
        "polling_interval": POLL,
        "retry_backoff_factor": 0.01,
    }


@pytest.fixture
def aca(server: EmulatorServer) -> ContainerAppsAPIClient:
    return ContainerAppsAPIClient(StaticCredential(server.token), server.subscription, **_kwargs(server))


@pytest.fixture
def arm(server: EmulatorServer) -> ResourceManagementClient:
    return ResourceManagementClient(StaticCredential(server.token), server.subscription, **_kwargs(server))

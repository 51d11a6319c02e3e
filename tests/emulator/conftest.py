"""One emulator per test session (fast time scale), reset before each test; real azure-mgmt clients."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from azure.core.credentials import AccessToken
from azure.mgmt.appcontainers import ContainerAppsAPIClient
from azure.mgmt.resource.resources import ResourceManagementClient

from aca_gpu.emulator.server import EmulatorServer

SCALE = 0.002  # env create 80 s -> 0.16 s, env delete 540 s -> ~1.1 s
POLL = 0.02


class StaticCredential:
    """What acagpu's emulator mode hands azure-core: the emulator's static token, for any scope."""

    def __init__(self, token: str) -> None:
        self.token = token

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken(self.token, int(time.time()) + 3600)


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


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")

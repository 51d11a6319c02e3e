"""Autospec'd SDK clients: every operation group and method checked against the installed SDK."""

from __future__ import annotations

from typing import Any
from unittest.mock import create_autospec

import pytest
from azure.mgmt.appcontainers import ContainerAppsAPIClient
from azure.mgmt.resource.resources import ResourceManagementClient

from aca_gpu.azure.clients import Clients, StaticTokenCredential
from aca_gpu.config import Settings

SUB = "00000000-0000-0000-0000-000000000000"


def autospec_client(cls: type[Any]) -> Any:
    """create_autospec misses operation groups (set in __init__); attach an autospec of each."""
    real = cls(StaticTokenCredential("unused"), SUB)
    mock = create_autospec(cls, instance=True)
    for name, value in vars(real).items():
        if not name.startswith("_"):
            setattr(mock, name, create_autospec(type(value), instance=True))
    return mock


@pytest.fixture
def clients() -> Clients:
    settings = Settings(subscription=SUB, polling_interval=0.01)
    return Clients(
        settings,
        SUB,
        apps=autospec_client(ContainerAppsAPIClient),
        resources=autospec_client(ResourceManagementClient),
    )

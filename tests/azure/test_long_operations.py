"""A long-running operation is followed until it ends or its own deadline passes.

ARM answers the poll of a running asynchronous operation with an empty 202 (the recordings: a
delete's Location answered 92 of them over ~9 min). ACR's importImage polls that way for the
minutes a multi-GB copy takes; the read-resend policy once took each empty 202 for a lost answer,
so an import longer than the read budget (~26 s) ended exit 7 "no readable answer to GET
…/operationStatuses/… (last: an empty 202)". Here: the real SDK over HTTPS to a real emulator,
with the read budget shrunk so a 2 s import outlasts it (30 s on Azure).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from aca_gpu.azure import acr_registry, reads
from aca_gpu.azure.cloud import AzureCloud
from aca_gpu.config import load_settings
from aca_gpu.emulator.server import EmulatorServer
from aca_gpu.errors import WaitTimedOut
from aca_gpu.naming import run_tags

SCALE = 0.02  # a 3.3 GB import (60 emulated s) lasts ~1.2 s, polled every 0.05 s
TORCH = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"
RG = "rg-acagpu-longops"
REGISTRY = "acagpulongops1"


@pytest.fixture(scope="module")
def emulator() -> Iterator[EmulatorServer]:
    with EmulatorServer(time_scale=SCALE, registered=True) as server:
        azure = _cloud(server)
        tags = run_tags("longops", owner="tests", ttl=timedelta(hours=1), gpu="t4")
        azure.create_resource_group(RG, "eastus", tags)
        acr_registry.put_registry(azure.clients, RG, REGISTRY, "eastus", "Standard", tags)
        yield server


def _cloud(server: EmulatorServer) -> AzureCloud:
    """A fresh cloud: its clients' read policy takes the read budget in force when they are made."""
    env = server.client_env() | {"ACAGPU_POLLING_INTERVAL": "0.1"}
    return AzureCloud.from_settings(load_settings(env=env, file={}))


def test_an_import_longer_than_the_read_budget_is_followed_to_its_end(
    emulator: EmulatorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reads, "READ_BUDGET_S", 0.05)  # far below the import's ~1.2 s
    cloud = _cloud(emulator)
    acr_registry.import_image(cloud.clients, RG, REGISTRY, "docker.io", TORCH, TORCH)  # no exit 7
    info = acr_registry.get_registry(cloud.clients, RG, REGISTRY)
    assert info is not None and info.provisioning_state == "Succeeded", info


def test_an_import_past_its_own_deadline_is_a_timeout_naming_it(
    emulator: EmulatorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(acr_registry, "IMPORT_DEADLINE_S", 0.5)
    cloud = _cloud(emulator)
    with pytest.raises(WaitTimedOut) as caught:
        acr_registry.import_image(cloud.clients, RG, REGISTRY, "docker.io", TORCH, "again:1")
    assert caught.value.exit_code == 4, caught.value
    assert f"import of {TORCH} into {REGISTRY}" in caught.value.message, caught.value.message
    assert "still running after" in caught.value.message, caught.value.message

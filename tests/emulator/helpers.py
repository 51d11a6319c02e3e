"""Builders for the resources most tests need: an RG, a GPU environment, an explorer app, a tester job."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from azure.core.credentials import AccessToken
from azure.mgmt.appcontainers import ContainerAppsAPIClient
from azure.mgmt.resource.resources import ResourceManagementClient

SCALE = 0.002  # env create 80 s -> 0.16 s, env delete 540 s -> ~1.1 s
POLL = 0.02


class StaticCredential:
    """What acagpu's emulator mode hands azure-core: the emulator's static token, for any scope."""

    def __init__(self, token: str) -> None:
        self.token = token

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken(self.token, int(time.time()) + 3600)


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def console_lines(lines: list[str]) -> list[str]:
    """A console stream's lines after the two the service opens every connection with (checked)."""
    assert len(lines) >= 2, lines
    assert "Connecting to the container '" in lines[0], lines[0]
    assert "Successfully Connected to container: '" in lines[1], lines[1]
    return lines[2:]


T4 = "Consumption-GPU-NC8as-T4"
LOCATION = "eastus"
EXPLORER_IMAGE = "nvidia/cuda:12.4.1-base-ubuntu22.04"


def make_rg(arm: ResourceManagementClient, name: str = "rg-acagpu-t1", run_id: str = "t1") -> Any:
    tags = {"acagpu:managed": "true", "acagpu:run-id": run_id}
    return arm.resource_groups.create_or_update(name, {"location": LOCATION, "tags": tags})


def env_body(gpu_type: str = T4, **extra: Any) -> dict[str, Any]:
    gpu = {"name": "gpu", "workloadProfileType": gpu_type, **extra}
    return {
        "location": LOCATION,
        "properties": {
            "workloadProfiles": [{"name": "Consumption", "workloadProfileType": "Consumption"}, gpu]
        },
    }


def make_env(aca: ContainerAppsAPIClient, rg: str = "rg-acagpu-t1", name: str = "cae-acagpu-t1") -> Any:
    return aca.managed_environments.begin_create_or_update(rg, name, env_body()).result()


def env_id(server_sub: str, rg: str, env: str) -> str:
    return (
        f"/subscriptions/{server_sub}/resourceGroups/{rg}/providers/Microsoft.App/managedEnvironments/{env}"
    )


def app_body(
    sub: str,
    rg: str,
    env: str,
    *,
    image: str = EXPLORER_IMAGE,
    min_replicas: int = 1,
    command: list[str] | None = None,
) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "explorer",
        "image": image,
        "resources": {"cpu": 8, "memory": "56Gi"},
    }
    if command:
        container["command"] = command
    return {
        "location": LOCATION,
        "properties": {
            "environmentId": env_id(sub, rg, env),
            "workloadProfileName": "gpu",
            "configuration": {"activeRevisionsMode": "Single"},
            "template": {"containers": [container], "scale": {"minReplicas": min_replicas, "maxReplicas": 1}},
        },
    }


def job_body(
    sub: str, rg: str, env: str, *, command: list[str] | None = None, retries: int = 0
) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "tester",
        "image": EXPLORER_IMAGE,
        "resources": {"cpu": 8, "memory": "56Gi"},
    }
    if command:
        container["command"] = command
    return {
        "location": LOCATION,
        "properties": {
            "environmentId": env_id(sub, rg, env),
            "workloadProfileName": "gpu",
            "configuration": {
                "triggerType": "Manual",
                "replicaTimeout": 7200,  # 14 wall seconds at SCALE: a loaded machine is no deadline
                "replicaRetryLimit": retries,
                "manualTriggerConfig": {"parallelism": 1, "replicaCompletionCount": 1},
            },
            "template": {"containers": [container]},
        },
    }


A100_ONLY_TYPE = "Consumption-GPU-NC24-A100"


def running_explorer(aca: ContainerAppsAPIClient, arm: ResourceManagementClient, subscription: str) -> Any:
    """RG, environment and an app `explorer` whose first replica runs: (its container, an app token)."""
    make_rg(arm)
    make_env(aca)
    app = aca.container_apps.begin_create_or_update(
        "rg-acagpu-t1", "explorer", app_body(subscription, "rg-acagpu-t1", "cae-acagpu-t1")
    ).result()

    def running() -> Any:
        reps = aca.container_apps_revision_replicas.list_replicas(
            "rg-acagpu-t1", "explorer", app.latest_revision_name
        ).value
        ok = reps and reps[0].properties and reps[0].properties.running_state == "Running"
        return reps[0] if ok else None

    replica = wait_for(running, what="explorer replica")
    token = aca.container_apps.get_auth_token("rg-acagpu-t1", "explorer").token
    return replica.properties.containers[0], token

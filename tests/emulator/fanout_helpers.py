"""Builders for fan-out tests: one Manual job (parallelism 1, no retries) and executions started with
their own template env, as `acagpu run --shards` starts them."""

from __future__ import annotations

import time
from typing import Any

import requests
from azure.mgmt.appcontainers import ContainerAppsAPIClient

from aca_gpu.emulator.server import EmulatorServer
from tests.emulator.helpers import env_id

RG, ENV, JOB = "rg-acagpu-t1", "cae-acagpu-t1", "fan"


def fan_job(
    sub: str, *, command: list[str], gpu: bool = False, timeout_s: int = 86400, image: str = "busybox:1"
) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "main",
        "image": image,
        "command": command,
        "resources": {"cpu": 8, "memory": "56Gi"} if gpu else {"cpu": 0.5, "memory": "1Gi"},
    }
    props: dict[str, Any] = {
        "environmentId": env_id(sub, RG, ENV),
        "configuration": {
            "triggerType": "Manual",
            "replicaTimeout": timeout_s,
            "replicaRetryLimit": 0,
            "manualTriggerConfig": {"parallelism": 1, "replicaCompletionCount": 1},
        },
        "template": {"containers": [container]},
    }
    if gpu:
        props["workloadProfileName"] = "gpu"
    return {"location": "eastus", "properties": props}


def start_shard(
    aca: ContainerAppsAPIClient, job_body: dict[str, Any], index: int, extra: dict[str, str] | None = None
) -> str:
    """Start one execution whose template env names its shard; its execution name."""
    container = dict(job_body["properties"]["template"]["containers"][0])
    env = {"ACAGPU_SHARD_INDEX": str(index), "ACAGPU_SHARD_TOKEN": f"tok-{index}", **(extra or {})}
    container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    started = aca.jobs.begin_start(RG, JOB, template={"containers": [container]}).result()  # type: ignore[call-overload]
    return str(started.name)


def _text(value: Any) -> str:
    """An SDK enum's value (str() of one is its Python name), or the string the service sent."""
    return str(getattr(value, "value", value))


def status(aca: ContainerAppsAPIClient, name: str) -> str:
    return _text(aca.job_execution(RG, JOB, name).status)


def console(server: EmulatorServer, execution: str) -> list[str]:
    """What an execution's container printed (the control endpoint: Log Analytics' stand-in)."""
    answer = requests.get(
        f"{server.endpoint}/_emulator/console",
        params={"rg": RG, "job": JOB, "execution": execution},
        headers={"Authorization": f"Bearer {server.token}"},
        verify=server.ca_bundle,
        timeout=10,
    )
    answer.raise_for_status()
    return [str(line) for line in answer.json()["lines"]]


def wait_statuses(
    aca: ContainerAppsAPIClient, names: list[str], done: tuple[str, ...], timeout: float = 60.0
) -> dict[str, str]:
    """Each execution's status once every one is in `done` (by listing, as a fan-out polls)."""
    deadline = time.monotonic() + timeout
    found: dict[str, str] = {}
    while time.monotonic() < deadline:
        found = {str(e.name): _text(e.status) for e in aca.jobs_executions.list(RG, JOB)}
        if all(found.get(n) in done for n in names):
            return {n: found[n] for n in names}
        time.sleep(0.05)
    raise AssertionError(f"not all in {done} after {timeout} s: {found}")

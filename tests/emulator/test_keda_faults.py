"""The KEDA poller's platform faults (providers/app/keda.py): #1216's cap on running executions,
#1125's execution per poll of an emptied queue, #1656's execution that takes no message.

The poller and the executions are the emulator's own, driven by its ticker; only the queue's count
is the test's (what Azurite would answer), so no Azurite is needed here (tests/e2e/test_queue_e2e.py
and benchmarks/queue_mode.py run them against Azurite and real workers).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from azure.mgmt.appcontainers import ContainerAppsAPIClient
from azure.mgmt.resource.resources import ResourceManagementClient

from aca_gpu.emulator.providers.app.keda import IDLE
from aca_gpu.emulator.server import EmulatorServer
from tests.emulator.helpers import env_id, make_env, make_rg, wait_for


class Counts:
    """The queues' approximate counts as the poller reads them (Azurite's answer, held by the test)."""

    def __init__(self) -> None:
        self.messages: dict[str, int] = {}

    async def queue_length(self, queue: str) -> int | None:
        return self.messages.get(queue)

    async def close(self) -> None:
        return None


@pytest.fixture
def counts(server: EmulatorServer) -> Iterator[Counts]:
    assert server.ctx is not None
    held = Counts()
    server.ctx.queues = held  # type: ignore[assignment]
    try:
        yield held
    finally:
        server.ctx.queues = None


def _event_job(aca: ContainerAppsAPIClient, server: EmulatorServer, name: str, *, most: int, every_s: int,
               command: str) -> None:  # fmt: skip
    rule = {"name": "q", "type": "azure-queue", "metadata": {"queueName": name, "queueLength": "1",
                                                             "accountName": "acct"}}  # fmt: skip
    body: dict[str, Any] = {
        "location": "eastus",
        "properties": {
            "environmentId": env_id(server.subscription, "rg-acagpu-t1", "cae-acagpu-t1"),
            "workloadProfileName": "gpu",
            "configuration": {
                "triggerType": "Event",
                "replicaTimeout": 7200,
                "replicaRetryLimit": 0,
                "eventTriggerConfig": {
                    "scale": {
                        "minExecutions": 0,
                        "maxExecutions": most,
                        "pollingInterval": every_s,
                        "rules": [rule],
                    },
                },
            },
            "template": {
                "containers": [
                    {
                        "name": "w",
                        "image": "busybox",
                        "command": ["/bin/sh", "-c", command],
                        "resources": {"cpu": 8, "memory": "56Gi"},
                    }
                ]
            },
        },
    }
    aca.jobs.begin_create_or_update("rg-acagpu-t1", name, body).result()


def _executions(aca: ContainerAppsAPIClient, name: str) -> list[Any]:
    return list(aca.jobs_executions.list("rg-acagpu-t1", name))


def test_keda_faults_cap_the_running_start_on_an_emptied_queue_and_idle_a_replica(
    arm: ResourceManagementClient, aca: ContainerAppsAPIClient, server: EmulatorServer, counts: Counts
) -> None:
    make_rg(arm)
    make_env(aca)
    # #1216: 50 messages and maxExecutions 20, but at most 3 run at once
    server.set_faults(
        "event_cap:limit=3,match=capped;empty_poll:match=emptied;idle_replica:count=1,match=idle"
    )
    counts.messages["capped"] = 50
    _event_job(aca, server, "capped", most=20, every_s=10, command="sleep 5")
    wait_for(lambda: len(_executions(aca, "capped")) >= 3, what="3 executions of the capped job")
    time.sleep(0.5)  # 25 more polls (10 emulated s each at the time scale): none of them starts a 4th
    assert len(_executions(aca, "capped")) == 3

    # #1125: once emptied, each poll starts one execution, which finds nothing (here: ends at once)
    counts.messages["emptied"] = 1
    _event_job(aca, server, "emptied", most=5, every_s=50, command="true")
    wait_for(lambda: len(_executions(aca, "emptied")) >= 1, what="the emptied job's first execution")
    counts.messages["emptied"] = 0
    first = len(_executions(aca, "emptied"))
    wait_for(lambda: len(_executions(aca, "emptied")) >= first + 2, what="two executions of an empty queue")

    # #1656: the first execution started takes no message: it runs the idle line, not its worker, and
    # stays Running (counted by the poller) where its command would have ended at once
    counts.messages["idle"] = 1
    _event_job(aca, server, "idle", most=1, every_s=10, command="true")
    wait_for(lambda: len(_executions(aca, "idle")) >= 1, what="the idle job's execution")
    time.sleep(0.5)
    (idle,) = _executions(aca, "idle")
    assert idle.template.containers[0].command == IDLE and idle.status == "Running"
    aca.jobs.begin_delete("rg-acagpu-t1", "idle").result()  # its delete ends the idle container
    assert not server.inventory()["executions"] or all(
        e["job"] != "idle" for e in server.inventory()["executions"]
    )

"""`acagpu status` as a second shell sees a run going: its environment building, a fan-out between
its rounds, a shard waiting for its placement. Real SDK over HTTPS to the emulator; the phase is
read by the same workflow and rendered by the same table as the command's."""

from __future__ import annotations

import io
import os
from typing import Any
from unittest import mock

from azure.mgmt.appcontainers import ContainerAppsAPIClient
from azure.mgmt.resource.resources import ResourceManagementClient

from aca_gpu.azure.cloud import AzureCloud
from aca_gpu.cli.status import render_runs
from aca_gpu.config import load_settings
from aca_gpu.emulator.server import EmulatorServer
from aca_gpu.workflow.fleet.status import status
from tests.emulator.fanout_helpers import ENV, JOB, RG, fan_job, start_shard, wait_statuses
from tests.emulator.helpers import env_body, make_env, make_rg, wait_for


def _run(server: EmulatorServer) -> dict[str, Any]:
    env = server.client_env() | {"ACAGPU_POLLING_INTERVAL": "0.1"}
    (run,) = status(AzureCloud.from_settings(load_settings(env=env, file={})))["runs"]
    return dict(run)


def _shown(server: EmulatorServer, run: dict[str, Any]) -> str:
    """The table's PHASE cells (a narrow table folds a long phase: joined again here)."""
    text = io.StringIO()
    with mock.patch.dict(os.environ, {"COLUMNS": "100"}):  # folds between words, whatever the terminal
        render_runs({"runs": [run], "environments": {"warm": []}}, text)
    header, _, *rows = text.getvalue().split("\nSPEND≈:")[0].splitlines()
    start = header.index("PHASE")
    return " ".join(r[start:].split("  ")[0].strip() for r in rows if len(r) > start and r[start] != " ")


def test_a_cold_runs_environment_being_made_is_building_not_empty(
    server: EmulatorServer, arm: ResourceManagementClient, aca: ContainerAppsAPIClient
) -> None:
    make_rg(arm, RG, "t1")
    assert _run(server)["phase"] == "empty"  # nothing in its group yet
    with server.ctx.clock.held():  # the environment stays in provisioning while the test reads
        poller = aca.managed_environments.begin_create_or_update(RG, ENV, env_body())
        run = _run(server)
    assert (run["phase"], run.get("phase_detail")) == ("building", "environment Waiting"), run
    assert "building (environment Waiting)" in _shown(server, run)
    poller.result()
    run = _run(server)
    assert (run["phase"], run.get("phase_detail")) == ("idle", "environment ready, no job in it"), run


def test_a_fanout_between_its_rounds_is_queued_and_a_shard_not_placed_is_starting(
    server: EmulatorServer, arm: ResourceManagementClient, aca: ContainerAppsAPIClient
) -> None:
    make_rg(arm, RG, "t1")
    make_env(aca, RG, ENV)
    body = fan_job(server.subscription, command=["sh", "-c", "true"])
    body["tags"] = {"acagpu:managed": "true", "acagpu:run-id": "t1", "acagpu:shards": "3"}
    aca.jobs.begin_create_or_update(RG, JOB, body).result()  # type: ignore[call-overload]
    run = _run(server)
    assert (run["phase"], (run.get("shards") or {}).get("queued")) == ("queued", 3), (
        run
    )  # made, none started yet

    first = start_shard(aca, body, 0)
    wait_statuses(aca, [first], ("Succeeded",))
    run = _run(server)  # one round done, two shards to go: the run is going, not ended
    assert run["phase"] == "queued", run
    assert run["shards"] == {"total": 3, "queued": 2, "starting": 0, "running": 0, "ended": 1}, run
    assert "queued (shards 3: queued 2 · ended 1)" in _shown(server, run)

    server.set_faults("stuck")  # the next replica is never placed (AssigningReplica)
    start_shard(aca, body, 1)
    run = wait_for(lambda: (r := _run(server))["phase"] == "starting" and r, what="a starting shard")
    assert run["shards"] == {"total": 3, "queued": 1, "starting": 1, "running": 0, "ended": 1}, run
    assert run["executions"] == {"starting": 1, "running": 0, "ended": 1}, run


def test_a_shard_whose_container_exited_is_ended_while_its_execution_lingers(
    server: EmulatorServer, arm: ResourceManagementClient, aca: ContainerAppsAPIClient
) -> None:
    """ARM keeps an execution `Running` a few seconds after its container exits (recorded): that
    shard is done, and `status` called it `starting` (no container running) until the end came."""
    make_rg(arm, RG, "t1")
    make_env(aca, RG, ENV)
    body = fan_job(server.subscription, command=["sh", "-c", "true"])
    body["tags"] = {"acagpu:managed": "true", "acagpu:run-id": "t1", "acagpu:shards": "2"}
    aca.jobs.begin_create_or_update(RG, JOB, body).result()  # type: ignore[call-overload]
    server.set_faults("linger:seconds=50000")  # the execution stays Running long after its container
    try:
        name = start_shard(aca, body, 0)
        env = server.client_env() | {"ACAGPU_POLLING_INTERVAL": "0.02"}
        cloud = AzureCloud.from_settings(load_settings(env=env, file={}))
        seen = wait_for(
            lambda: (e := cloud.get_execution(RG, JOB, name)).states == ("Terminated",) and e,
            what="the shard's container to exit",
        )
        assert seen.status == "Running"  # still, as ARM says it
        run = _run(server)
        assert run["shards"] == {"total": 2, "queued": 1, "starting": 0, "running": 0, "ended": 1}, run
        assert run["executions"] == {"starting": 0, "running": 0, "ended": 1}, run
        assert (run["phase"], run["phase_detail"]) == ("queued", "shards 2: queued 1 · ended 1"), run
    finally:
        server.set_faults("")

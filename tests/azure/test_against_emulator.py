"""AzureCloud driven against the emulator over real HTTPS/WSS on loopback: the whole resource lifecycle.

The client is built exactly as a user's would be (endpoint override through the environment), so
this also checks the override contract end to end.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from aca_gpu.azure.cloud import AzureCloud
from aca_gpu.config import DEFAULT_IMAGE, load_settings
from aca_gpu.models import AppSpec, ContainerDef, EnvSpec, JobSpec
from aca_gpu.naming import RunNames, run_tags
from tests.azure.emulated import wait_finished

server = pytest.importorskip("aca_gpu.emulator.server")

RUN = "emu4a1"
NAMES = RunNames(RUN)
GPU_TYPE = "Consumption-GPU-NC8as-T4"


@pytest.fixture(scope="module")
def cloud() -> Iterator[AzureCloud]:
    with server.EmulatorServer(time_scale=0.002).start() as emu:
        settings = load_settings(env=emu.client_env() | {"ACAGPU_POLLING_INTERVAL": "0.1"}, file={})
        assert settings.arm_endpoint and settings.arm_endpoint.startswith("https://127.0.0.1:")
        yield AzureCloud.from_settings(settings)


def test_full_lifecycle(cloud: AzureCloud) -> None:
    rg = NAMES.resource_group
    tags = run_tags(RUN, owner="tests", ttl=timedelta(hours=1), gpu="t4")

    group = cloud.create_resource_group(rg, "eastus", tags)
    assert group.tags["acagpu:managed"] == "true"
    assert [g.name for g in cloud.list_resource_groups("acagpu:run-id", RUN)] == [rg]

    if not cloud.provider_registered("Microsoft.App"):
        cloud.register_provider("Microsoft.App", timeout=60)
    assert cloud.provider_registered("Microsoft.App")

    offers = {o.name: o for o in cloud.available_profiles("eastus")}
    assert GPU_TYPE in offers

    env = cloud.create_environment(EnvSpec(rg, NAMES.environment, "eastus", tags, "gpu", GPU_TYPE))
    assert env.provisioning_state == "Succeeded"
    got_env = cloud.get_environment(rg, NAMES.environment)
    assert got_env is not None and got_env.id == env.id

    explorer = ContainerDef("explorer", DEFAULT_IMAGE, 8.0, "56Gi", command=("sleep",), args=("infinity",))
    app = cloud.create_app(AppSpec(rg, NAMES.explorer, "eastus", env.id, "gpu", explorer, tags))
    assert app.provisioning_state == "Succeeded"
    replica, container = cloud.running_container(rg, NAMES.explorer, timeout=60)
    assert container.exec_endpoint and container.exec_endpoint.startswith("wss://127.0.0.1:")
    assert [r.name for r in cloud.list_app_replicas(rg, NAMES.explorer)] == [replica.name]

    smi = cloud.exec(rg, NAMES.explorer, ["nvidia-smi", "-L"], timeout=60)
    assert smi.exit_code == 0, smi
    assert "GPU 0" in smi.output and "__ACAGPU_EXIT_" not in smi.output
    failed = cloud.exec(rg, NAMES.explorer, ["sh", "-c", "exit 3"], timeout=60)
    assert failed.exit_code == 3

    logs = list(cloud.app_logs(rg, NAMES.explorer, follow=False, tail=20, timeout=30))
    assert all(isinstance(line, str) for line in logs)
    events = cloud.system_events(rg, app=NAMES.explorer, tail=50)
    assert events and all(isinstance(e, dict) for e in events)

    job_container = ContainerDef(
        "tester", DEFAULT_IMAGE, 8.0, "56Gi", command=("sh",), args=("-c", "echo hi")
    )
    job = cloud.create_job(JobSpec(rg, NAMES.tester, "eastus", env.id, "gpu", job_container, tags, 7200))
    assert job.provisioning_state == "Succeeded"
    execution = cloud.start_job(rg, NAMES.tester)
    assert execution.startswith(NAMES.tester)
    assert execution in [e.name for e in cloud.list_executions(rg, NAMES.tester)]
    job_lines = list(cloud.job_logs(rg, NAMES.tester, execution, timeout=60))
    assert all(isinstance(line, str) for line in job_lines)
    assert wait_finished(cloud, rg, NAMES.tester, execution) == "Succeeded"

    cloud.delete_resource_group(rg, wait=True)
    assert cloud.get_resource_group(rg) is None
    assert cloud.get_app(rg, NAMES.explorer) is None

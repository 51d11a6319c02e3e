"""An app and a job in one resource group, their environment in another (Azure allows it; warm
environments rely on it): acagpu's client over the real SDK against the emulator, end to end.

Azure keeps each resource in the group its URL names and points `environmentId` at the environment's
own group; updates, listings, job PATCHes and the job's data-plane token all work from the run's group.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from aca_gpu.azure.cloud import AzureCloud
from aca_gpu.config import DEFAULT_IMAGE, load_settings
from aca_gpu.models import AppSpec, ContainerDef, EnvSpec, JobSpec
from aca_gpu.naming import run_tags
from tests.azure.emulated import wait_finished

server = pytest.importorskip("aca_gpu.emulator.server")

RUN_RG, ENV_RG, ENV = "rg-acagpu-run7x", "rg-acagpu-warm", "cae-acagpu-warm"
GPU_TYPE = "Consumption-GPU-NC8as-T4"


@pytest.fixture(scope="module")
def cloud() -> Iterator[AzureCloud]:
    with server.EmulatorServer(time_scale=0.002).start() as emu:
        settings = load_settings(env=emu.client_env() | {"ACAGPU_POLLING_INTERVAL": "0.1"}, file={})
        yield AzureCloud.from_settings(settings)


def test_app_and_job_in_another_group_than_their_environment(cloud: AzureCloud) -> None:
    tags = run_tags("run7x", owner="tests", ttl=timedelta(hours=1), gpu="t4")
    if not cloud.provider_registered("Microsoft.App"):
        cloud.register_provider("Microsoft.App", timeout=60)
    cloud.create_resource_group(ENV_RG, "eastus", tags)
    cloud.create_resource_group(RUN_RG, "eastus", tags)
    env = cloud.create_environment(EnvSpec(ENV_RG, ENV, "eastus", tags, "gpu", GPU_TYPE))
    assert f"/resourceGroups/{ENV_RG}/" in env.id
    sdk = cloud.clients.apps

    # an app: stored in its own group, pointing at the environment's; updates of it work
    explorer = ContainerDef("explorer", DEFAULT_IMAGE, 8.0, "56Gi", command=("sleep",), args=("infinity",))
    app = cloud.create_app(AppSpec(RUN_RG, "explorer", "eastus", env.id, "gpu", explorer, tags))
    assert f"/resourceGroups/{RUN_RG}/" in app.id
    raw_app = sdk.container_apps.get(RUN_RG, "explorer")
    assert raw_app.environment_id.lower() == env.id.lower()
    assert raw_app.managed_environment_id.lower() == env.id.lower()
    scaled = cloud.scale_app(RUN_RG, "explorer", 1, 2)  # PATCH: answered 404 when the groups differed
    assert scaled.max_replicas == 2
    again = cloud.create_app(AppSpec(RUN_RG, "explorer", "eastus", env.id, "gpu", explorer, tags))
    assert again.id == app.id  # a second PUT updates the same app
    assert [a.name for a in cloud.list_apps(RUN_RG)] == ["explorer"]
    assert cloud.list_apps(ENV_RG) == []
    smi = cloud.exec(RUN_RG, "explorer", ["nvidia-smi", "-L"], timeout=60)
    assert smi.exit_code == 0 and "GPU 0" in smi.output

    # a job: id and listing in its own group; a PATCH updates it rather than creating a second one
    tester = ContainerDef("tester", DEFAULT_IMAGE, 8.0, "56Gi", command=("sh",), args=("-c", "echo cross-rg"))
    job = cloud.create_job(JobSpec(RUN_RG, "tester", "eastus", env.id, "gpu", tester, tags, 7200))
    assert f"/resourceGroups/{RUN_RG}/providers/Microsoft.App/jobs/tester" in job.id
    assert sdk.jobs.get(RUN_RG, "tester").environment_id.lower() == env.id.lower()
    sdk.jobs.begin_update(RUN_RG, "tester", {"tags": {**tags, "patched": "yes"}}).result()
    assert [j.name for j in cloud.list_jobs(RUN_RG)] == ["tester"]
    assert cloud.list_jobs(ENV_RG) == []
    assert [j.id for j in sdk.jobs.list_by_subscription()] == [job.id]
    assert sdk.jobs.get(RUN_RG, "tester").tags["patched"] == "yes"

    # the job's data-plane token (minted in the run's group) opens its execution's log stream
    execution = cloud.start_job(RUN_RG, "tester")
    lines = list(cloud.job_logs(RUN_RG, "tester", execution, timeout=60))
    assert any("cross-rg" in line for line in lines), lines
    assert wait_finished(cloud, RUN_RG, "tester", execution) == "Succeeded"

    # the run's group goes, the environment's stays
    cloud.delete_resource_group(RUN_RG, wait=True)
    assert cloud.get_app(RUN_RG, "explorer") is None
    assert cloud.get_environment(ENV_RG, ENV) is not None

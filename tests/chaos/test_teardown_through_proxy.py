"""Teardown behind the chaos proxy: a create whose answer was cut off lands after its delete.

Chaos seed 2017 (`up --env`, Ctrl-C early): the probe job's PUT went through but its answer was
cut off; the adapter sent the PUT again while teardown was deleting the job, so the job was made
again under its name after ARM had accepted the delete. That delete's operation then never ended,
and teardown waited on it until the judge stopped it, leaving the run's group and job behind.
"""

from __future__ import annotations

import time
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import timedelta

import pytest

from aca_gpu.azure.cloud import AzureCloud
from aca_gpu.config import DEFAULT_IMAGE, load_settings
from aca_gpu.emulator.server import EmulatorServer
from aca_gpu.models import ContainerDef, EnvSpec, JobSpec
from aca_gpu.naming import RunNames, run_tags
from aca_gpu.workflow.base.threads import spawn
from aca_gpu.workflow.engine.teardown import teardown_group
from tests.chaos.proxy import ChaosProxy

RUN = "px7t2d"
NAMES = RunNames(RUN)
GPU_TYPE = "Consumption-GPU-NC8as-T4"
TAGS = run_tags(RUN, owner="tests", ttl=timedelta(hours=1), gpu="t4")
POLL = 0.05
PATIENCE_S = 30.0  # far beyond a bounded teardown here; far below a delete's own wait (600 s)


def _cloud(upstream: EmulatorServer, proxy: ChaosProxy) -> AzureCloud:
    env = upstream.client_env() | {
        "ACAGPU_ARM_ENDPOINT": proxy.endpoint,
        "ACAGPU_CA_BUNDLE": proxy.ca_bundle,
        "ACAGPU_POLLING_INTERVAL": str(POLL),
    }
    return AzureCloud.from_settings(load_settings(env=env, file={}))


def test_a_job_made_again_after_its_delete_was_accepted_does_not_hold_teardown(
    upstream: EmulatorServer, proxy: ChaosProxy
) -> None:
    cloud = _cloud(upstream, proxy)
    cloud.create_resource_group(NAMES.resource_group, "eastus", TAGS)
    env = cloud.create_environment(
        EnvSpec(NAMES.resource_group, NAMES.environment, "eastus", TAGS, "gpu", GPU_TYPE)
    )
    probe = ContainerDef("cuda-probe", DEFAULT_IMAGE, 8.0, "56Gi", command=("nvidia-smi",))
    spec = JobSpec(NAMES.resource_group, "cuda-probe-px7t2d", "eastus", env.id, "gpu", probe, TAGS, 600)
    cloud.create_job(spec)
    proxy.set_rules([{"fault": "truncate", "method": "PUT", "path": "/jobs/[^/]+$", "count": 1}])
    accepted: list[str] = []

    def deleted(name: str) -> None:
        accepted.append(name)
        if len(accepted) == 1:  # the probe's create, sent again, lands right after the delete
            cloud.create_job(spec)

    started = time.monotonic()
    teardown = spawn(
        lambda: teardown_group(cloud, NAMES.resource_group, poll=POLL, on_deleted=deleted), "test-teardown"
    )
    try:
        result = teardown.result(timeout=PATIENCE_S)
    except FutureTimeout:
        pytest.fail(f"teardown still waiting on the first delete's operation after {PATIENCE_S:.0f} s")
    took = time.monotonic() - started

    assert [e["fault"] for e in proxy.events] == ["truncate"]  # the create's answer was cut off
    # deleted, listed again, deleted again (on a busy machine the listing after the second delete
    # can still show the job going, and it is deleted once more: harmless, and bounded)
    assert accepted[:2] == [spec.name, spec.name] and set(accepted) == {spec.name}, accepted
    assert len(accepted) <= 4, accepted
    assert (result.status, result.verified, result.billing_stopped) == ("deleted", True, True)
    assert took < 20.0, took
    inventory = upstream.inventory()
    assert not [g for g in inventory["resource_groups"] if g["name"] == NAMES.resource_group]
    assert not [j for j in inventory.get("jobs", []) if j["name"] == spec.name], inventory.get("jobs")

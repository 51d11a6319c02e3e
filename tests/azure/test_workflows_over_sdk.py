"""Workflows over the real AzureCloud on autospec'd SDK clients: call order, cleanup, tag guards.

The workflow tests in tests/workflow use a double of the Cloud; these run the same workflows one
layer lower, so a mismatch between what a workflow asks and what the adapter sends would show here.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from azure.core.exceptions import ResourceNotFoundError
from azure.mgmt.appcontainers import models as m
from azure.mgmt.resource.resources import models as rm

from aca_gpu.azure.clients import Clients
from aca_gpu.config import Settings
from aca_gpu.errors import AcaGpuError
from aca_gpu.naming import run_tags
from aca_gpu.output import NullProgress
from aca_gpu.workflow.base.context import RunRef, Waiter
from aca_gpu.workflow.engine.plan import UpRequest, make_plan
from aca_gpu.workflow.fleet import reap as reap_flow
from aca_gpu.workflow.fleet.down import down
from aca_gpu.workflow.tester.up import up
from tests.unit.test_translate import arm_error

from .test_adapter import Poller, cloud_of

NOW = datetime.now(UTC)


def _group(name: str, tags: dict[str, str]) -> rm.ResourceGroup:
    return rm.ResourceGroup({"name": name, "location": "eastus", "tags": tags})


class Groups:
    """Resource groups as ARM keeps them: get answers 404 once a delete was accepted."""

    def __init__(self, rgs: Any, *groups: rm.ResourceGroup) -> None:
        self.live = {g.name: g for g in groups}
        rgs.get.side_effect = self.get
        rgs.begin_delete.side_effect = self.begin_delete
        rgs.create_or_update.side_effect = self.create

    def get(self, name: str) -> rm.ResourceGroup:
        if name not in self.live:
            raise ResourceNotFoundError(f"Resource group '{name}' could not be found.")
        return self.live[name]

    def begin_delete(self, name: str, **kwargs: Any) -> Poller:
        self.live.pop(name, None)
        return Poller()

    def create(self, name: str, body: Any) -> rm.ResourceGroup:
        tags = dict(body["tags"] if isinstance(body, dict) else body.tags)
        self.live[name] = _group(name, tags)
        return self.live[name]


def test_reap_deletes_only_the_expired_managed_group(clients: Clients) -> None:
    expired = _group(
        "rg-acagpu-old1", run_tags("old1", owner="me", ttl=timedelta(hours=1), now=NOW - timedelta(hours=3))
    )
    fresh = _group("rg-acagpu-new1", run_tags("new1", owner="me", ttl=timedelta(hours=1), now=NOW))
    kept = _group(
        "rg-acagpu-kept",
        run_tags("kept", owner="me", ttl=timedelta(hours=1), now=NOW - timedelta(hours=3), keep=True),
    )
    impostor = _group("rg-prod", {"acagpu:managed": "false", "acagpu:expires-at": "2000-01-01T00:00:00Z"})
    rgs = clients.resources.resource_groups
    rgs.list.return_value = iter([expired, fresh, kept, impostor])
    Groups(rgs, expired, fresh, kept, impostor)

    clients.apps.container_apps.list_by_resource_group.return_value = []
    clients.apps.jobs.list_by_resource_group.return_value = []
    report = reap_flow.reap({"sub": cloud_of(clients)}, delete=True, poll=0.01)

    assert rgs.list.call_count == 2  # one listing finds the groups, one verifies the delete
    assert "tagName eq 'acagpu:managed'" in rgs.list.call_args_list[0].kwargs["filter"]
    rgs.begin_delete.assert_called_once_with("rg-acagpu-old1", polling=False)
    clients.apps.container_apps.list_by_resource_group.assert_called_with("rg-acagpu-old1")
    assert {i.resource_group: i.status for i in report.items} == {
        "rg-acagpu-old1": "deleted",
        "rg-acagpu-new1": "skipped",
        "rg-acagpu-kept": "skipped",
    }  # rg-prod never reaches the reaper: the adapter drops groups whose tag is not exactly true


def test_down_refuses_a_group_without_the_managed_tag(clients: Clients) -> None:
    rgs = clients.resources.resource_groups
    Groups(rgs, _group("rg-acagpu-x1", {"acagpu:run-id": "x1"}))  # no acagpu:managed
    with pytest.raises(AcaGpuError) as raised:
        down(cloud_of(clients), RunRef(resource_group="rg-acagpu-x1"), NullProgress(), Waiter(interval=0))
    assert raised.value.exit_code == 2 and "acagpu:managed" in raised.value.message
    rgs.begin_delete.assert_not_called()


def test_up_quota_failure_tears_down_what_it_made_in_order(clients: Clients) -> None:
    settings = Settings(subscription="s", polling_interval=0.01)
    plan = make_plan(settings, UpRequest(run_id="quota1", gpu="t4"), owner="me")
    clients.resources.providers.get.return_value = rm.Provider({"registrationState": "Registered"})
    clients.apps.available_workload_profiles.get.return_value = iter(
        [m.AvailableWorkloadProfile({"name": "Consumption-GPU-NC8as-T4", "properties": {"gpus": 1}})]
    )
    rgs = clients.resources.resource_groups
    groups = Groups(rgs)
    envs = clients.apps.managed_environments
    envs.get.side_effect = ResourceNotFoundError("none yet")
    envs.begin_create_or_update.side_effect = arm_error(
        400,
        "ManagedEnvironmentQuotaExceeded",
        "Maximum Allowed Cores exceeded for the Managed Environment. "
        "Please check https://learn.microsoft.com/en-us/azure/container-apps/quotas for resource limits.",
    )

    clients.apps.container_apps.list_by_resource_group.return_value = []
    clients.apps.jobs.list_by_resource_group.return_value = []
    outcome = up(cloud_of(clients), plan, NullProgress(), Waiter(interval=0))

    assert outcome.exit_code == 3, outcome.document()["error"]
    assert outcome.document()["teardown"] == {
        "status": "deleting",
        "verified": False,
        "billing_stopped": True,
    }
    body = rgs.create_or_update.call_args.args[1]
    assert dict(body["tags"] if isinstance(body, dict) else body.tags)["acagpu:managed"] == "true"
    env_body = envs.begin_create_or_update.call_args.args[2]
    profiles = env_body["properties"]["workloadProfiles"]
    assert all("minimumCount" not in p for p in profiles)  # never min/max on Consumption-GPU
    clients.apps.container_apps.begin_create_or_update.assert_not_called()
    clients.apps.jobs.begin_create_or_update.assert_not_called()
    order = [c[0] for c in rgs.mock_calls]
    assert order.index("create_or_update") < order.index("begin_delete")
    rgs.begin_delete.assert_called_once_with(plan.names.resource_group, polling=False)
    assert not groups.live

"""Emulator support for `acagpu guard`: schedule-triggered jobs on the emulator's clock, managed
identity inside containers (a real process fetching a real token), and Microsoft.Authorization
(role definitions and assignments, and ARM refusing what a role does not grant)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import requests
from azure.core.exceptions import HttpResponseError
from azure.mgmt.appcontainers import ContainerAppsAPIClient
from azure.mgmt.resource.resources import ResourceManagementClient

from aca_gpu import guard
from aca_gpu.emulator.providers.authorization import models as authz
from aca_gpu.emulator.server import EmulatorServer
from tests.emulator.helpers import LOCATION, SCALE, env_id, make_env, make_rg

AUTH = "providers/Microsoft.Authorization"
# what the container runs: a token from its identity, then one ARM read, printed
PROBE = """
import json, os, sys, urllib.request, urllib.error
q = os.environ["IDENTITY_ENDPOINT"] + "?resource=https://management.azure.com/&api-version=2019-08-01"
req = urllib.request.Request(q, headers={"X-IDENTITY-HEADER": os.environ["IDENTITY_HEADER"]})
token = json.loads(urllib.request.urlopen(req).read())["access_token"]
url = os.environ["ARM"] + "/subscriptions/" + os.environ["SUB"] + "/resourcegroups?api-version=2021-04-01"
try:
    urllib.request.urlopen(urllib.request.Request(url, headers={"Authorization": "Bearer " + token}))
    print("probe: 200")
except urllib.error.HTTPError as exc:
    print("probe:", exc.code, json.loads(exc.read())["error"]["code"])
"""


def _job(
    server: EmulatorServer, *, trigger: dict[str, Any], container: dict[str, Any], identity: bool
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "location": LOCATION,
        "properties": {
            "environmentId": env_id(server.subscription, "rg-acagpu-t1", "cae-acagpu-t1"),
            "configuration": {"replicaTimeout": 600, "replicaRetryLimit": 0, **trigger},
            "template": {"containers": [container]},
        },
    }
    if identity:
        body["identity"] = {"type": "SystemAssigned"}
    return body


def _admin(server: EmulatorServer, method: str, path: str, **kwargs: Any) -> requests.Response:
    params = {"api-version": "2022-04-01", **kwargs.pop("params", {})}
    return requests.request(
        method,
        f"{server.endpoint}/subscriptions/{server.subscription}/{path}",
        params=params,
        headers={"Authorization": f"Bearer {server.token}"},
        verify=server.ca_bundle,
        timeout=30,
        **kwargs,
    )


def _console(server: EmulatorServer, job: str, execution: str) -> list[str]:
    resp = requests.get(
        f"{server.endpoint}/_emulator/console",
        params={"rg": "rg-acagpu-t1", "job": job, "execution": execution},
        headers={"Authorization": f"Bearer {server.token}"},
        verify=server.ca_bundle,
        timeout=30,
    )
    resp.raise_for_status()
    lines: list[str] = resp.json()["lines"]
    return lines


def _finished(aca: ContainerAppsAPIClient, job: str, deadline_s: float = 20.0) -> list[Any]:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        done = [
            e for e in aca.jobs_executions.list("rg-acagpu-t1", job) if e.status in ("Succeeded", "Failed")
        ]
        if done:
            return done
        time.sleep(0.05)
    raise AssertionError(f"no execution of {job} finished")


def test_a_schedule_starts_executions_on_the_emulated_clock(
    server: EmulatorServer, arm: ResourceManagementClient, aca: ContainerAppsAPIClient
) -> None:
    make_rg(arm)
    make_env(aca)
    every_minute = {"triggerType": "Schedule", "scheduleTriggerConfig": {"cronExpression": "* * * * *"}}
    container = {"name": "tick", "image": "busybox", "command": ["sleep", "1"]}
    aca.jobs.begin_create_or_update(
        "rg-acagpu-t1", "ticker", _job(server, trigger=every_minute, container=container, identity=False)
    ).result()
    time.sleep(2.0)  # at time scale 0.002 an emulated minute is 0.12 s; one run lasts ~0.6 s
    started = list(aca.jobs_executions.list("rg-acagpu-t1", "ticker"))
    assert len(started) >= 2
    assert (
        aca.jobs.get("rg-acagpu-t1", "ticker").configuration.schedule_trigger_config.cron_expression
        == "* * * * *"
    )


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({"cronExpression": "61 * * * *"}, "Invalid cron expression"),
        ({"cronExpression": "every hour"}, "Invalid cron expression"),
        ({}, "scheduleTriggerConfig.cronExpression"),
    ],
)
def test_a_bad_schedule_is_refused(
    server: EmulatorServer,
    arm: ResourceManagementClient,
    aca: ContainerAppsAPIClient,
    config: dict[str, str],
    says: str,
) -> None:
    make_rg(arm)
    make_env(aca)
    trigger = {"triggerType": "Schedule", "scheduleTriggerConfig": config}
    container = {"name": "tick", "image": "busybox"}
    with pytest.raises(HttpResponseError) as err:
        aca.jobs.begin_create_or_update(
            "rg-acagpu-t1", "bad", _job(server, trigger=trigger, container=container, identity=False)
        ).result()
    assert err.value.status_code == 400 and says in str(err.value)


def test_identity_token_in_the_container_and_arm_grants_only_what_the_role_allows(
    server: EmulatorServer, arm: ResourceManagementClient, aca: ContainerAppsAPIClient, tmp_path: Path
) -> None:
    make_rg(arm)
    make_env(aca)
    script = tmp_path / "probe.py"
    script.write_text(PROBE, encoding="utf-8")
    spec = guard.guard_container({"ARM": server.endpoint, "SUB": server.subscription}, script=script)
    container = {
        "name": "guard",
        "image": spec.image,
        "command": spec.command,
        "env": [{"name": k, "value": v} for k, v in spec.env.items()],
    }
    manual = {"triggerType": "Manual", "manualTriggerConfig": {"parallelism": 1, "replicaCompletionCount": 1}}
    job = aca.jobs.begin_create_or_update(
        "rg-acagpu-t1", "prober", _job(server, trigger=manual, container=container, identity=True)
    ).result()
    principal = job.identity.principal_id
    assert uuid.UUID(principal) and job.identity.tenant_id

    first = aca.jobs.begin_start("rg-acagpu-t1", "prober").result()
    _finished(aca, "prober")
    assert "probe: 403 AuthorizationFailed" in _console(server, "prober", first.name)

    # a custom role that may read groups, assigned at subscription scope, and the same call passes
    role = {
        "properties": {
            "roleName": "reader of groups",
            "type": "CustomRole",
            "assignableScopes": [f"/subscriptions/{server.subscription}"],
            "permissions": [{"actions": ["Microsoft.Resources/subscriptions/resourceGroups/read"]}],
        }
    }
    role_guid = str(uuid.uuid4())
    created = _admin(server, "PUT", f"{AUTH}/roleDefinitions/{role_guid}", json=role)
    assert created.status_code == 201, created.text
    again = _admin(server, "PUT", f"{AUTH}/roleDefinitions/{uuid.uuid4()}", json=role)
    assert again.status_code == 409 and again.json()["error"]["code"] == "RoleDefinitionWithSameNameExists"
    found = _admin(
        server,
        "GET",
        f"{AUTH}/roleDefinitions",
        params={"api-version": "2022-04-01", "$filter": "roleName eq 'reader of groups'"},
    )
    assert [d["name"] for d in found.json()["value"]] == [role_guid]
    assignment = {
        "properties": {
            "roleDefinitionId": created.json()["id"],
            "principalId": principal,
            "principalType": "ServicePrincipal",
        }
    }
    nobody = {"properties": {**assignment["properties"], "principalId": str(uuid.uuid4())}}
    assert (
        _admin(server, "PUT", f"{AUTH}/roleAssignments/{uuid.uuid4()}", json=nobody).json()["error"]["code"]
        == "PrincipalNotFound"
    )
    put = _admin(server, "PUT", f"{AUTH}/roleAssignments/{uuid.uuid4()}", json=assignment)
    assert put.status_code == 201, put.text
    listed = _admin(
        server,
        "GET",
        f"{AUTH}/roleAssignments",
        params={"api-version": "2022-04-01", "$filter": f"principalId eq '{principal}'"},
    )
    assert [a["properties"]["principalId"] for a in listed.json()["value"]] == [principal]
    # an assignment grants its role only once it has propagated (authz.PROPAGATION_S, emulated)
    time.sleep(authz.PROPAGATION_S * SCALE + 0.1)

    second = aca.jobs.begin_start("rg-acagpu-t1", "prober").result()
    end = time.monotonic() + 20
    while "probe: 200" not in _console(server, "prober", second.name) and time.monotonic() < end:
        time.sleep(0.05)
    assert "probe: 200" in _console(server, "prober", second.name)

    assert _admin(server, "DELETE", f"{AUTH}/roleAssignments/{put.json()['name']}").status_code == 200
    assert _admin(server, "GET", f"{AUTH}/roleAssignments/{put.json()['name']}").status_code == 404


def test_a_deny_fault_takes_a_right_from_the_emulators_credentials(server: EmulatorServer) -> None:
    action = "Microsoft.Authorization/roleAssignments/write"
    server.set_faults(f"deny:action={action}")
    try:
        perms = _admin(server, "GET", f"{AUTH}/permissions").json()["value"]
        assert perms == [{"actions": ["*"], "notActions": [action], "dataActions": [], "notDataActions": []}]
        refused = _admin(server, "PUT", f"{AUTH}/roleAssignments/{uuid.uuid4()}", json={"properties": {}})
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "AuthorizationFailed"
    finally:
        server.set_faults("")

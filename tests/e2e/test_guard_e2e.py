"""`acagpu guard` end to end with real processes: `emulator serve`, `guard install`, `up --keep`, then
nothing from this side until the guard's scheduled job has deleted the expired run, and only it.

The run's TTL is 10 s here to keep the suite quick (ACAGPU_GUARD_E2E_TTL=1m runs the issue's exact
scenario); the guard period is 15 emulated minutes, 4.5 wall seconds at time scale 0.005.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import requests
from click.testing import CliRunner

from aca_gpu.cli import cli
from aca_gpu.emulator.server import subscription_ids
from aca_gpu.naming import parse_iso_utc
from tests.e2e.serving import emulator_serve
from tests.e2e.webhook import Receiver, webhook

ACAGPU = [sys.executable, "-m", "aca_gpu"]
SCALE = 0.005
PERIOD_S = 15 * 60 * SCALE
TTL = os.environ.get("ACAGPU_GUARD_E2E_TTL", "10s")
OTHER_SUBSCRIPTION = subscription_ids(2)[1]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[dict[str, str]]:
    with emulator_serve(tmp_path / "emu.env", time_scale=SCALE, extra=("--subscriptions", "2")) as found:
        yield found


@pytest.fixture
def hook() -> Iterator[Receiver]:
    with webhook() as receiver:
        yield receiver


def _acagpu(shell: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=timeout)


class Arm:
    """The emulator's ARM as the test's own admin client (plain HTTPS)."""

    def __init__(self, emu: dict[str, str], subscription: str | None = None) -> None:
        self.base = f"{emu['ACAGPU_ARM_ENDPOINT']}/subscriptions/{subscription or emu['ACAGPU_SUBSCRIPTION']}"
        self.root = emu["ACAGPU_ARM_ENDPOINT"]
        self.headers = {"Authorization": f"Bearer {emu['ACAGPU_TOKEN']}"}
        self.verify = emu["ACAGPU_CA_BUNDLE"]

    def call(self, method: str, path: str, api: str = "2021-04-01", **kwargs: Any) -> Any:
        params = {"api-version": api, **kwargs.pop("params", {})}
        resp = requests.request(
            method,
            f"{self.base}{path}",
            params=params,
            headers=self.headers,
            verify=self.verify,
            timeout=30,
            **kwargs,
        )
        return resp.json() if resp.content else None

    def groups(self) -> dict[str, dict[str, str]]:
        return {g["name"]: g.get("tags") or {} for g in self.call("GET", "/resourcegroups")["value"]}

    def console(self, job: str, execution: str) -> list[str]:
        resp = requests.get(
            f"{self.root}/_emulator/console",
            params={"rg": "rg-acagpu-guard", "job": job, "execution": execution},
            headers=self.headers,
            verify=self.verify,
            timeout=30,
        )
        lines: list[str] = resp.json().get("lines", [])
        return lines


@pytest.mark.slow(26)
def test_the_guard_deletes_an_expired_kept_run_with_nobody_at_the_laptop(
    served: dict[str, str], hook: Receiver
) -> None:
    shell = os.environ | served | {"ACAGPU_POLLING_INTERVAL": "0.1"}
    arm = Arm(served)
    other = OTHER_SUBSCRIPTION  # the emulator's second subscription, guarded by the same job
    arm2 = Arm(served, other)

    installed = _acagpu(
        shell,
        *("guard", "install", "-l", "westus3", "--every", "15m", "-o", "json"),
        *("--scope", f"/subscriptions/{other}", "--notify", hook.url, "--yes"),
    )
    assert installed.returncode == 0, installed.stderr
    doc = json.loads(installed.stdout)
    assert doc["cron"] == "*/15 * * * *" and doc["dry_run"] is False
    assert doc["role_scopes"] == [
        f"/subscriptions/{served['ACAGPU_SUBSCRIPTION']}",
        f"/subscriptions/{other}",
    ]
    assert len(doc["role_assignments"]) == 2 and doc["notify"] == "127.0.0.1"
    assert hook.url not in installed.stdout + installed.stderr
    assert served["ACAGPU_TOKEN"] not in installed.stdout + installed.stderr
    # (the guard's first scheduled run may already have stamped when it ran: emulated minutes are
    # a moment here, and */15 can come due before this read)
    made = {k: v for k, v in arm.groups()["rg-acagpu-guard"].items() if k != "acagpu:guard-last-run"}
    assert made == {**doc["tags"]}
    assert doc["tags"]["acagpu:keep"] == "true"  # the reaper's rule keeps the guard's own group
    # a Consumption-only environment, answered as Azure answers one: no profiles, no WorkloadProfiles mode
    app_rp = "/resourceGroups/rg-acagpu-guard/providers/Microsoft.App"
    [env] = arm.call("GET", f"{app_rp}/managedEnvironments", api="2025-07-01")["value"]
    assert env["properties"]["workloadProfiles"] is None and "environmentMode" not in env["properties"]
    guard_job = arm.call("GET", f"{app_rp}/jobs/acagpu-guard", api="2025-07-01")
    assert guard_job["properties"]["workloadProfileName"] is None
    # the webhook URL is a job secret the script's env references: a GET of the job never shows it
    assert hook.url not in json.dumps(guard_job)
    [guard_container] = guard_job["properties"]["template"]["containers"]
    assert {"name": "ACAGPU_NOTIFY", "secretRef": "acagpu-notify"} in guard_container["env"]

    expired = {"acagpu:managed": "true", "acagpu:expires-at": "2020-01-01T00:00:00Z"}
    arm.call("PUT", "/resourcegroups/rg-not-ours", json={"location": "westus3"})
    arm.call(
        "PUT",
        "/resourcegroups/rg-kept",
        json={"location": "westus3", "tags": {**expired, "acagpu:keep": "true"}},
    )

    arm2.call("PUT", "/resourcegroups/rg-acagpu-elsewhere", json={"location": "eastus", "tags": expired})
    arm2.call(
        "PUT",
        "/resourcegroups/rg-kept-elsewhere",
        json={"location": "eastus", "tags": {**expired, "acagpu:keep": "true"}},
    )

    up = _acagpu(shell, "up", "--yes", "--keep", "--ttl", TTL, "--run-id", "guarded", "-o", "json")
    assert up.returncode == 0, up.stderr
    expires = parse_iso_utc(arm.groups()["rg-acagpu-guarded"]["acagpu:expires-at"])
    assert expires is not None

    # nothing from this side now: only watch
    wait_until = expires.timestamp() + PERIOD_S + 30
    while "rg-acagpu-guarded" in arm.groups() and time.time() < wait_until:
        time.sleep(0.2)
    gone_at = time.time()
    groups = arm.groups()
    assert "rg-acagpu-guarded" not in groups, "the guard did not delete the expired run"
    assert {"rg-not-ours", "rg-kept", "rg-acagpu-guard"} <= set(groups)
    assert set(arm2.groups()) == {"rg-kept-elsewhere"}  # the --scope subscription was swept too

    jobs = f"{app_rp}/jobs/acagpu-guard/executions"

    def deleters() -> list[dict[str, Any]]:
        found = []
        for execution in arm.call("GET", jobs, api="2025-07-01")["value"]:
            for line in arm.console("acagpu-guard", execution["name"]):
                if not line.startswith("acagpu-guard {"):
                    continue
                event = json.loads(line.split(" ", 1)[1])
                if event.get("group") == "rg-acagpu-guarded" and event.get("status") == "deleted":
                    found.append(execution)
                if event.get("group") in ("rg-not-ours", "rg-kept"):
                    assert event["status"] == "skipped", event
        return found

    end = time.monotonic() + 20  # the deleting execution logs once it has seen the group gone
    while not deleters() and time.monotonic() < end:
        time.sleep(0.5)
    deleted_by = deleters()
    assert len(deleted_by) == 1, "exactly one guard execution logs the deletion"
    started = datetime.fromisoformat(deleted_by[0]["properties"]["startTime"])
    assert started.timestamp() <= expires.timestamp() + PERIOD_S + 1.0  # within one guard period
    print(
        f"guard timing: ttl {TTL}, period {PERIOD_S:g} s; expiry -> deleting execution started "
        f"{started.timestamp() - expires.timestamp():.1f} s, "
        f"expiry -> group gone {gone_at - expires.timestamp():.1f} s"
    )

    end = time.monotonic() + 20  # the execution records its summary on the guard's group last
    while True:
        status = _acagpu(shell, "guard", "status", "-o", "json")
        assert status.returncode == 0, status.stderr
        report = json.loads(status.stdout)
        if report.get("last_deletion") or time.monotonic() > end:
            break
        time.sleep(0.5)
    assert report["installed"] and report["cron"] == "*/15 * * * *" and len(report["role_assignments"]) == 1
    assert "rg-acagpu-guarded" in report["last_deletion"]
    assert any(e["name"] == deleted_by[0]["name"] for e in report["executions"])

    end = time.monotonic() + 10  # each run that deleted posted one message to the webhook
    while not any("rg-acagpu-guarded" in m["text"] for m in hook.received()) and time.monotonic() < end:
        time.sleep(0.2)
    sent = hook.received()
    deleted = {(i["subscription"], i["resource_group"]) for m in sent for i in m["acagpu"]["items"]}
    assert (served["ACAGPU_SUBSCRIPTION"], "rg-acagpu-guarded") in deleted
    assert (other, "rg-acagpu-elsewhere") in deleted
    assert all(m["acagpu"]["source"] == "guard" and m["text"].startswith("*acagpu guard:") for m in sent)
    assert all(served["ACAGPU_TOKEN"] not in raw and "IDENTITY_HEADER" not in raw for raw in hook.raw)
    guarded = next(
        i for m in sent for i in m["acagpu"]["items"] if i["resource_group"] == "rg-acagpu-guarded"
    )
    assert guarded["status"] == "deleted" and guarded["spend_usd_estimate"] is not None

    removed = _acagpu(shell, "guard", "uninstall", "--yes", "-o", "json")
    assert removed.returncode == 0, removed.stderr
    gone = json.loads(removed.stdout)
    assert gone["teardown"]["status"] == "deleted" and len(gone["role_assignments_removed"]) == 2
    assert "rg-acagpu-guard" not in arm.groups()
    after = arm.call("GET", "/providers/Microsoft.Authorization/roleAssignments", api="2022-04-01")["value"]
    assert after == []
    assert json.loads(_acagpu(shell, "guard", "status", "-o", "json").stdout)["installed"] is False


def test_without_the_right_to_assign_roles_nothing_is_created(emu: Any) -> None:
    emu.set_faults("deny:action=Microsoft.Authorization/*/write")  # a Contributor, say
    result = CliRunner().invoke(cli, ["guard", "install", "-l", "westus3", "--yes"])
    assert result.exit_code == 2
    assert "Microsoft.Authorization/roleAssignments/write" in result.stderr
    # the caller is an application (as `check` reports it), so the hint names a service principal
    assert "--assignee-principal-type ServicePrincipal" in result.stderr, result.stderr
    assert 'az role assignment create --role "Role Based Access Control Administrator"' in result.stderr
    assert "az role definition create --role-definition" in result.stderr  # the role does not exist yet
    errors = [line for line in result.stderr.splitlines() if line.startswith(("error:", "hint:"))]
    assert "Traceback" not in result.stderr and len(errors) == 2
    inventory = emu.inventory()
    assert not inventory.get("resource_groups") and not inventory.get("jobs"), inventory


def test_when_arm_does_not_list_permissions_the_refused_assignment_undoes_the_install(emu: Any) -> None:
    emu.set_faults("deny:action=Microsoft.Authorization/roleAssignments/write,permissions=hidden")
    result = CliRunner().invoke(cli, ["guard", "install", "-l", "westus3", "--yes"])
    assert result.exit_code == 2, result.stderr
    assert "may not assign roles" in result.stderr and "is deleted" in result.stderr
    assert 'az role assignment create --role "Role Based Access Control Administrator"' in result.stderr
    assert "Traceback" not in result.stderr
    groups = {g["name"]: g for g in emu.inventory()["resource_groups"]}
    guard_group = groups.get("rg-acagpu-guard")
    assert guard_group is None or guard_group.get("deleting"), guard_group  # on its way out
    assert not emu.inventory().get("jobs"), "the scheduled job was removed first"


def test_install_asks_before_a_subscription_scope_role_assignment(emu: Any) -> None:
    result = CliRunner().invoke(cli, ["guard", "install", "-l", "westus3"])  # no terminal, no --yes
    assert result.exit_code == 2 and "--yes" in result.stderr, result.stderr
    assert not emu.inventory().get("resource_groups"), "nothing is created before the answer"


def test_a_scope_where_roles_cannot_be_assigned_stops_the_install_with_its_commands(emu: Any) -> None:
    home, allowed, denied = emu.subscriptions[0], emu.subscriptions[1], emu.subscriptions[2]
    emu.set_faults(f"deny:action=Microsoft.Authorization/*/write,subscription={denied}")
    scopes = ["--scope", f"/subscriptions/{allowed}", "--scope", denied]
    result = CliRunner().invoke(cli, ["guard", "install", "-l", "westus3", "--yes", *scopes])
    assert result.exit_code == 2, result.stderr
    assert f"on /subscriptions/{denied}" in result.stderr
    assert f"--scope /subscriptions/{denied} " in result.stderr  # the exact command for that scope
    assert f"--scope /subscriptions/{allowed} " not in result.stderr  # nothing asked where it may
    definition = result.stderr.split("az role definition create --role-definition '", 1)[1].split("'", 1)[0]
    assert json.loads(definition)["AssignableScopes"] == [
        f"/subscriptions/{s}" for s in (home, allowed, denied)
    ]
    assert "Traceback" not in result.stderr
    for sub in (home, allowed, denied):
        assert not emu.inventory(sub)["resource_groups"], sub  # nothing was created anywhere
    bad = CliRunner().invoke(
        cli,
        [
            "guard",
            "install",
            "-l",
            "westus3",
            "--scope",
            "/providers/Microsoft.Management/managementGroups/mg1",
            "--yes",
        ],
    )
    assert bad.exit_code == 2 and "management groups are not supported yet" in bad.stderr

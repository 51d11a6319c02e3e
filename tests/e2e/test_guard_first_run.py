"""The guard's first scheduled runs come before its role assignment is effective, and must not fail
for it; a run that does fail says why in `guard status`; no run leaves a folder on this machine.

Real processes: `acagpu emulator serve` (a role assignment grants its role only 120 emulated seconds
after ARM accepted it, 2.4 wall seconds here; the guard runs every emulated minute, 1.2 wall
seconds), `acagpu guard install/status` as subprocesses, a webhook receiver for `--notify`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.e2e.serving import emulator_serve
from tests.e2e.webhook import webhook

ACAGPU = [sys.executable, "-m", "aca_gpu"]
SCALE = 0.02
JOB = "/resourceGroups/rg-acagpu-guard/providers/Microsoft.App/jobs/acagpu-guard"


def _acagpu(shell: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=120)


def _arm(emu: dict[str, str], method: str, path: str, api: str, body: Any = None) -> Any:
    answer = requests.request(
        method,
        f"{emu['ACAGPU_ARM_ENDPOINT']}/subscriptions/{emu['ACAGPU_SUBSCRIPTION']}{path}",
        params={"api-version": api},
        json=body,
        headers={"Authorization": f"Bearer {emu['ACAGPU_TOKEN']}"},
        verify=emu["ACAGPU_CA_BUNDLE"],
        timeout=30,
    )
    assert answer.status_code < 300, answer.text
    return answer.json() if answer.content else None


def _status(shell: dict[str, str]) -> dict[str, Any]:
    found = _acagpu(shell, "guard", "status", "-o", "json")
    assert found.returncode == 0, found.stderr
    doc: dict[str, Any] = json.loads(found.stdout)
    return doc


def _ended(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in doc.get("executions") or [] if e["status"] in ("Succeeded", "Failed")]


def _guard_folders(emu: dict[str, str]) -> list[Path]:
    """The folders the emulator made for guard replicas (the run's HOME, PATH shims and /tmp), in its
    work directory (where its CA is): what a stopped replica must not leave behind."""
    workdir = Path(emu["ACAGPU_CA_BUNDLE"]).parent
    return [p for p in workdir.iterdir() if p.is_dir() and "acagpu-guard" in p.name]


@pytest.mark.slow(70)
def test_the_first_runs_wait_for_the_role_and_a_failed_run_says_why(tmp_path: Path) -> None:
    with emulator_serve(tmp_path / "emu.env", time_scale=SCALE) as emu, webhook() as hook:
        shell = os.environ | emu | {"ACAGPU_POLLING_INTERVAL": "0.1"}
        shell.pop("ACAGPU_CONFIG", None)
        installed = _acagpu(
            shell, "guard", "install", "-l", "eastus", "--every", "1m", "--yes", "--notify", hook.url
        )
        assert installed.returncode == 0, installed.stderr

        deadline = (
            time.monotonic() + 120
        )  # runs every emulated minute: ~10 s apart idle, far more on a busy machine
        while len(_ended(doc := _status(shell))) < 3:  # the first three runs, the role not yet effective
            assert time.monotonic() < deadline, doc["executions"]
            time.sleep(0.5)
        assert all(e["status"] == "Succeeded" for e in _ended(doc)), doc["executions"]
        assert not [m for m in hook.received() if "failed 0" not in m["text"]], hook.received()

        # the guard may wait 1 s for its role, then the identity loses it: the next run fails, and
        # says why. The template changes first: a run that began between the two with the default
        # wait (600 wall seconds) would hold the schedule until its replica timeout
        job = _arm(emu, "GET", JOB, "2025-07-01")
        job["properties"]["template"]["containers"][0]["env"].append(
            {"name": "ACAGPU_GUARD_AUTH_WAIT_S", "value": "1"}
        )
        job["properties"]["configuration"]["secrets"] = [{"name": "acagpu-notify", "value": hook.url}]
        _arm(emu, "PUT", JOB, "2025-07-01", job)
        roles = "/providers/Microsoft.Authorization/roleAssignments"
        for assignment in _arm(emu, "GET", roles, "2022-04-01")["value"]:
            _arm(emu, "DELETE", f"{roles}/{assignment['name']}", "2022-04-01")
        # a run begun before the change is a real process with its real 1800 s replica timeout, and
        # none starts while it runs: stop it, so the next scheduled run is one of the new template
        _arm(emu, "POST", f"{JOB}/stop", "2025-07-01")
        deadline = (
            time.monotonic() + 120
        )  # runs every emulated minute: ~10 s apart idle, far more on a busy machine
        while True:  # a run started after the change (one in flight may end at its deadline instead)
            doc = _status(shell)
            if any(e["status"] == "Failed" and e["exit_code"] == 6 for e in _ended(doc)):
                break
            assert time.monotonic() < deadline, doc["executions"]
            time.sleep(0.5)
        assert all(e["reason"] for e in _ended(doc) if e["status"] == "Failed"), doc["executions"]
        failed = next(e for e in doc["executions"] if e["status"] == "Failed" and e["exit_code"] == 6)
        assert "exit 6" in failed["reason"] and "no role assignment" in failed["reason"], failed
        table = _acagpu(shell, "guard", "status")
        assert "why: exit 6" in table.stdout, table.stdout

        # each run's folders (its TMPDIR among them: the zero-build bootstrap's mkdtemp) went with it
        assert len(_ended(doc)) >= 4
        running = len(doc["executions"]) - len(_ended(doc))
        assert len(_guard_folders(emu)) <= running + 1, _guard_folders(emu)  # + one begun since
        uninstalled = _acagpu(shell, "guard", "uninstall", "--yes")
        assert uninstalled.returncode == 0, uninstalled.stderr

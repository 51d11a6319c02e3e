"""A warm environment made again while its last one is still being deleted (a newcomer pasting one
section after another did this): Azure refuses the group's PUT with 409 ResourceGroupBeingDeleted.
That is a clear refusal with what to do (exit 2), not an unexpected failure (exit 1); so is a run
inside the environment meanwhile. `reap` and `env list` say it is being deleted, in their columns."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.e2e.serving import ACAGPU, emulator_serve


def _acagpu(shell: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ACAGPU, *args], env=shell, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120
    )


def test_env_create_while_its_group_is_still_deleting_is_refused_clearly(tmp_path: Path) -> None:
    # the emulator's default speed: an environment's delete takes ~11 s, long enough to meet it
    with emulator_serve(tmp_path / "emu.env", time_scale=None) as emu:
        shell = {**os.environ, **emu, "ACAGPU_POLLING_INTERVAL": "0.2"}
        assert _acagpu(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes").returncode == 0
        assert _acagpu(shell, "env", "delete", "lab", "--yes").returncode == 0  # returns while deleting
        # a run inside it is refused by its name and state, before it makes anything (it failed on
        # its own group's PUT with "create resource group rg-acagpu-env-lab: ... deprovisioning")
        inside = _acagpu(shell, "run", "--env", "lab", "--yes", "-o", "json", "busybox", "--", "true")
        # reap says it is being deleted (not "idle within its TTL") and sends no second delete
        reaped = _acagpu(shell, "reap", "--yes", "-o", "json")
        # env list keeps its columns aligned for the long state (`scheduledfordelete`)
        listed = _acagpu(shell, "env", "list")
        again = _acagpu(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes")
    assert reaped.returncode == 0, reaped.stderr
    (item,) = json.loads(reaped.stdout)["items"]
    assert (item["status"], item["reason"]) == ("skipped", "being deleted (provisioningState Deleting)")
    header, row = listed.stdout.splitlines()[:2]
    assert row.split()[1] == "scheduledfordelete", row
    assert row.index("eastus") == header.index("REGION"), (header, row)
    assert row.index("Consumption-GPU") == header.index("GPU PROFILES"), (header, row)
    assert inside.returncode == 2, inside.stderr
    refused = json.loads(inside.stdout)["error"]
    assert refused["code"] == "EnvironmentDeleting", refused
    assert refused["message"] == "warm environment 'lab' is being deleted (resource group rg-acagpu-env-lab)"
    assert again.returncode == 2, again.stderr
    errors = [line for line in again.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "rg-acagpu-env-lab" in errors[0], errors
    assert "ResourceGroupBeingDeleted" in errors[0], errors
    assert "hint: its earlier delete is still running" in again.stderr, again.stderr
    assert "Traceback" not in again.stderr, again.stderr

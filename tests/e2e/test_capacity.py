"""No capacity is exit 3, not a timeout: real processes against `acagpu emulator serve` with the
`wpfull` fault (a replica never placed, its record "WorkLoad Profile Full", as #1705 reports it).

The error quotes the platform's evidence, and its hint names only the flags the command has:
`--regions` and `--gpu a100,t4` for a cold `up`, neither for `up --env` (it runs where the
environment is), no `--regions` for `check`. No message says the tester "did not finish" when
nothing was ever placed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from tests.e2e.serving import emulator_serve

ACAGPU = [sys.executable, "-m", "aca_gpu"]


def _acagpu(shell: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=180)


def _faults(emu: dict[str, str], spec: str) -> None:
    answer = requests.put(
        f"{emu['ACAGPU_ARM_ENDPOINT']}/_emulator/faults",
        data=spec,
        headers={"Authorization": f"Bearer {emu['ACAGPU_TOKEN']}"},
        verify=emu["ACAGPU_CA_BUNDLE"],
        timeout=10,
    )
    answer.raise_for_status()


@pytest.mark.slow(20)
def test_a_replica_never_placed_for_want_of_capacity_is_exit_3_with_its_evidence(tmp_path: Path) -> None:
    with emulator_serve(tmp_path / "emu.env") as emu:
        shell = os.environ | emu | {"ACAGPU_POLLING_INTERVAL": "0.1"}
        for key in ("ACAGPU_ENV", "ACAGPU_CONFIG", "ACAGPU_REGIONS"):
            shell.pop(key, None)
        made = _acagpu(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes")
        assert made.returncode == 0, made.stderr
        _faults(emu, "wpfull")

        cold = _acagpu(shell, "up", "--yes", "-o", "json")
        assert cold.returncode == 3, cold.stderr
        doc = json.loads(cold.stdout)
        error = doc["error"]
        assert error["code"] == "CapacityUnavailable", error
        assert "WorkLoad Profile Full" in error["message"], error  # the platform's own record
        assert "--regions" in error["hint"] and "--gpu a100,t4" in error["hint"], error
        said = cold.stdout + cold.stderr
        assert "did not finish within its deadline" not in said, said
        assert "timed out" not in error["message"], error

        warm = _acagpu(shell, "up", "--env", "lab", "--yes", "-o", "json")
        assert warm.returncode == 3, warm.stderr
        error = json.loads(warm.stdout)["error"]
        assert error["code"] == "CapacityUnavailable" and "WorkLoad Profile Full" in error["message"]
        assert "--regions" not in error["hint"], error  # `up --env` has no --regions
        assert "did not finish within its deadline" not in warm.stdout + warm.stderr

        # check: quota refused where the profile is offered; check has -l, not --regions
        _faults(emu, "quota:region=eastus,profile=T4,limit=0")
        checked = _acagpu(shell, "check", "-l", "eastus", "--gpu", "t4", "-o", "json")
        assert checked.returncode == 3, checked.stderr
        hint = json.loads(checked.stdout)["error"]["hint"]
        assert "--regions" not in hint and "-l" in hint, hint


def test_a_run_whose_container_is_never_placed_is_exit_3_not_still_running(tmp_path: Path) -> None:
    with emulator_serve(tmp_path / "emu.env", time_scale=0.01) as emu:
        shell = os.environ | emu | {"ACAGPU_POLLING_INTERVAL": "0.1"}
        for key in ("ACAGPU_ENV", "ACAGPU_CONFIG", "ACAGPU_REGIONS"):
            shell.pop(key, None)
        made = _acagpu(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes")
        assert made.returncode == 0, made.stderr
        _faults(emu, "wpfull")
        started = time.monotonic()
        done = _acagpu(shell, "run", "--yes", "--env", "lab", "--max-minutes", "1", "-o", "json",
                       "nvidia/cuda:12.4.1-base-ubuntu22.04", "--", "sh", "-c", "echo hi")  # fmt: skip
        took = time.monotonic() - started
        doc = json.loads(done.stdout)
        assert done.returncode == 3, done.stderr
        assert doc["error"]["code"] == "CapacityUnavailable", doc["error"]
        assert "WorkLoad Profile Full" in doc["error"]["message"]
        assert "--regions" not in doc["error"]["hint"], doc["error"]  # run --env has none
        assert "still running" not in done.stderr + done.stdout
        assert doc["cost"]["gpu_seconds"] == 0, doc["cost"]  # nothing ran, nothing billed
        assert took < 60, took  # the execution's deadline is 0.6 wall seconds here

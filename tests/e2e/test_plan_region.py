"""The plan shown is where the run goes: with the `env` setting, a warm environment's region wins
over the configured `location`, in `up --dry-run` and `run --dry-run` alike (real processes against
`acagpu emulator serve`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.e2e.serving import emulator_serve

ACAGPU = [sys.executable, "-m", "aca_gpu"]


def _acagpu(shell: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=120)


def test_a_dry_run_in_a_warm_environment_shows_the_environments_region(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('env = "lab"\nlocation = "westus3"\n', encoding="utf-8")
    with emulator_serve(tmp_path / "emu.env") as emu:
        shell = os.environ | emu | {"ACAGPU_POLLING_INTERVAL": "0.1"}
        shell.pop("ACAGPU_ENV", None)
        made = _acagpu(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes")
        assert made.returncode == 0, made.stderr
        shell["ACAGPU_CONFIG"] = str(config)
        up = _acagpu(shell, "up", "--dry-run", "-o", "json")
        assert up.returncode == 0, up.stderr
        planned = json.loads(up.stdout)
        assert planned["location"] == "eastus", planned
        table = _acagpu(shell, "up", "--dry-run")
        assert "westus3" not in table.stdout + table.stderr, table.stdout
        image = "nvidia/cuda:12.4.1-base-ubuntu22.04"
        run = _acagpu(shell, "run", "--dry-run", "-o", "json", image, "--", "true")
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout)["location"] == "eastus", run.stdout
        # the run itself goes there too
        done = _acagpu(shell, "up", "--yes", "-o", "json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["location"] == "eastus"
        # an environment that does not exist is bad input, found by the dry run as by the run
        missing = _acagpu(shell, "up", "--dry-run", "--env", "nowhere", "-o", "json")
        assert missing.returncode == 2, missing.stdout

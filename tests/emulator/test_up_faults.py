"""`up --emulator` honours ACAGPU_EMULATOR_FAULTS: a region's zero A100 quota ends the run with exit 3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from aca_gpu.cli import cli


def test_up_emulator_takes_its_faults_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.toml"
    config.write_text("")
    monkeypatch.setenv("ACAGPU_CONFIG", str(config))
    monkeypatch.setenv("ACAGPU_EMULATOR_FAULTS", "quota:region=eastus,profile=T4,limit=0")
    args = ["up", "--emulator", "--time-scale", "0.001", "--gpu", "t4", "-l", "eastus", "-o", "json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 3, result.output
    doc = json.loads(result.stdout)
    assert doc["error"]["exit_code"] == 3
    # the preflight reads the fault's quota from the emulator's usages and refuses before creating
    assert "0 of 0 used (usage ManagedEnvironmentConsumptionT4Gpus)" in doc["error"]["message"]

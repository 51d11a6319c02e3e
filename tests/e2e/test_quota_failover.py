"""Quota preflight and region failover end to end, over HTTPS against the emulator (issue: real Azure).

A region whose A100 quota is zero refuses `up` in seconds with nothing created; with `--regions` the
run moves on, cleans up the refused or hung attempt, and reports every attempt.
"""

from __future__ import annotations

import json
import time
from typing import Any

from click.testing import CliRunner

from aca_gpu.cli import cli

UP = ["up", "--yes", "--max-minutes", "5", "-o", "json"]


def _run(*args: str) -> tuple[int, dict[str, Any], str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip() else {}, result.stderr


def test_zero_a100_quota_refuses_up_in_seconds_with_nothing_created(emu: Any) -> None:
    emu.set_faults("quota:region=eastus,profile=A100,limit=0")
    started = time.monotonic()
    code, doc, err = _run(*UP, "--gpu", "a100", "-l", "eastus", "--run-id", "quota0")
    elapsed = time.monotonic() - started
    assert code == 3, err
    assert elapsed < 10, f"the refusal took {elapsed:.1f}s"
    assert "not enough GPU quota" in doc["error"]["message"]
    assert "ManagedEnvironmentConsumptionNCA100Gpus" in doc["error"]["message"]
    assert "0 of 0 used" in doc["error"]["message"]
    assert "Quota Management System" in doc["error"]["hint"]
    assert doc["teardown"]["status"] == "nothing-created"
    assert emu.inventory()["empty"], "a quota refusal created something"

"""`acagpu logs --run-id` of an `acagpu run`, from a second shell while it runs: one line that says
where that run's lines are (its own shell), not `run X has no explorer app cuda-explorer-X`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from click.testing import CliRunner

from aca_gpu.cli import cli
from tests.e2e.serving import emulator_get

ACAGPU = [sys.executable, "-m", "aca_gpu"]


def test_logs_of_a_running_acagpu_run_says_where_its_lines_are(emu: object) -> None:
    shell = dict(os.environ)
    proc = subprocess.Popen(
        [*ACAGPU, "run", "--yes", "--gpu", "t4", "--run-id", "lg1", "busybox", "--", "sh", "-c", "sleep 30"],
        env=shell, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not any(j.get("name") == "run-lg1" for j in emulator_get(shell, "inventory")["jobs"]):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        asked = CliRunner().invoke(cli, ["logs", "--run-id", "lg1", "-o", "json"])
        events = CliRunner().invoke(cli, ["logs", "--run-id", "lg1", "--system", "-o", "json"])
    finally:
        proc.kill()  # the emulator's reset before the next test removes what the run made
        proc.wait(60)
    assert asked.exit_code == 2, asked.output
    error = json.loads(asked.stdout)["error"]
    assert error["code"] == "NoExplorer" and "is an `acagpu run` (job run-lg1)" in error["message"], error
    assert "acagpu status" in error["hint"]
    assert json.loads(events.stdout)["error"]["code"] == "NoExplorer", events.output

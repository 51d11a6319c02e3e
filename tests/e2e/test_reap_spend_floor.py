"""`reap` shows the spend figure `status` shows, and says as `status` does when that figure is a
floor: a kept run whose explorer was stopped has earlier replica lives ARM no longer lists, so its
figure leaves them out (`uncounted` in JSON, `+` after the amount and a footnote in the table).
acagpu 0.5 records a kept run's spend on its group (`spend/record.py`), so the floor is what a run
kept by an earlier acagpu shows: the test takes the record off the group to make one.

Real processes: `acagpu emulator serve` and the CLI as subprocesses in a second shell."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from aca_gpu.workflow.base.notify import reap_message
from tests.e2e.serving import ACAGPU, emulator_serve


def _run(shell: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=180)


def _json(shell: dict[str, str], *args: str) -> dict[str, Any]:
    done = _run(shell, *args, "-o", "json")
    assert done.returncode == 0, (args, done.stderr[-2000:])
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def _forget_the_record(shell: dict[str, str], resource_group: str) -> None:
    """The group as acagpu 0.4 left it: no `acagpu:spent-*` record."""
    from aca_gpu.config import load_settings
    from aca_gpu.workflow.base.context import open_cloud

    cloud = open_cloud(load_settings(env=shell, file={}))
    group = cloud.get_resource_group(resource_group)
    assert group is not None and any(k.startswith("acagpu:spent") for k in group.tags), group
    tags = {k: v for k, v in group.tags.items() if not k.startswith("acagpu:spent")}
    cloud.create_resource_group(resource_group, group.location, tags)


def _stopped(shell: dict[str, str], run_id: str) -> dict[str, Any]:
    """The run as `status` shows it once its explorer is stopped (its figure then stays put)."""
    deadline = time.monotonic() + 30
    while True:
        (run,) = [r for r in _json(shell, "status")["runs"] if r["run_id"] == run_id]
        if run["phase"] == "stopped" or time.monotonic() > deadline:
            assert run["phase"] == "stopped", run
            return run
        time.sleep(0.3)


@pytest.mark.slow(18)
def test_reap_says_its_spend_figure_leaves_a_stopped_explorer_out(tmp_path: Path) -> None:
    with emulator_serve(tmp_path / "emu.env", extra=("--registered",)) as emu:
        shell = os.environ | emu | {"ACAGPU_CACHE_DIR": str(tmp_path / "cache"), "NO_COLOR": "1"}
        shell.pop("ACAGPU_ENV", None)
        up = _json(shell, "up", "--gpu", "t4", "--keep", "--ttl", "1s", "--run-id", "floor1", "--yes")
        assert up["teardown"]["status"] == "kept"
        _forget_the_record(shell, "rg-acagpu-floor1")
        run = _stopped(shell, "floor1")
        assert run["cost"]["uncounted"], run["cost"]

        reaped = _json(shell, "reap")  # a dry run: the kept run has expired
        (item,) = [i for i in reaped["items"] if i["run_id"] == "floor1"]
        assert item["status"] == "would-delete"
        assert item["spend_usd_estimate"] == run["cost"]["usd_estimate"] is not None, (item, run)
        assert item["uncounted"] == run["cost"]["uncounted"], item
        assert reaped["uncounted"] == run["cost"]["uncounted"], reaped  # the total is a floor too
        message = reap_message(reaped)  # what `reap --notify` posts says it too
        assert message is not None and "floor1" in message["text"], message
        (said,) = [line for line in message["text"].splitlines() if "rg-acagpu-floor1" in line]
        assert "+)" in said and "at least this much" in message["text"], message["text"]

        text = _run(shell, "reap").stdout
        (row,) = [line for line in text.splitlines() if "rg-acagpu-floor1" in line]
        assert row.rstrip().endswith("+"), text
        assert "past use is not counted" in text, text

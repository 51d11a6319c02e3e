"""Every recorded run in tests/fixtures/runs (made with `--record`, on Azure or the emulator) replays:
the same command, run again against `emulator replay`, must end with the recorded exit code through
exactly the recorded exchanges. A contributed recording becomes a test by adding its folder."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from aca_gpu.emulator.replay import ReplayServer
from aca_gpu.recording import META_FILE
from tests.e2e.serving import ACAGPU

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
FOLDERS = sorted(p for p in RUNS.iterdir() if (p / META_FILE).is_file())
CONFIRMS = {"up", "validate", "run", "down", "reap"}  # commands that ask before they create or delete


@pytest.mark.parametrize("folder", FOLDERS, ids=[p.name for p in FOLDERS])
def test_recorded_run_replays(folder: Path) -> None:
    meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    argv = list(meta["argv"])
    if argv[0] in CONFIRMS and "--yes" not in argv:
        argv.append("--yes")
    with ReplayServer(folder) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ACAGPU_")} | server.client_env()
        proc = subprocess.run([*ACAGPU, *argv], env=env, capture_output=True, text=True, timeout=180)
        report = server.script.report()
    assert proc.returncode == meta["exit_code"], proc.stderr
    assert report["ok"], report
    assert report["served"] >= report["recorded"] - report["unused_reads"]


def test_there_is_a_recorded_run() -> None:
    assert FOLDERS, "tests/fixtures/runs holds no recording"

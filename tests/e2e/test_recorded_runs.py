"""Every recorded run in tests/fixtures/runs (made with `--record`, on Azure or the emulator) replays:
the same command, run again against `emulator replay`, must end with the recorded exit code through
exactly the recorded exchanges. A contributed recording becomes a test by adding its folder."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from aca_gpu.emulator.replay import ReplayServer
from aca_gpu.recording import EMAIL, GUID, META_FILE, RECORDING_FILE
from tests.e2e.serving import ACAGPU

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
FOLDERS = sorted(p for p in RUNS.iterdir() if (p / META_FILE).is_file())
CONFIRMS = {"up", "validate", "run", "down", "reap"}  # commands that ask before they create or delete


@pytest.mark.parametrize("folder", FOLDERS, ids=[p.name for p in FOLDERS])
def test_recorded_run_replays(folder: Path) -> None:
    meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    argv = list(meta["argv"])
    if argv[0] in CONFIRMS and "--yes" not in argv:
        argv.insert(1, "--yes")  # before any argument: `run IMAGE COMMAND...` ends with the command
    # what `--secret-env NAME` reads must exist; its value is the recording's business, not ours
    names = {argv[i + 1]: "replayed" for i, a in enumerate(argv[:-1]) if a == "--secret-env"}
    with ReplayServer(folder) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ACAGPU_")} | names
        env |= server.client_env()
        proc = subprocess.run([*ACAGPU, *argv], env=env, capture_output=True, text=True, timeout=180)
        report = server.script.report()
    assert proc.returncode == meta["exit_code"], proc.stderr
    assert report["ok"], report
    assert report["served"] >= report["recorded"] - report["unused_reads"]


@pytest.mark.parametrize("folder", FOLDERS, ids=[p.name for p in FOLDERS])
def test_recorded_run_holds_no_secret(folder: Path) -> None:
    """A contributed recording is checked like ours: no token, no real GUID, no real address."""
    text = (folder / RECORDING_FILE).read_text(encoding="utf-8")
    text += (folder / META_FILE).read_text(encoding="utf-8")
    assert "eyJ" not in text and not re.search(r"(?i)bearer [a-z0-9._-]{20}", text)
    assert all(re.fullmatch(r"00000000-0000-[04]000-[08]000-\d{12}", g) for g in GUID.findall(text))
    assert all(e.endswith(("@example.com", "@foo.com")) for e in EMAIL.findall(text))


def test_there_are_recorded_runs() -> None:
    assert {p.name for p in FOLDERS} >= {"emulator-run-secret-env"}  # `up`: test_record_replay.py

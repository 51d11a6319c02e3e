"""`acagpu run --shards N --record DIR` on the emulator, then `acagpu emulator replay DIR` and the same
command against it: real processes throughout. The shards' executions run at the same time, so the
replayed run starts, polls and reads them in another order than the recorded one; the replay must
pair each execution's requests by what names it (its shard's token, its execution name), and still
refuse a run the recording does not have."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import requests

from aca_gpu.recording import META_FILE
from tests.e2e.serving import ACAGPU, background_server

IMAGE = "nvidia/cuda:12.4.1-base-ubuntu22.04"
SHARDS = "4"
# each shard sleeps a different time, so the recorded and replayed runs see them end in their own order
LINE = "sleep 0.$((3 - ACAGPU_SHARD_INDEX)); echo shard $ACAGPU_SHARD_INDEX of $ACAGPU_SHARD_COUNT"
FANOUT = ["--shards", SHARDS, "--parallel", SHARDS, IMAGE, "--", "sh", "-c", LINE]


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("ACAGPU_")} | {"NO_COLOR": "1"}


def _run(args: list[str], env: dict[str, str]) -> tuple[int, dict[str, Any], str]:
    proc = subprocess.run([*ACAGPU, *args], env=env, capture_output=True, text=True, timeout=240)
    doc = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    return proc.returncode, doc, proc.stderr


def _outputs(doc: dict[str, Any]) -> list[tuple[int, str]]:
    return [(s["index"], s["status"]) for s in doc["shards"]]


def test_a_recorded_fanout_replays_whatever_order_its_executions_come_in(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    code, recorded, err = _run(
        [
            "run",
            "--emulator",
            "--time-scale",
            "0.004",
            "--record",
            str(folder),
            "--yes",
            "-o",
            "json",
            *FANOUT,
        ],
        _clean_env(),
    )
    assert code == 0, err
    assert json.loads((folder / META_FILE).read_text(encoding="utf-8"))["exit_code"] == 0

    env_file = tmp_path / "replay.env"
    with background_server(["emulator", "replay", str(folder)], env_file, env=_clean_env()) as (replay, _):
        shell = _clean_env() | replay
        status_url = replay["ACAGPU_ARM_ENDPOINT"] + "/_replay/status"
        code, replayed, err = _run(["run", "--yes", "-o", "json", *FANOUT], shell)
        report = requests.get(status_url, verify=replay["ACAGPU_CA_BUNDLE"], timeout=10).json()
        assert code == 0, (err, report)
        assert _outputs(replayed) == _outputs(recorded)
        assert report["ok"] is True and report["mismatches"] == [] and report["unused_writes"] == [], report

        # still strict: another shard count is not in the recording
        code, _, _ = _run(["run", "--yes", "-o", "json", "--shards", "5", *FANOUT[2:]], shell)
        assert code != 0
        report = requests.get(status_url, verify=replay["ACAGPU_CA_BUNDLE"], timeout=10).json()
        assert report["ok"] is False and report["mismatches"]

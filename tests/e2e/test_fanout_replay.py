"""`acagpu run --shards N --record DIR` on the emulator, then `acagpu emulator replay DIR` and the same
command against it: real processes throughout. The shards' executions run at the same time, so the
replayed run starts, polls and reads them in another order than the recorded one; the replay must
pair each execution's requests by what names it (its shard's token, its execution name), and still
refuse a run the recording does not have."""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import requests

from aca_gpu.recording import META_FILE, RECORDING_FILE
from tests.e2e.serving import ACAGPU, background_server, emulator_serve

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


def _record(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """`run --shards` on its own emulator, recorded: the folder and the run's document."""
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
    return folder, recorded


def test_a_recorded_fanout_replays_whatever_order_its_executions_come_in(tmp_path: Path) -> None:
    folder, recorded = _record(tmp_path)
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


@pytest.mark.slow(33)
def test_a_fanout_recorded_on_a_busy_machine_replays_on_an_idle_one(tmp_path: Path) -> None:
    """The replay answers each resource's requests in the recorded order, so a run must ask the same
    ones whatever the time between them. Recorded here with every log stream ask 1 s slower (the
    chaos proxy; images pull for seconds at this time scale, so each shard's stream says "waiting to
    start" a few times), then replayed at full speed. When the execution was read once a second while
    its container had not started, the slow recording read it at every ask and the fast replay only
    at the first: the replay then met those recorded `Running` answers after its stream had ended,
    went on following, and asked for a log stream token and Log Analytics rows the recording did not
    have."""
    from tests.chaos.proxy import ChaosProxy

    slow = {
        "rules": [{"fault": "latency", "method": "GET", "path": "/logstream$", "count": 0, "seconds": 1.0}]
    }
    folder = tmp_path / "run"
    with (
        emulator_serve(tmp_path / "emu.env", time_scale=0.05) as emu,
        ChaosProxy(
            emu["ACAGPU_ARM_ENDPOINT"], emu["ACAGPU_CA_BUNDLE"], rules=slow, workdir=tmp_path / "proxy"
        ) as proxy,
    ):
        shell = (
            _clean_env() | emu | {"ACAGPU_ARM_ENDPOINT": proxy.endpoint, "ACAGPU_CA_BUNDLE": proxy.ca_bundle}
        )
        code, recorded, err = _run(["run", "--record", str(folder), "--yes", "-o", "json", *FANOUT], shell)
        assert code == 0, err
        assert len(proxy.events) > int(SHARDS), proxy.events  # every shard's stream asked, slowly
    exchanges = [
        json.loads(line) for line in (folder / RECORDING_FILE).read_text(encoding="utf-8").splitlines()
    ]
    waited = Counter(
        x["uri"].split("?")[0]
        for x in exchanges
        if x["uri"].split("?")[0].endswith("/logstream") and x["status"] == 400
    )
    assert waited and max(waited.values()) >= 2, waited  # a stream said "waiting to start" again and again

    serve_replay = ["emulator", "replay", str(folder)]
    with background_server(serve_replay, tmp_path / "replay.env", env=_clean_env()) as (replay, _):
        code, replayed, err = _run(["run", "--yes", "-o", "json", *FANOUT], _clean_env() | replay)
        status_url = replay["ACAGPU_ARM_ENDPOINT"] + "/_replay/status"
        report = requests.get(status_url, verify=replay["ACAGPU_CA_BUNDLE"], timeout=10).json()
        assert code == 0, (err, report)
        assert _outputs(replayed) == _outputs(recorded)
        # a shard's notes say why its lines were read from Log Analytics, if one was
        notes = {s["index"]: s.get("notes") for s in replayed["shards"] if s.get("notes")}
        assert report["mismatches"] == [], (report["mismatches"], notes)
        assert report["ok"] is True and report["unused_writes"] == [], report

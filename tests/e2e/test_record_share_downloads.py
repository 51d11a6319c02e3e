"""`--record` of a fan-out with `--output-dir` holds its Azure Files data-plane exchanges, scrubbed.

The recording held every ARM exchange (listKeys included) but none of the share's: the folders made
for the shards, the listings and the downloads of what they wrote (0 of 101 lines). The file share
client is azure-core based; its exchanges are recorded now, with no account key in any form (its
SharedKey signature is a request header, never recorded) and no SAS signature.

Real processes: `acagpu emulator serve`, the CLI as subprocesses (a 2-shard fan-out whose shards
write a file each), then the recording is read.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests

from tests.e2e.serving import emulator_serve

ACAGPU = [sys.executable, "-m", "aca_gpu"]
IMAGE = "nvidia/cuda:12.1.1-base-ubuntu22.04"


def _acagpu(shell: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=120)


def _keys(emu: dict[str, str], recorded: list[dict[str, Any]]) -> list[str]:
    """Every key of each storage account whose listKeys the run called, as the emulator answers it."""
    keys: list[str] = []
    for uri in {ln["uri"] for ln in recorded if ln["uri"].split("?")[0].endswith("/listKeys")}:
        answer = requests.post(
            # the recording names the subscription by a placeholder: the emulator's own id here
            f"{emu['ACAGPU_ARM_ENDPOINT']}/subscriptions/{emu['ACAGPU_SUBSCRIPTION']}/resourceGroups/"
            + uri.split("/resourceGroups/", 1)[1],
            headers={"Authorization": f"Bearer {emu['ACAGPU_TOKEN']}"},
            verify=emu["ACAGPU_CA_BUNDLE"],
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        keys += [str(k["value"]) for k in answer.json()["keys"]]
    return keys


def test_a_recorded_fanout_holds_its_share_exchanges_without_a_key(tmp_path: Path) -> None:
    with emulator_serve(tmp_path / "emu.env") as emu:
        shell = {k: v for k, v in os.environ.items() if not k.startswith("ACAGPU_")}
        shell |= emu | {"ACAGPU_POLLING_INTERVAL": "0.1", "ACAGPU_CACHE_DIR": str(tmp_path)}
        shell |= {"ACAGPU_EMULATOR_CONTAINERS": "off", "NO_COLOR": "1"}
        made = _acagpu(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes")
        assert made.returncode == 0, made.stderr
        out, folder = tmp_path / "out", tmp_path / "rec"
        script = 'echo "shard $ACAGPU_SHARD_INDEX" > "$ACAGPU_OUTPUT_DIR/i.txt"'
        done = _acagpu(shell, "run", "--env", "lab", "--yes", "--shards", "2", "--output-dir", str(out),
                       "--record", str(folder), IMAGE, "--", "sh", "-c", script)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert sorted(p.read_text().strip() for p in out.rglob("i.txt")) == ["shard 0", "shard 1"]
        text = (folder / "recording.jsonl").read_text(encoding="utf-8")
        lines = [json.loads(line) for line in text.splitlines() if line.strip()]
        keys = _keys(emu, lines)
    assert keys
    share = [
        ln for ln in lines if "restype=directory" in ln["uri"] or ln["uri"].split("?")[0].endswith("i.txt")
    ]
    made_folders = [ln for ln in share if ln["method"] == "PUT"]
    listings = [ln for ln in share if ln["method"] == "GET" and "comp=list" in ln["uri"]]
    downloads = [ln for ln in share if ln["method"] == "GET" and ln["uri"].split("?")[0].endswith("i.txt")]
    assert made_folders and listings and len(downloads) >= 2, [ln["uri"] for ln in lines]
    assert any("shard 1" in str(ln["response_body"]) for ln in downloads), downloads
    everything = "\n".join(
        p.read_text(encoding="utf-8", errors="replace") for p in folder.rglob("*") if p.is_file()
    )
    for key in keys:
        for form in (
            key,
            quote(key, safe=""),
            key.rstrip("="),
            key[:20],
            base64.b64encode(key.encode()).decode(),
        ):
            assert form not in everything
    assert "SharedKey" not in everything and "sig=" not in everything.replace("sig=<", "")
